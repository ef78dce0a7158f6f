/**
 * A shard read ahead of its open (prepareShard, a planned move's first step: docs/cluster.md) on
 * a real sealed store in a temp folder, with enclaves A (the owner), B (the new owner) and, for
 * the hostile cases, C, each its own ShardedStore and memories on one host store: the read-ahead
 * writes nothing and serves nothing; the open that follows reads only what was written since and
 * holds every change, the tail included; one never opened leaves memory. And the host as an
 * attacker between the read-ahead and the switch: a log cut back, forked, tampered with, swapped
 * or compacted, or a newer owner's fence, never gets B to serve the read-ahead where the files
 * say otherwise: B opens in full (the files' answer) or refuses, as an open without it would.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { BlobStore } from '../../common/blob-store.js';
import { ApiError } from '../../common/errors.js';
import { Freshness, type FoundStore } from '../../enclave/cluster/freshness.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { CorruptStoreError, PreparedLimitError, ShardHeldError, StaleOwnerError } from '../../enclave/storage/errors.js';
import { logName } from '../../enclave/storage/log-file.js';
import { SNAPSHOT_NAME } from '../../enclave/storage/snapshot.js';
import { ShardedStore, type ShardChecks, type ShardedOptions } from '../../enclave/storage/sharded-store.js';
import { shardOf } from '../../protocol/shards.js';
import { storeFixture } from '../helpers/store-fixture.js';

const fixture = storeFixture('shard-prepare');
const sealingKey = randomBytes(32);
const SHARDS = 4;
const host = (): BlobStore => fixture.sharedHost();

/** An enclave: its memories and its shards, none open. */
async function enclave(options: Partial<ShardedOptions> = {}) {
  const memory = new MemoryService(fixture.embedder);
  const store = await ShardedStore.open({ blobs: host(), sealingKey, embedding: memory.embeddingModel, snapshotLogBytes: 1 << 30, shards: SHARDS, openShards: 'none', ...options }, memory);
  memory.useJournal(store);
  fixture.track(store);
  return { memory, store };
}
type Enclave = Awaited<ReturnType<typeof enclave>>;

const tenantOf = (shard: number, n = 0) => {
  for (let i = 0, found = 0; ; i++) if (shardOf(`tenant-${i}`, SHARDS) === shard && found++ === n) return `tenant-${i}`;
};
const one = tenantOf(1);
const two = tenantOf(2);

const write = async (e: Enclave, tenant: string, contents: string[]) => {
  for (const content of contents) await e.memory.add({ tenant_id: tenant, content, dedupe: false });
};
const notes = (label: string, n: number) => Array.from({ length: n }, (_, i) => `${label} note ${i} about the harbour's ${i % 2 ? 'tides' : 'boats'}`);
const contents = (e: Enclave, tenant: string) => (e.memory.list(tenant, 1000)?.data ?? []).map((r) => r.content).sort();
const segment = (shard: number, generation = 1) => join(fixture.dir, `shard-0${shard}`, logName(generation));
const notHeld = (e: Enclave, tenant: string) => {
  try {
    e.memory.admitTenant(tenant, undefined);
    return undefined;
  } catch (err) {
    return err instanceof ApiError ? err.code : err;
  }
};

/** The hostile-host cases run for the switch, and for a standby's refresh (a prepare again) made first, then the switch. */
const modes = [['the switch', false], ['a refresh, then the switch', true]] as const;

/**
 * B's switch to shard 1 at `generation`: its open, or (`refreshFirst`) a refresh of its read-ahead
 * and then its open. `continued`: where the read that went on from the read-ahead started (the
 * refresh's when there is one, else the open's); undefined when it read in full instead.
 */
const switching = (refreshFirst: boolean) => async (b: Enclave, generation: number, checks?: ShardChecks) => {
  const refreshed = refreshFirst ? await b.store.prepareShard(1) : undefined;
  const opened = await b.store.openShard(1, generation, checks);
  return { opened, refreshed, continued: refreshed ? refreshed.readOnFrom : opened.recovery.readAhead };
};

