import type { ReplayMark } from '../memory/types.js';

/**
 * Replay ids of sealed requests whose changes a shard's log holds (payloads.ts 0x0c, and 0x0d
 * in snapshots), each until its request's window ends: after that the envelope is refused as
 * expired anyway (enclave/api/replay-guard.ts), so the set stays as small as one window's
 * sealed writes. Insertion order is roughly expiry order: expired ids are dropped from the front.
 */
export class ReplayIds {
  /** Id → when its window ends (epoch ms). */
  private readonly ids = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  get size(): number {
    return this.ids.size;
  }

  has(id: string): boolean {
    const expiresAt = this.ids.get(id);
    return expiresAt !== undefined && expiresAt >= this.now();
  }

  add(mark: ReplayMark): void {
    const now = this.now();
    if (!(mark.expires_at >= now)) return;
    for (const [id, expiresAt] of this.ids) {
      if (expiresAt >= now) break;
      this.ids.delete(id);
    }
    this.ids.set(mark.id, Math.max(mark.expires_at, this.ids.get(mark.id) ?? 0));
  }

  /** The ids whose window has not ended. */
  *live(): Generator<ReplayMark> {
    const now = this.now();
    for (const [id, expiresAt] of this.ids) if (expiresAt >= now) yield { id, expires_at: expiresAt };
  }
}
