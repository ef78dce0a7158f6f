/**
 * Remembers which sealed envelopes the enclave has opened, so the host cannot make it
 * act twice on one (e.g. store a memory twice) by sending a recorded envelope again.
 * An envelope is accepted only while its sealed timestamp is within `maxAgeMs` of now,
 * and remembered until then: older copies fail the timestamp check instead, so memory
 * stays bounded by the traffic of one window.
 */
export type Admission = 'ok' | 'replayed' | 'stale' | 'full';

/**
 * How far ahead of the enclave's clock a sealed timestamp may be. A client seals just
 * before sending, so only clock skew puts a timestamp in the future; a generous window
 * there would let one envelope occupy the guard for twice as long.
 */
export const MAX_FUTURE_SKEW_MS = 30_000;

export class ReplayGuard {
  /** Envelope id → when it may be forgotten (its timestamp + maxAgeMs). */
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly maxAgeMs: number,
    private readonly capacity = 100_000,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.seen.size;
  }

  admit(id: string, timestamp: number): Admission {
    const now = this.now();
    if (!Number.isFinite(timestamp) || timestamp < now - this.maxAgeMs || timestamp > now + MAX_FUTURE_SKEW_MS) return 'stale';
    if (this.seen.has(id)) return 'replayed';
    this.forgetExpired(now, false);
    if (this.seen.size >= this.capacity) this.forgetExpired(now, true);
    // Refuse rather than forget a live entry: forgetting would let its replay through.
    if (this.seen.size >= this.capacity) return 'full';
    this.seen.set(id, timestamp + this.maxAgeMs);
    return 'ok';
  }

  /** When an envelope sealed at `timestamp` leaves the window (and may be forgotten): what its changes are logged with. */
  expiresAt(timestamp: number): number {
    return timestamp + this.maxAgeMs;
  }

  /**
   * An id admitted before this enclave saw it (a shard's log names it, storage/replay-ids.ts):
   * refused from now on until `forgetAt`. Taken even when the guard is full, since forgetting
   * or refusing it would let its replay through; new envelopes then wait for room ('full').
   */
  remember(id: string, forgetAt: number): void {
    if (forgetAt < this.now() || (this.seen.get(id) ?? -Infinity) >= forgetAt) return;
    this.seen.set(id, forgetAt);
  }

  /**
   * An admitted envelope this enclave then refused without acting on it: its tenant's shard is
   * not held here (503 shard_not_owned). The host may send the same bytes to the owner, and
   * back here once the shard has moved: the shard's log, not this guard, then says whether it
   * was applied (storage/replay-ids.ts), so a refusal here must not make it "replayed".
   */
  forget(id: string): void {
    this.seen.delete(id);
  }

  /** Insertion order is roughly expiry order: drop from the front, or sweep everything. */
  private forgetExpired(now: number, everything: boolean): void {
    for (const [id, forgetAt] of this.seen) {
      if (forgetAt < now) this.seen.delete(id);
      else if (!everything) return;
    }
  }
}
