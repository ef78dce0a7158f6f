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
 * Each shard's standby: a live member (`members`), other than the shard's owner. Standbys spread
 * evenly twice over: the shards of one owner across the other members (so that its failover's
 * opens are shared out, not run at once on one enclave), and the standbys of all shards across
 * the members. One already named stays while it qualifies, unless a member would stand by for two
 * fewer of that owner's shards, or two fewer in all (one such move a call: each costs a read of
 * the shard); the rest go to the qualifying member with the fewest of that owner's, then the
 * fewest in all, then by id. No standby where the owner is the only member. A member stands by
 * for at most its `capacity` (the read-aheads its enclave keeps at once, PREPARED_SHARDS_MAX; no
 * limit where absent): past it its enclave would refuse the read, and the shard would have no
 * standby while another member had room. A shard no member has room for has none.
 */
export function chooseStandbys(owners: ReadonlyMap<number, string>, live: readonly string[], current: ReadonlyMap<number, string>, capacity: ReadonlyMap<string, number> = new Map()): Map<number, string> {
  const members = [...live].sort();
  const loads = new Map(members.map((m) => [m, 0]));
  const pairs = new Map<string, number>();
  const pair = (owner: string, m: string) => pairs.get(`${owner} ${m}`) ?? 0;
  const count = (shard: number, m: string, by: number) => {
    loads.set(m, loads.get(m)! + by);
    pairs.set(`${owners.get(shard)} ${m}`, pair(owners.get(shard)!, m) + by);
  };
  const room = (m: string) => loads.get(m)! < (capacity.get(m) ?? Infinity);
  const chosen = new Map<number, string>();
  const shards = [...owners.keys()].sort((a, b) => a - b);
  for (const shard of shards) {
    const kept = current.get(shard);
    if (kept !== undefined && loads.has(kept) && kept !== owners.get(shard) && room(kept)) {
      chosen.set(shard, kept);
      count(shard, kept, 1);
    }
  }
  const best = (shard: number): string | undefined => {
    const owner = owners.get(shard)!;
    let found: string | undefined;
    for (const m of members) {
      if (m === owner || !room(m)) continue;
      if (found === undefined || pair(owner, m) < pair(owner, found) || (pair(owner, m) === pair(owner, found) && loads.get(m)! < loads.get(found)!)) found = m;
    }
    return found;
  };
  for (const shard of shards) {
    if (chosen.has(shard)) continue;
    const m = best(shard);
    if (m === undefined) continue;
    chosen.set(shard, m);
    count(shard, m, 1);
  }
  for (const shard of shards) {
    const m = chosen.get(shard);
    const other = best(shard);
    if (m === undefined || other === undefined || other === m) continue;
    const owner = owners.get(shard)!;
    if (pair(owner, m) - pair(owner, other) < 2 && loads.get(m)! - loads.get(other)! < 2) continue;
    chosen.set(shard, other);
    count(shard, m, -1);
    count(shard, other, 1);
    break;
  }
  return chosen;
}

/**
 * How far a shard's head must have moved past its standby's read, as a share of the changes read,
 * before the standby reads it again. A refresh reads on from the last read, only what was written
 * since (the whole shard again after a compaction); the failover's open applies what was written
 * since the last refresh. At a quarter, a failover applies at most about a quarter of a full read
 * more (plus what one refresh interval adds), and few refreshes are made however large the shard.
 */
export const REFRESH_GROWTH = 0.25;

/**
 * Whether the standby's read is due: none yet (or of another member); or refreshMs old and its
 * owner's head past it, either by REFRESH_GROWTH or with no change for refreshMs (a burst of
 * writes over: one read catches up, so a failover at rest applies next to nothing); or half its
 * keep time old whatever the head (its enclave would drop it). `quietSince`: since when the
 * owner's head has not moved, as the controller saw it.
 */
export function readDue(read: StandbyRead | undefined, member: string, preparedSeq: number | undefined, ownerSeq: number | undefined, now: number, options: StandbyOptions, quietSince = now): boolean {
  if (preparedSeq === undefined || read === undefined || read.member !== member) return true;
  const age = now - read.at;
  if (age >= options.keepMs / 2) return true;
  if (age < options.refreshMs || ownerSeq === undefined || ownerSeq <= preparedSeq) return false;
  return ownerSeq - preparedSeq >= preparedSeq * REFRESH_GROWTH || now - quietSince >= options.refreshMs;
}
