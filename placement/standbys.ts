/**
 * Warm standbys (docs/cluster.md): which member keeps each shard read ahead, and when its read
 * is due again. Pure decisions; the controller sends the PrepareShard and CloseShard calls.
 */

export interface StandbyOptions {
  /** A standby is read again no sooner than this, and only once its owner wrote REFRESH_GROWTH more changes. */
  refreshMs: number;
  /** How long its enclave keeps it without a refresh (PrepareShard's keep_ms); one not written to is read again at half of it. */
  keepMs: number;
}

/** A standby's last read, as the controller saw it end. */
export interface StandbyRead {
  member: string;
  /** When the read ended (or when a new leader first saw it). */
  at: number;
  seq: number;
}

/**
 * Each shard's standby: a live member (`members`), other than the shard's owner. One already named
 * stays while it qualifies, unless it stands by for two or more shards more than the member that
 * would take it (so that standbys, and the shards they take over, spread evenly); the rest go to
 * the qualifying member with the fewest, by id on a tie. No standby where the owner is the only member.
 */
export function chooseStandbys(owners: ReadonlyMap<number, string>, live: readonly string[], current: ReadonlyMap<number, string>): Map<number, string> {
  const members = [...live].sort();
  const loads = new Map(members.map((m) => [m, 0]));
  const chosen = new Map<number, string>();
  const shards = [...owners.keys()].sort((a, b) => a - b);
  for (const shard of shards) {
    const kept = current.get(shard);
    if (kept !== undefined && loads.has(kept) && kept !== owners.get(shard)) {
      chosen.set(shard, kept);
      loads.set(kept, loads.get(kept)! + 1);
    }
  }
  const fewest = (shard: number): string | undefined => {
    let best: string | undefined;
    for (const m of members) if (m !== owners.get(shard) && (best === undefined || loads.get(m)! < loads.get(best)!)) best = m;
    return best;
  };
  for (const shard of shards) {
    if (chosen.has(shard)) continue;
    const m = fewest(shard);
    if (m === undefined) continue;
    chosen.set(shard, m);
    loads.set(m, loads.get(m)! + 1);
  }
  // One shard a call moves between standbys: each such move costs a read of the shard.
  for (const shard of shards) {
    const m = chosen.get(shard);
    const other = fewest(shard);
    if (m === undefined || other === undefined || loads.get(m)! - loads.get(other)! < 2) continue;
    chosen.set(shard, other);
    loads.set(m, loads.get(m)! - 1);
    loads.set(other, loads.get(other)! + 1);
    break;
  }
  return chosen;
}

/**
 * How far a shard's head must have moved past its standby's read, as a share of the changes read,
 * before the standby reads it again. A read costs the whole shard; the failover's open applies
 * what was written since. At a quarter, a failover applies at most about a quarter of a full read
 * more (plus what one refresh interval adds), and a standby spends about four reads of a change
 * for each change written, whatever the shard's size.
 */
export const REFRESH_GROWTH = 0.25;

/**
 * Whether the standby's read is due: none yet (or of another member); or refreshMs old and its
 * owner's head REFRESH_GROWTH past it; or half its keep time old whatever the head (its enclave
 * would drop it).
 */
export function readDue(read: StandbyRead | undefined, member: string, preparedSeq: number | undefined, ownerSeq: number | undefined, now: number, options: StandbyOptions): boolean {
  if (preparedSeq === undefined || read === undefined || read.member !== member) return true;
  const age = now - read.at;
  if (age >= options.keepMs / 2) return true;
  return age >= options.refreshMs && ownerSeq !== undefined && ownerSeq - preparedSeq >= Math.max(1, preparedSeq * REFRESH_GROWTH);
}