describe('a shard read ahead, then opened', () => {
  it('holds every change, those written between the read-ahead and the switch included, and continues the chain', async () => {
    const a = await enclave();
    await a.store.openShard(1, 1);
    await write(a, one, notes('before', 5));
    const b = await enclave();
    const prepared = await b.store.prepareShard(1);
    expect(prepared.head).toEqual(a.store.head(1));
    // The owner goes on writing: the tail B reads at the switch.
    await write(a, one, notes('tail', 3));
    await a.store.closeShard(1);
    const closedAt = a.store.head(1);
    const opened = await b.store.openShard(1, 2);
    expect(opened.recovery.readAhead).toEqual({ seq: 5 });
    expect(b.store.head(1)).toEqual(closedAt);
    expect(contents(b, one)).toEqual([...notes('before', 5), ...notes('tail', 3)].sort());
    // It writes on, and a full open elsewhere finds the same.
    await write(b, one, ['after the switch']);
    await b.store.closeShard(1);
    const c = await enclave();
    const full = await c.store.openShard(1, 3);
    expect(full.recovery.readAhead).toBeUndefined();
    expect(contents(c, one)).toEqual([...notes('before', 5), ...notes('tail', 3), 'after the switch'].sort());
  });

  it('serves nothing of it before the switch, and writes nothing: the owner goes on writing undisturbed', async () => {
    const a = await enclave();
    await a.store.openShard(1, 1);
    await write(a, one, notes('before', 3));
    const b = await enclave();
    const files = readFileSync(segment(1));
    await b.store.prepareShard(1);
    expect(readFileSync(segment(1))).toEqual(files);
    expect(b.store.isPrepared(1)).toBe(true);
    expect(b.store.open).toEqual([]);
    expect(b.store.holds(1)).toBe(false);
    // Every call for a tenant is admitted first (enclave/api): refused, as for a shard not held.
    expect(notHeld(b, one)).toBe('shard_not_owned');
    await expect(b.memory.add({ tenant_id: one, content: 'written to the read-ahead' })).rejects.toThrow(/not held by this enclave/);
    // A was not fenced: its writes go on.
    await write(a, one, ['still A\'s']);
    expect(a.store.holds(1)).toBe(true);
  });

  it('is refused for a shard the enclave serves', async () => {
    const b = await enclave();
    await b.store.openShard(1, 1);
    await expect(b.store.prepareShard(1)).rejects.toBeInstanceOf(ShardHeldError);
    expect(b.store.holds(1)).toBe(true);
  });
});

