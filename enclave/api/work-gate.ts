import { ApiError, timedOut } from '../../common/errors.js';

export interface WorkLimits {
  /** Requests handled at once; one more is refused with 503 at once rather than queued. */
  maxInFlight: number;
  /**
   * Requests one API key may have in flight at once (its fair share; 429 beyond), so one
   * caller holding open streams cannot take every place. Unlimited when absent.
   */
  maxInFlightPerKey?: number;
  /** Longest one request may take, whatever deadline the caller gave. */
  timeoutMs: number;
  /** Longest one streamed answer may run (enclave/api/stream.ts). */
  maxStreamMs?: number;
}

/** The longest delay setTimeout honours (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

export const keyBusy = (max: number) => new ApiError('too_many_concurrent_requests',
  `this API key already has ${max} requests in progress, its share of the enclave; wait for one to finish`, { headers: { 'retry-after': '1' } });

export const overloaded = () => new ApiError('enclave_overloaded', 'the enclave is at capacity; retry shortly', { headers: { 'retry-after': '1' } });

/**
 * Bounds the enclave's work: at most `maxInFlight` requests run at once, and each answers
 * within min(timeoutMs, the caller's deadline). Refusing at the door keeps overload from
 * piling up memory and latency; a request that times out still holds its place until its
 * work really ends, so the cap counts real work, not answered requests.
 */
export class WorkGate {
  private active = 0;
  private readonly perOwner = new Map<string, number>();

  constructor(private readonly limits: WorkLimits) {}

  get inFlight(): number {
    return this.active;
  }

  /**
   * Runs `work`; throws 503 when full and 504 when the time runs out. `deadline` is epoch
   * ms; `timeoutMs` replaces the gate's own limit for work with its own (chat: the model's).
   */
  async run<T>(work: () => Promise<T>, deadline = Infinity, timeoutMs = this.limits.timeoutMs, owner = ''): Promise<T> {
    const budget = Math.min(timeoutMs, deadline - Date.now());
    if (budget <= 0) throw timedOut('the request reached the enclave after its deadline', 'deadline_exceeded');
    const maxPerKey = this.limits.maxInFlightPerKey;
    const held = this.perOwner.get(owner) ?? 0;
    // Requests without a key (open mode, or a sealed call's outer request) share no quota.
    if (owner !== '' && maxPerKey !== undefined && held >= maxPerKey) throw keyBusy(maxPerKey);
    if (this.active >= this.limits.maxInFlight) throw overloaded();
    this.active++;
    if (owner !== '') this.perOwner.set(owner, held + 1);
    const done = work().finally(() => {
      this.active--;
      if (owner === '') return;
      const left = this.perOwner.get(owner)! - 1;
      if (left === 0) this.perOwner.delete(owner);
      else this.perOwner.set(owner, left);
    });
    // No deadline and no limit of its own (chat without a gRPC deadline): no timer at all.
    // setTimeout would clamp Infinity, or anything past 2^31 - 1 ms, to 1 ms and fire at once.
    if (budget === Infinity) return done;
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(timedOut(`the enclave did not finish within ${Math.round(budget)} ms`, 'enclave_timeout')), Math.min(budget, MAX_TIMER_MS));
    });
    try {
      return await Promise.race([done, expired]);
    } finally {
      clearTimeout(timer);
      // The work may still fail after the timeout answered; that is already reported.
      done.catch(() => {});
    }
  }
}
