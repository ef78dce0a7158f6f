/** Warm standbys' choices (placement/standbys.ts): who stands by for each shard, and when its read is due again. */
import { describe, expect, it } from 'vitest';
import { chooseStandbys, readDue, REFRESH_GROWTH } from '../../placement/standbys.js';

const owners = (...ids: string[]) => new Map(ids.map((id, shard) => [shard, id]));
const perMember = (chosen: Map<number, string>) => [...chosen.values()].reduce((m, id) => m.set(id, (m.get(id) ?? 0) + 1), new Map<string, number>());

describe('chooseStandbys', () => {
  it('names for each shard a live member other than its owner, spread evenly', () => {
    const placed = owners('a', 'a', 'b', 'b', 'c', 'c');
    const chosen = chooseStandbys(placed, ['a', 'b', 'c'], new Map());
    expect(chosen.size).toBe(6);
    for (const [shard, id] of chosen) expect(id).not.toBe(placed.get(shard));
    expect([...perMember(chosen).values()]).toEqual([2, 2, 2]);
  });

  it('keeps the standbys named while they qualify (each change costs a read), and replaces one that is the owner now or does not answer', () => {
    const current = new Map([[0, 'b'], [1, 'c'], [2, 'a'], [3, 'c']]);
    const chosen = chooseStandbys(owners('a', 'a', 'b', 'c'), ['a', 'b', 'c'], current);
    expect(chosen.get(0)).toBe('b');
    expect(chosen.get(1)).toBe('c');
    expect(chosen.get(2)).toBe('a');
    expect(chosen.get(3)).not.toBe('c');
    const lost = chooseStandbys(owners('a', 'a', 'b', 'c'), ['a', 'b'], current);
    expect(lost.get(1)).toBe('b');
    expect([...lost.values()]).not.toContain('c');
  });

  it('spreads one owner\'s shards over the other members, so that its failover\'s opens are shared out', () => {
    const placed = owners('a', 'b', 'c', 'a', 'b', 'c', 'a', 'b', 'c', 'a', 'b', 'c');
    const chosen = chooseStandbys(placed, ['a', 'b', 'c'], new Map());
    for (const owner of ['a', 'b', 'c']) {
      const ofOwner = [...chosen].filter(([s]) => placed.get(s) === owner).map(([, id]) => id);
      expect([...perMember(new Map(ofOwner.entries())).values()]).toEqual([2, 2]);
    }
    expect([...perMember(chosen).values()]).toEqual([4, 4, 4]);
  });

  it('names a member standby for no more shards than its enclave keeps read ahead, after a failover left one member owning none', () => {
    // 12 shards on 3 enclaves, b lost and back: a and c own 6 each, b none. Spread by owner alone,
    // b would stand by for 6, and its enclave (PREPARED_SHARDS_MAX 4) refuse 2 of the reads.
    const placed = owners('a', 'a', 'c', 'a', 'c', 'a', 'c', 'a', 'c', 'a', 'c', 'c');
    const capacity = new Map([['a', 4], ['b', 4], ['c', 4]]);
    const chosen = chooseStandbys(placed, ['a', 'b', 'c'], new Map(), capacity);
    expect(chosen.size).toBe(12);
    for (const [shard, id] of chosen) expect(id).not.toBe(placed.get(shard));
    expect(perMember(chosen).get('b')).toBe(4);
    expect(Math.max(...perMember(chosen).values())).toBeLessThanOrEqual(4);
    // Standbys named before, past a member's room, go elsewhere; and where no member has room, a shard has none.
    const before = new Map([...placed.keys()].map((shard) => [shard, 'b']));
    expect(perMember(chooseStandbys(placed, ['a', 'b', 'c'], before, capacity)).get('b')).toBe(4);
    const tight = chooseStandbys(placed, ['a', 'b', 'c'], new Map(), new Map([['a', 1], ['b', 2], ['c', 1]]));
    expect(tight.size).toBe(4);
    expect(Object.fromEntries(perMember(tight))).toEqual({ a: 1, b: 2, c: 1 });
  });

  it('none where the owner is the only member', () => {
    expect(chooseStandbys(owners('a', 'a'), ['a'], new Map()).size).toBe(0);
  });

  it('moves one standby a call from a member with two or more than another', () => {
    const current = new Map([[0, 'b'], [1, 'b'], [2, 'b'], [3, 'b']]);
    const once = chooseStandbys(owners('a', 'a', 'a', 'a'), ['a', 'b', 'c'], current);
    expect(perMember(once)).toEqual(new Map([['b', 3], ['c', 1]]));
    const twice = chooseStandbys(owners('a', 'a', 'a', 'a'), ['a', 'b', 'c'], once);
    expect(perMember(twice)).toEqual(new Map([['b', 2], ['c', 2]]));
    expect(chooseStandbys(owners('a', 'a', 'a', 'a'), ['a', 'b', 'c'], twice)).toEqual(twice);
  });
});

describe('readDue', () => {
  const options = { refreshMs: 30_000, keepMs: 600_000 };
  const read = { member: 'b', at: 0, seq: 1000 };
  it('reads a standby with no read-ahead, or one read on another member', () => {
    expect(readDue(undefined, 'b', undefined, 1000, 0, options)).toBe(true);
    expect(readDue(read, 'b', undefined, 1000, 1, options)).toBe(true);
    expect(readDue(read, 'c', 1000, 1000, 1, options)).toBe(true);
  });
  it('reads it again once refreshMs old and its owner wrote a quarter more, not before', () => {
    const grown = 1000 + 1000 * REFRESH_GROWTH;
    expect(readDue(read, 'b', 1000, grown, 29_999, options)).toBe(false);
    expect(readDue(read, 'b', 1000, grown - 1, 30_000, options)).toBe(false);
    expect(readDue(read, 'b', 1000, grown, 30_000, options)).toBe(true);
    // An empty shard's first change is enough.
    expect(readDue({ ...read, seq: 0 }, 'b', 0, 1, 30_000, options)).toBe(true);
  });
  it('reads it again, behind by less, once its owner\'s head has not moved for refreshMs (a burst of writes over)', () => {
    expect(readDue(read, 'b', 1000, 1010, 40_000, options, 20_000)).toBe(false);
    expect(readDue(read, 'b', 1000, 1010, 50_000, options, 20_000)).toBe(true);
    expect(readDue(read, 'b', 1000, 1000, 50_000, options, 0)).toBe(false);
  });

  it('reads an unchanged one again at half its keep time, before its enclave drops it', () => {
    expect(readDue(read, 'b', 1000, 1000, 299_999, options)).toBe(false);
    expect(readDue(read, 'b', 1000, 1000, 300_000, options)).toBe(true);
  });
});