describe('a read-ahead never switched to', () => {
  it('leaves memory after its time, and the open is then a full one', async () => {
    const a = await enclave();
    await a.store.openShard(1, 1);
    await write(a, one, notes('kept', 4));
    const b = await enclave({ preparedTtlMs: 50 });
    await b.store.prepareShard(1);
    expect(b.memory.usage.memories).toBe(4);
    const deadline = Date.now() + 5000;
    while (b.store.isPrepared(1) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(b.store.isPrepared(1)).toBe(false);
    expect(b.memory.usage).toEqual({ tenants: 0, memories: 0, storedBytes: 0, terms: 0 });
    await a.store.closeShard(1);
    const opened = await b.store.openShard(1, 2);
    expect(opened.recovery.readAhead).toBeUndefined();
    expect(contents(b, one)).toEqual(notes('kept', 4).sort());
  });

  it('several are kept at once (warm standbys), each leaving memory at its own CloseShard', async () => {
    const a = await enclave();
    await a.store.openShard(1, 1);
    await a.store.openShard(2, 1);
    await write(a, one, notes('one', 2));
    await write(a, two, notes('two', 3));
    const b = await enclave();
    await b.store.prepareShard(1);
    await b.store.prepareShard(2);
    expect(b.store.preparedHeads).toEqual([{ shard: 1, head: a.store.head(1) }, { shard: 2, head: a.store.head(2) }]);
    expect(b.memory.usage.memories).toBe(5);
    expect(notHeld(b, one)).toBe('shard_not_owned');
    expect(notHeld(b, two)).toBe('shard_not_owned');
    await b.store.closeShard(2);
    expect(b.store.isPrepared(2)).toBe(false);
    expect(b.store.isPrepared(1)).toBe(true);
    expect(b.memory.usageOf((t) => t === two)).toEqual({ tenants: 0, memories: 0 });
    expect(b.memory.usage.memories).toBe(2);
    await b.store.closeShard(1);
    expect(b.memory.usage).toEqual({ tenants: 0, memories: 0, storedBytes: 0, terms: 0 });
  });

  it('no more than maxPrepared at once: one more is refused before anything is read, and one prepared again still fits', async () => {
    const a = await enclave();
    await a.store.openShard(1, 1);
    await a.store.openShard(2, 1);
    await write(a, one, notes('one', 2));
    await write(a, two, notes('two', 3));
    const b = await enclave({ maxPrepared: 1 });
    await b.store.prepareShard(1);
    expect(() => b.store.prepareShard(2)).toThrow(PreparedLimitError);
    expect(b.store.isPrepared(2)).toBe(false);
    expect(b.memory.usageOf((t) => t === two)).toEqual({ tenants: 0, memories: 0 });
    // A refresh of the one kept reads on from its last read, in its place.
    await write(a, one, ['since']);
    const again = await b.store.prepareShard(1);
    expect(again.head).toEqual(a.store.head(1));
    expect(b.memory.usage.memories).toBe(3);
    // Freed by its close, the slot takes another.
    await b.store.closeShard(1);
    await b.store.prepareShard(2);
    expect(b.memory.usage.memories).toBe(3);
  });

  it('each is kept for the time its prepare asked (a standby\'s), not the default', async () => {
    const a = await enclave();
    await a.store.openShard(1, 1);
    await a.store.openShard(2, 1);
    await write(a, one, notes('one', 1));
    await write(a, two, notes('two', 1));
    const b = await enclave({ preparedTtlMs: 50 });
    await b.store.prepareShard(1, 60_000);
    await b.store.prepareShard(2);
    const deadline = Date.now() + 5000;
    while (b.store.isPrepared(2) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(b.store.isPrepared(2)).toBe(false);
    expect(b.store.isPrepared(1)).toBe(true);
    expect(b.memory.usage.memories).toBe(1);
  });
});

/** The host store, with reads or writes of the blobs `held` names waiting until `release()`. */
function holding(held: (name: string, op: 'read' | 'put') => boolean): { blobs: BlobStore; release: () => void; arm: () => void } {
  let release!: () => void;
  const released = new Promise<void>((r) => { release = r; });
  let armed = false;
  const blobs = new Proxy(host(), {
    get(target, prop, receiver) {
      if (prop === 'read' || prop === 'put') {
        return async (name: string, ...rest: unknown[]) => {
          if (armed && held(name, prop)) await released;
          return (target[prop] as (...args: unknown[]) => unknown).call(target, name, ...rest);
        };
      }
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { blobs, release, arm: () => { armed = true; } };
}

const until = async (done: () => boolean) => {
  const deadline = Date.now() + 10_000;
  while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(done()).toBe(true);
};

describe('a standby\'s refresh (a shard prepared again)', () => {
  it('reads on through a segment the owner rolled to (its snapshot not written yet); after the snapshot, reads the shard again in full; the switch then holds every change', async () => {
    // A's snapshot waits: its compaction has rolled to log 2 and goes no further until released.
    const snapshot = holding((name, op) => op === 'put' && name.endsWith(SNAPSHOT_NAME));
    const a = await enclave({ blobs: snapshot.blobs });
    await a.store.openShard(1, 1);
    await write(a, one, notes('first', 3));
    const b = await enclave();
    await b.store.prepareShard(1);
    await write(a, one, notes('before the roll', 2));
    snapshot.arm();
    const compacting = a.store.lastStore(1)!.compact();
    await until(() => existsSync(segment(1, 2)));
    await write(a, one, notes('in log 2', 2));
    const rolled = await b.store.prepareShard(1);
    expect(rolled.readOnFrom).toEqual({ seq: 3 });
    expect(rolled.head).toEqual(a.store.head(1));
    expect(contents(b, one)).toEqual([...notes('first', 3), ...notes('before the roll', 2), ...notes('in log 2', 2)].sort());
    snapshot.release();
    await compacting;
    await write(a, one, notes('after the snapshot', 2));
    const again = await b.store.prepareShard(1);
    expect(again.readOnFrom).toBeUndefined();
    expect(again.head).toEqual(a.store.head(1));
    const refreshedTo = again.head.seq;
    await write(a, one, ['the tail']);
    await a.store.closeShard(1);
    const opened = await b.store.openShard(1, 2);
    expect(opened.recovery.readAhead).toEqual({ seq: refreshedTo });
    expect(b.store.head(1)).toEqual(a.store.head(1));
    expect(contents(b, one)).toEqual([...notes('first', 3), ...notes('before the roll', 2), ...notes('in log 2', 2), ...notes('after the snapshot', 2), 'the tail'].sort());
  });

  it('steps aside while an open of another shard is asked for, and goes on after it', async () => {
    // B's open of shard 1 takes as long as the test wants: its reads wait until released.
    const slow = holding((name, op) => op === 'read' && name.startsWith('shard-01/'));
    const a = await enclave();
    await a.store.openShard(1, 1);
    await a.store.openShard(2, 1);
    await write(a, one, notes('one', 2));
    await write(a, two, notes('two', 2));
    const b = await enclave({ blobs: slow.blobs });
    await b.store.prepareShard(2);
    await write(a, two, notes('two since', 3));
    await a.store.closeShard(1);
    slow.arm();
    const order: string[] = [];
    const opened = b.store.openShard(1, 2).then(() => order.push('open of shard 1'));
    const refreshed = b.store.prepareShard(2).then((p) => {
      order.push('refresh of shard 2');
      return p;
    });
    // Run alone, the refresh reads 3 changes (milliseconds): it waits for the open instead.
    await Promise.race([refreshed, new Promise((r) => setTimeout(r, 1000))]);
    expect(order).toEqual([]);
    slow.release();
    const [, prepared] = await Promise.all([opened, refreshed]);
    expect(order).toEqual(['open of shard 1', 'refresh of shard 2']);
    expect(prepared.readOnFrom).toEqual({ seq: 2 });
    expect(contents(b, one)).toEqual(notes('one', 2).sort());
    expect(b.store.preparedHeads).toEqual([{ shard: 2, head: a.store.head(2) }]);
  });

  it('of the shard whose open is asked for, does not step aside (for that open or another): the open waits for it and reads on from it', async () => {
    const a = await enclave();
    await a.store.openShard(1, 1);
    await write(a, one, notes('read ahead', 3));
    const b = await enclave();
    await b.store.prepareShard(1);
    await write(a, one, notes('refreshed', 2));
    await a.store.closeShard(1);
    const refreshed = b.store.prepareShard(1);
    const [prepared, opened] = await Promise.all([refreshed, b.store.openShard(1, 2), b.store.openShard(2, 1)]);
    expect(prepared.readOnFrom).toEqual({ seq: 3 });
    expect(opened.recovery.readAhead).toEqual({ seq: 5 });
    expect(b.store.head(1)).toEqual(a.store.head(1));
    expect(contents(b, one)).toEqual([...notes('read ahead', 3), ...notes('refreshed', 2)].sort());
  });
});

describe.each(modes)('the host between the read-ahead and the switch (%s)', (_mode, refreshFirst) => {
  const switchTo = switching(refreshFirst);
  /**
   * A owns shard 1: writes `common`, the host keeps a copy of the log, A writes `ahead`; B reads
   * the shard ahead (`ahead` included); A writes `tail` and closes the shard.
   */
  async function readAheadOf({ common = notes('common', 3), ahead = [] as string[], tail = [] as string[] } = {}) {
    const a = await enclave();
    await a.store.openShard(1, 1);
    await write(a, one, common);
    const copy = readFileSync(segment(1));
    await write(a, one, ahead);
    const b = await enclave();
    await b.store.prepareShard(1);
    const preparedBytes = readFileSync(segment(1)).length;
    await write(a, one, tail);
    await a.store.closeShard(1);
    return { a, b, copy, preparedBytes };
  }

  it('a fork after the point read (the log put back to it, another owner writing other changes): B continues into the files\' chain', async () => {
    const { b, preparedBytes } = await readAheadOf({ ahead: notes('read ahead', 2), tail: notes('never served', 2) });
    writeFileSync(segment(1), readFileSync(segment(1)).subarray(0, preparedBytes));
    const c = await enclave();
    await c.store.openShard(1, 2);
    await write(c, one, notes('C', 2));
    await c.store.closeShard(1);
    const { continued } = await switchTo(b, 3);
    expect(continued).toEqual({ seq: 5 });
    expect(b.store.head(1)).toEqual(c.store.head(1));
    expect(contents(b, one)).toEqual([...notes('common', 3), ...notes('read ahead', 2), ...notes('C', 2)].sort());
  });

  it('a log cut back to an older copy: B opens in full and serves what the files hold, not what it read ahead', async () => {
    const { b, copy } = await readAheadOf({ common: notes('old', 2), ahead: notes('newer', 3) });
    writeFileSync(segment(1), copy);
    const { continued } = await switchTo(b, 2);
    expect(continued).toBeUndefined();
    expect(b.store.head(1).seq).toBe(2);
    expect(contents(b, one)).toEqual(notes('old', 2).sort());
  });

  it('a fork before the point read (an older copy put back, another owner writing other changes): B serves the files\' chain, never a mix', async () => {
    const { b, copy } = await readAheadOf({ ahead: notes('read ahead', 2) });
    writeFileSync(segment(1), copy);
    const c = await enclave();
    await c.store.openShard(1, 2);
    await write(c, one, notes('fork', 5));
    await c.store.closeShard(1);
    const { continued } = await switchTo(b, 3);
    expect(continued).toBeUndefined();
    expect(b.store.head(1)).toEqual(c.store.head(1));
    expect(contents(b, one)).toEqual([...notes('common', 3), ...notes('fork', 5)].sort());
  });

  it('a fork ending where the read ended (as many frames, other changes): B opens in full', async () => {
    // B reads the header and 3 changes; the files then hold the header, 2 changes and C's fence.
    const { b, copy } = await readAheadOf({ common: notes('common', 2), ahead: ['read ahead'] });
    writeFileSync(segment(1), copy);
    const c = await enclave();
    await c.store.openShard(1, 2);
    await c.store.closeShard(1);
    const { continued } = await switchTo(b, 3);
    expect(continued).toBeUndefined();
    expect(contents(b, one)).toEqual(notes('common', 2).sort());
  });

  it('a tail tampered with in the middle: refused, as a full open refuses it, and nothing of the shard stays in memory', async () => {
    const { b, preparedBytes } = await readAheadOf({ tail: notes('tail', 3) });
    const bytes = readFileSync(segment(1));
    // A byte of the tail's first frame flipped, the frames after it still authentic: damage in the middle.
    bytes[preparedBytes + 60] ^= 0xff;
    writeFileSync(segment(1), bytes);
    await expect(switchTo(b, 2)).rejects.toBeInstanceOf(CorruptStoreError);
    expect(b.store.holds(1)).toBe(false);
    expect(b.memory.usage.memories).toBe(0);
    const c = await enclave();
    await expect(c.store.openShard(1, 2)).rejects.toBeInstanceOf(CorruptStoreError);
  });

  it('a byte of the part read ahead altered since: not read again, so B serves what it read and the tail; the next full open refuses the files', async () => {
    const { b } = await readAheadOf({ tail: notes('tail', 2) });
    const bytes = readFileSync(segment(1));
    // Inside the second frame (the first change), long before the last frame B read.
    bytes[700] ^= 0x01;
    writeFileSync(segment(1), bytes);
    // What B serves is authentic: the frames as they were when it read them, then the tail's.
    const { continued } = await switchTo(b, 2);
    expect(continued).toEqual({ seq: 3 });
    expect(contents(b, one)).toEqual([...notes('common', 3), ...notes('tail', 2)].sort());
    await b.store.closeShard(1);
    // The damage is the files', seen by whoever reads them in full next.
    const c = await enclave();
    await expect(c.store.openShard(1, 3)).rejects.toBeInstanceOf(CorruptStoreError);
  });

  it('a fork whose frames line up with the read (the last frame read rewritten, same size, then more): B opens in full, never a mix', async () => {
    // Generation 2 fences the log, then writes one note: the frames B reads ahead end with it.
    const a = await enclave();
    await a.store.openShard(1, 1);
    await write(a, one, notes('common', 2));
    await a.store.closeShard(1);
    const copy = readFileSync(segment(1));
    const a2 = await enclave();
    await a2.store.openShard(1, 2);
    await write(a2, one, ['a note from the history B read']);
    const b = await enclave();
    await b.store.prepareShard(1);
    const preparedBytes = readFileSync(segment(1)).length;
    await write(a2, one, ['the tail of the history B read']);
    await a2.store.closeShard(1);
    // The host puts the copy back; C (generation 2 too) fences it and writes a note as long: the
    // segment is again exactly as long as B read it, then goes on.
    writeFileSync(segment(1), copy);
    const c = await enclave();
    await c.store.openShard(1, 2);
    await write(c, one, ['a note from the history C made']);
    expect(readFileSync(segment(1)).length).toBe(preparedBytes);
    await write(c, one, ['the tail of the history C made']);
    await c.store.closeShard(1);
    // Read on from where B's read ended, the frames would chain by number and file: only the last frame read tells.
    const { continued } = await switchTo(b, 3);
    expect(continued).toBeUndefined();
    expect(b.store.head(1)).toEqual(c.store.head(1));
    expect(contents(b, one)).toEqual([...notes('common', 2), 'a note from the history C made', 'the tail of the history C made'].sort());
  });

  it('the shard\'s folder swapped with another shard\'s: refused (the shard map names its store), nothing served', async () => {
    const a = await enclave();
    await a.store.openShard(1, 1);
    await a.store.openShard(2, 1);
    await write(a, one, notes('one', 2));
    await write(a, two, notes('two', 2));
    const b = await enclave();
    await b.store.prepareShard(1);
    await a.store.closeShard(1);
    await a.store.closeShard(2);
    renameSync(join(fixture.dir, 'shard-01'), join(fixture.dir, 'shard-tmp'));
    renameSync(join(fixture.dir, 'shard-02'), join(fixture.dir, 'shard-01'));
    renameSync(join(fixture.dir, 'shard-tmp'), join(fixture.dir, 'shard-02'));
    await expect(switchTo(b, 2)).rejects.toBeInstanceOf(CorruptStoreError);
    expect(b.store.holds(1)).toBe(false);
    expect(b.memory.usage.memories).toBe(0);
  });

  it('a compaction since the read-ahead (its snapshot replaced): B opens in full, with every change', async () => {
    const a = await enclave();
    await a.store.openShard(1, 1);
    await write(a, one, notes('before', 3));
    const b = await enclave();
    await b.store.prepareShard(1);
    await write(a, one, notes('tail', 2));
    await a.store.lastStore(1)!.compact();
    await write(a, one, notes('after the snapshot', 2));
    await a.store.closeShard(1);
    const { continued } = await switchTo(b, 2);
    expect(continued).toBeUndefined();
    expect(contents(b, one)).toEqual([...notes('before', 3), ...notes('tail', 2), ...notes('after the snapshot', 2)].sort());
  });

  it('a newer owner\'s fence written since: the switch is refused as a stale owner, exactly as a full open', async () => {
    const { b } = await readAheadOf({ tail: notes('tail', 2) });
    const c = await enclave();
    await c.store.openShard(1, 7);
    await c.store.closeShard(1);
    await expect(switchTo(b, 3)).rejects.toBeInstanceOf(StaleOwnerError);
    expect(b.store.holds(1)).toBe(false);
    expect(b.memory.usage.memories).toBe(0);
    // Above it, the open (a full one now) succeeds.
    await b.store.openShard(1, 8);
    expect(contents(b, one)).toEqual([...notes('common', 3), ...notes('tail', 2)].sort());
  });
});

describe.each(modes)('the host store answering the switch\'s read from an offset (%s)', (_mode, refreshFirst) => {
  const switchTo = switching(refreshFirst);
  /**
   * A host store whose reads from an offset (only the switch makes them) are `served` instead:
   * given the segment's bytes on disk and the offset asked, the bytes it answers with. Reads from
   * the start, those of a full open, are honest.
   */
  function lying(served: (file: Buffer, offset: number) => Buffer): BlobStore & { offsets: number[] } {
    const offsets: number[] = [];
    const honest = host();
    const blobs = new Proxy(honest, {
      get(target, prop, receiver) {
        if (prop === 'read') {
          return async (name: string, from = 0) => {
            if (from === 0) return target.read(name);
            offsets.push(from);
            const bytes = served(readFileSync(join(fixture.dir, name)), from);
            return (async function* () { if (bytes.length > 0) yield bytes; })();
          };
        }
        if (prop === 'offsets') return offsets;
        const value = Reflect.get(target, prop, receiver) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    return blobs as BlobStore & { offsets: number[] };
  }

  /** A writes `common`; B (on `blobs`) reads the shard ahead; A writes `tail` and closes it. */
  async function switchOver(blobs: BlobStore) {
    const a = await enclave();
    await a.store.openShard(1, 1);
    await write(a, one, notes('common', 3));
    const b = await enclave({ blobs });
    await b.store.prepareShard(1);
    const preparedBytes = readFileSync(segment(1)).length;
    await write(a, one, notes('tail', 3));
    await a.store.closeShard(1);
    return { a, b, preparedBytes };
  }
  const everything = [...notes('common', 3), ...notes('tail', 3)].sort();

  it('honest: the switch reads from the last frame read ahead on, not the segment\'s start', async () => {
    const blobs = lying((file, offset) => file.subarray(offset));
    const { a, b, preparedBytes } = await switchOver(blobs);
    const { opened, continued } = await switchTo(b, 2);
    expect(continued).toEqual({ seq: 3 });
    expect(blobs.offsets[0]).toBeGreaterThan(0);
    expect(blobs.offsets[0]).toBeLessThan(preparedBytes);
    // A refresh first: it read from there, and the open from the refresh's last frame on.
    expect(blobs.offsets).toHaveLength(refreshFirst ? 2 : 1);
    if (refreshFirst) {
      expect(opened.recovery.readAhead).toEqual({ seq: 6 });
      expect(blobs.offsets[1]).toBeGreaterThan(preparedBytes);
    }
    expect(b.store.head(1)).toEqual(a.store.head(1));
    expect(contents(b, one)).toEqual(everything);
  });

  it.each([
    ['the whole segment, as a host store without offsets sends it', (file: Buffer) => file],
    ['from a byte later than asked', (file: Buffer, offset: number) => file.subarray(offset + 1)],
    ['fewer bytes than the read ahead ended at', (file: Buffer, offset: number) => file.subarray(offset, offset + 10)],
    ['nothing (the segment now shorter than the offset)', () => Buffer.alloc(0)],
  ])('other bytes than the segment\'s from the offset asked (%s): B opens in full', async (_what, served: (file: Buffer, offset: number) => Buffer) => {
    const { b } = await switchOver(lying(served));
    const { continued } = await switchTo(b, 2);
    expect(continued).toBeUndefined();
    expect(contents(b, one)).toEqual(everything);
  });

  it.each([
    ['a frame skipped', (file: Buffer, ended: number) => file.subarray(ended + frameLength(file, ended))],
    ['another segment\'s frames, under the same key', (_file: Buffer, _ended: number, other: Buffer) => other.subarray(32 + frameLength(other, 32))],
  ])('a tail that does not go on from the last frame read (%s): B opens in full, never serving it', async (_what, tail: (file: Buffer, ended: number, other: Buffer) => Buffer) => {
    const ended = { at: 0, other: Buffer.alloc(0) };
    const { a, b, preparedBytes } = await switchOver(lying((file, offset) => Buffer.concat([file.subarray(offset, ended.at), tail(file, ended.at, ended.other)])));
    ended.at = preparedBytes;
    await a.store.openShard(2, 1);
    await write(a, two, notes('two', 2));
    await a.store.closeShard(2);
    ended.other = readFileSync(segment(2));
    const { continued } = await switchTo(b, 2);
    expect(continued).toBeUndefined();
    expect(contents(b, one)).toEqual(everything);
  });

  it('the tail withheld (the last frame read sent, nothing after it): the head reached falls short of the one witnessed (acceptHead), so B opens in full and reaches it', async () => {
    const { a, b } = await switchOver(lying((file, offset) => file.subarray(offset, offset + frameLength(file, offset))));
    // What a member witnessed: A's last head (freshness across enclaves, enclave/cluster/freshness.ts).
    const witnessed = { ...a.store.head(1), store: a.store.lastStore(1)!.storeId };
    const refused: string[] = [];
    const acceptHead = (found: FoundStore) => {
      try {
        Freshness.check('shard 1', witnessed, found);
      } catch (err) {
        refused.push((err as Error).message);
        throw err;
      }
    };
    const { opened } = await switchTo(b, 2, { acceptHead });
    // The head read on to was refused (changes after it are missing); the full open's reaches the witnessed one.
    expect(refused).toEqual([expect.stringMatching(/changes after it are missing/)]);
    expect(opened.recovery.readAhead).toBeUndefined();
    expect(b.store.head(1)).toEqual(a.store.head(1));
    expect(contents(b, one)).toEqual(everything);
  });
});

/** The length of the sealed frame at `at` (magic, box length, nonce, box). */
function frameLength(file: Buffer, at: number): number {
  return 4 + 4 + 24 + file.readUInt32BE(at + 4);
}

describe('standbys of a lost owner (failover: no close, the owner killed)', () => {
  /** A owns shards 1 and 2 and writes; B stands by for both; A writes more and is "killed" (never closes). */
  async function standbyOf({ ahead = 2, tail = 2 } = {}) {
    const a = await enclave();
    await a.store.openShard(1, 1);
    await a.store.openShard(2, 1);
    await write(a, one, notes('one common', 3));
    await write(a, two, notes('two common', 3));
    const copy = readFileSync(segment(1));
    await write(a, one, notes('one read ahead', ahead));
    await write(a, two, notes('two read ahead', ahead));
    const b = await enclave();
    await b.store.prepareShard(1, 60_000);
    await b.store.prepareShard(2, 60_000);
    await write(a, one, notes('one tail', tail));
    await write(a, two, notes('two tail', tail));
    return { a, b, copy };
  }
  /** A gone before the host tampers with its files (this test's host store is shared in-process: A's handles must not outlive it). */
  const gone = async (a: Enclave) => {
    await a.store.closeShard(1);
    await a.store.closeShard(2);
  };
  const all = (label: string, ahead = 2, tail = 2) => [...notes(`${label} common`, 3), ...notes(`${label} read ahead`, ahead), ...notes(`${label} tail`, tail)].sort();

  it('opens each from its read-ahead with every acknowledged change, the head where the owner left it, and fences the owner', async () => {
    const { a, b } = await standbyOf();
    const heads = [a.store.head(1), a.store.head(2)];
    const opened = await b.store.openShard(1, 2);
    expect(opened.recovery.readAhead).toEqual({ seq: 5 });
    expect(b.store.head(1)).toEqual(heads[0]);
    expect(contents(b, one)).toEqual(all('one'));
    // Shard 2 is still read ahead, not served, and untouched by shard 1's open.
    expect(b.store.isPrepared(2)).toBe(true);
    expect(notHeld(b, two)).toBe('shard_not_owned');
    expect((await b.store.openShard(2, 2)).recovery.readAhead).toEqual({ seq: 5 });
    expect(b.store.head(2)).toEqual(heads[1]);
    expect(contents(b, two)).toEqual(all('two'));
    // The killed owner woken: its next write is refused.
    await expect(a.memory.add({ tenant_id: one, content: 'after the failover', dedupe: false })).rejects.toThrow();
    expect(contents(b, one)).toEqual(all('one'));
  });

  it('a log cut back to an older copy before the failover: that shard opens in full from the files, the other from its read-ahead, nothing mixed', async () => {
    const { a, b, copy } = await standbyOf();
    await gone(a);
    writeFileSync(segment(1), copy);
    const opened = await b.store.openShard(1, 2);
    expect(opened.recovery.readAhead).toBeUndefined();
    expect(contents(b, one)).toEqual(notes('one common', 3).sort());
    expect(b.store.isPrepared(2)).toBe(true);
    expect((await b.store.openShard(2, 2)).recovery.readAhead).toEqual({ seq: 5 });
    expect(contents(b, two)).toEqual(all('two'));
  });

  it('a fork before the point read (an older copy put back, another owner writing): the standby serves the files\' chain, never a mix', async () => {
    const { a, b, copy } = await standbyOf();
    await gone(a);
    writeFileSync(segment(1), copy);
    const c = await enclave();
    await c.store.openShard(1, 2);
    await write(c, one, notes('fork', 2));
    await c.store.closeShard(1);
    const opened = await b.store.openShard(1, 3);
    expect(opened.recovery.readAhead).toBeUndefined();
    expect(b.store.head(1)).toEqual(c.store.head(1));
    expect(contents(b, one)).toEqual([...notes('one common', 3), ...notes('fork', 2)].sort());
    // Shard 2's read-ahead is still only that: not served.
    expect(b.store.isPrepared(2)).toBe(true);
    expect(notHeld(b, two)).toBe('shard_not_owned');
  });

  it('a snapshot replaced (the owner compacted) after the standby\'s read: it opens in full, with every change', async () => {
    const { a, b } = await standbyOf();
    await a.store.lastStore(1)!.compact();
    await write(a, one, notes('after the snapshot', 2));
    const opened = await b.store.openShard(1, 2);
    expect(opened.recovery.readAhead).toBeUndefined();
    expect(contents(b, one)).toEqual([...all('one'), ...notes('after the snapshot', 2)].sort());
  });

  it('the part read ahead tampered with: not read again, so that shard opens from its read-ahead and the tail; the next full open refuses the files; the other still read ahead', async () => {
    const { a, b } = await standbyOf();
    await gone(a);
    const bytes = readFileSync(segment(1));
    bytes[700] ^= 0x01;
    writeFileSync(segment(1), bytes);
    const opened = await b.store.openShard(1, 2);
    expect(opened.recovery.readAhead).toEqual({ seq: 5 });
    expect(contents(b, one)).toEqual(all('one'));
    expect(b.store.isPrepared(2)).toBe(true);
    expect(b.memory.usageOf((t) => t === two).memories).toBe(5);
    await b.store.closeShard(1);
    const c = await enclave();
    await expect(c.store.openShard(1, 3)).rejects.toBeInstanceOf(CorruptStoreError);
  });
});
