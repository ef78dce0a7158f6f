import { ApiError, timedOut } from '../../common/errors.js';

export interface WorkLimits {
  /** Requests handled at once; one more is refused with 503 at once rather than queued. */
  maxInFlight: number;
  /**
   * Requests one API key may have in flight at once (its fair share; 429 beyond), so one
   * caller holding open streams cannot take every place. Unlimited when absent.
   */
  maxInFlightPerKey?: number;
  /**
   * With keys on, requests that hold no valid API key (attestation, a sealed envelope before
   * it opens, a refused key) may have this many places at once between them. Unlimited when absent.
   */
  maxInFlightKeyless?: number;
  /** Longest one request may take, whatever deadline the caller gave. */
  timeoutMs: number;
  /** Longest one streamed answer may run (enclave/api/stream.ts). */
  maxStreamMs?: number;
}

/** The longest delay setTimeout honours (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

export const keyBusy = (max: number) => new ApiError('too_many_concurrent_requests',
  `this API key already has ${max} requests in progress, its share of the enclave; wait for one to finish`, { headers: { 'retry-after': '1' } });

export const keylessBusy = (max: number) => new ApiError('too_many_concurrent_requests',
  `${max} requests without a valid API key are already in progress, their share of the enclave; wait for one to finish`, { headers: { 'retry-after': '1' } });

export const overloaded = () => new ApiError('enclave_overloaded', 'the enclave is at capacity; retry shortly', { headers: { 'retry-after': '1' } });

/**
 * Whose share of the gate a request takes: one per API key, one for everything that holds
 * no valid key (`keyless`), or none at all (open mode without a key).
 */
export interface Share {
  id: string;
  /** Places this share may hold at once; undefined: only the gate's own cap. */
  limit?: number;
  keyless?: boolean;
}

export const NO_SHARE: Share = { id: '' };

/** A request's place in the gate, which a sealed call moves to its inner key's share once opened. */
export interface Place {
  moveTo(share: Share): void;
}

/**
 * Bounds the enclave's work: at most `maxInFlight` requests run at once, and each answers
 * within min(timeoutMs, the caller's deadline). Refusing at the door keeps overload from
 * piling up memory and latency; a request that times out still holds its place until its
 * work really ends, so the cap counts real work, not answered requests.
 */
export class WorkGate {
  private active = 0;
  private readonly perShare = new Map<string, number>();

  constructor(private readonly limits: WorkLimits) {}

  get inFlight(): number {
    return this.active;
  }

  /**
   * Runs `work`; throws 503 when full, 429 when `share` holds all it may, and 504 when the
   * time runs out. `deadline` is epoch ms; `timeoutMs` replaces the gate's own limit for
   * work with its own (chat: the model's).
   */
  async run<T>(work: (place: Place) => Promise<T>, deadline = Infinity, timeoutMs = this.limits.timeoutMs, share: Share = NO_SHARE): Promise<T> {
    const budget = Math.min(timeoutMs, deadline - Date.now());
    if (budget <= 0) throw timedOut('the request reached the enclave after its deadline', 'deadline_exceeded');
    this.checkShare(share);
    if (this.active >= this.limits.maxInFlight) throw overloaded();
    this.active++;
    let current = share;
    this.count(current, 1);
    const place: Place = {
      moveTo: (next) => {
        if (next.id === current.id) return;
        this.checkShare(next);
        this.count(current, -1);
        this.count(next, 1);
        current = next;
      },
    };
    let done: Promise<T>;
    try {
      done = work(place);
    } catch (error) {
      done = Promise.reject(error);
    }
    done = done.finally(() => {
      this.active--;
      this.count(current, -1);
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

  /**
   * The share of a request whose matched API key is `key` (its id, never the key itself).
   * Without one: with keys on, every such request shares one capped `keyless` share, so
   * unauthenticated traffic cannot take the places keyed callers need; in open mode none.
   */
  shareOf(key: string | undefined, keysOn: boolean): Share {
    if (key !== undefined) return { id: `key:${key}`, limit: this.limits.maxInFlightPerKey };
    return keysOn ? { id: 'keyless', limit: this.limits.maxInFlightKeyless, keyless: true } : NO_SHARE;
  }

  /** Places `share` holds now (tests and metrics). */
  heldBy(share: Share): number {
    return this.perShare.get(share.id) ?? 0;
  }

  private checkShare(share: Share): void {
    if (share.limit === undefined || this.heldBy(share) < share.limit) return;
    throw share.keyless ? keylessBusy(share.limit) : keyBusy(share.limit);
  }

  private count(share: Share, delta: number): void {
    if (share.limit === undefined) return;
    const left = this.heldBy(share) + delta;
    if (left === 0) this.perShare.delete(share.id);
    else this.perShare.set(share.id, left);
  }
}
