/**
 * Shards opened and closed at runtime (#38 item 2), on a real sealed store in a temp folder:
 * an enclave started with no shard open (SHARDS_OPEN=none) refuses its tenants with 503
 * shard_not_owned naming the shard; OpenShard recovers a shard's tenants into the running
 * memories, CloseShard waits for the writes in flight, then drops them; a reopened shard holds
 * every acknowledged memory and nothing that was refused.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { BlobStore } from '../../common/blob-store.js';
import { ApiError } from '../../common/errors.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import type { MemoryRecord } from '../../enclave/memory/types.js';
import { StaleOwnerError } from '../../enclave/storage/errors.js';
import { ShardedStore, type ShardedOptions } from '../../enclave/storage/sharded-store.js';
import { SHARD_MISS_HEADER, shardOf } from '../../protocol/shards.js';
import { storeFixture } from '../helpers/store-fixture.js';

const fixture = storeFixture('shard-moves');
const sealingKey = randomBytes(32);
const SHARDS = 4;
const host = (): BlobStore => fixture.sharedHost();

async function start(options: Partial<ShardedOptions> = {}, blobs: BlobStore = host()) {
  const memory = new MemoryService(fixture.embedder);
  const store = await ShardedStore.open({ blobs, sealingKey, embedding: memory.embeddingModel, snapshotLogBytes: 1 << 30, shards: SHARDS, openShards: 'none', ...options }, memory);
  memory.useJournal(store);
  fixture.track(store);
  return { memory, store };
}

/** A tenant of each shard. */
const tenantOf = (shard: number) => {
  for (let i = 0; ; i++) if (shardOf(`tenant-${i}`, SHARDS) === shard) return `tenant-${i}`;
};
const one = tenantOf(1);
const zero = tenantOf(0);

/** What a call for `tenant` is refused with, or undefined when it is let through. */
function refusal(memory: MemoryService, tenant: string): ApiError | undefined {
  try {
    memory.admitTenant(tenant, undefined);
    return undefined;
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
}
const expectNotHeld = (err: unknown, shard: number) => {
  expect(err).toBeInstanceOf(ApiError);
  const e = err as ApiError;
  expect({ status: e.status, code: e.code, header: e.headers[SHARD_MISS_HEADER] }).toEqual({ status: 503, code: 'shard_not_owned', header: String(shard) });
  expect(e.message).toMatch(new RegExp(`^shard ${shard} \\(shard-0${shard}/\\) is not held by this enclave`));
};

/** A blob store whose appends wait while `hold` is set, and say when one is waiting. */
function gatedBlobs() {
  const inner = host();
  let release: () => void = () => {};
  let held: Promise<void> | undefined;
  let waiting: () => void = () => {};
  const gate = {
    hold() {
      held = new Promise((r) => { release = r; });
      return new Promise<void>((r) => { waiting = r; });
    },
    open() {
      held = undefined;
      release();
    },
  };
  const blobs: BlobStore = Object.assign(Object.create(inner) as BlobStore, {
    async append(name: string, offset: number, data: Uint8Array) {
      if (held && data.length > 0) {
        waiting();
        await held;
      }
      return inner.append(name, offset, data);
    },
  });
  return { blobs, gate };
}

describe('an enclave with no shard open (SHARDS_OPEN=none)', () => {
  it('holds none, refuses every tenant with 503 shard_not_owned naming its shard, and writes nothing', async () => {
    const { memory, store } = await start();
    expect(store.open).toEqual([]);
    expect(store.count).toBe(SHARDS);
    expectNotHeld(refusal(memory, one), 1);
    expectNotHeld(refusal(memory, zero), 0);
    // A change that got past admission (it cannot, but the journal checks again) writes nothing.
    await expect(memory.add({ tenant_id: one, content: 'never stored' })).rejects.toSatisfy((err) => {
      expectNotHeld(err, 1);
      return true;
    });
    expect(memory.usage).toMatchObject({ tenants: 0, memories: 0 });
  });

  it('refuses a batch with one tenant in a shard not held, whole, before anything is written', async () => {
    const { memory, store } = await start();
    await store.openShard(0, 1);
    await expect(memory.addMany([{ tenant_id: zero, content: 'held shard' }, { tenant_id: one, content: 'shard not held' }])).rejects.toSatisfy((err) => {
      expectNotHeld(err, 1);
      return true;
    });
    expect(memory.usage.memories).toBe(0);
    expect(store.head(0).seq).toBe(0);
    // Reopened elsewhere: nothing of the batch was stored.
    await store.close();
    const again = await start();
    await again.store.openShard(0, 2);
    expect(memory.list(zero, 10)?.data).toEqual([]);
    expect(again.memory.list(zero, 10)?.data).toEqual([]);
  });
});

describe('a shard opened, closed and opened again at runtime', () => {
  it('serves its tenants once open, drops them on close (refusing them with its number), and finds every acknowledged memory when reopened', async () => {
    const { memory, store } = await start();
    await store.openShard(1, 5);
    expect(store.open).toEqual([1]);
    expect(refusal(memory, one)).toBeUndefined();
    expectNotHeld(refusal(memory, zero), 0);
    const added: MemoryRecord[] = [];
    for (const content of ['the cat sleeps on the mat', 'rain is expected on Tuesday', 'the invoice is due in March']) added.push(await memory.add({ tenant_id: one, content }));
    const head = store.head(1);
    expect(head.seq).toBe(3);

    await store.closeShard(1);
    expect(store.open).toEqual([]);
    expectNotHeld(refusal(memory, one), 1);
    // Its tenants left memory, with everything they cost.
    expect(memory.usage).toEqual({ tenants: 0, memories: 0, storedBytes: 0, terms: 0 });
    // Answers naming the shard still name its last head (signing.ts); a read that finds its tenant gone is refused, not "nothing".
    expect(store.head(1)).toEqual(head);
    expect(() => memory.list(one, 10)).toThrow(/^shard 1 \(shard-01\/\) is not held by this enclave/);
    expect(() => memory.get(one, added[0].id)).toThrow(ApiError);
    await expect(memory.query({ tenant_id: one, query: 'invoice', top_k: 1 })).rejects.toThrow(ApiError);
    // Closing again: nothing to do.
    await store.closeShard(1);

    await store.openShard(1, 6);
    expect(refusal(memory, one)).toBeUndefined();
    for (const record of added) expect(memory.get(one, record.id)).toEqual(record);
    const [best] = await memory.query({ tenant_id: one, query: 'when is the invoice due', top_k: 1 });
    expect(best.record.id).toBe(added[2].id);
    expect(store.head(1)).toEqual(head);
    expect(store.generation(1)).toBe(6);
    // The same generation again: nothing to do; a lower one than it holds: refused, naming both.
    await store.openShard(1, 6);
    await expect(store.openShard(1, 4)).rejects.toThrow(StaleOwnerError);
    await expect(store.openShard(1, 4)).rejects.toThrow(/generation 6, and this enclave opens it as generation 4/);
    expect(store.open).toEqual([1]);
    // Out of range.
    expect(() => store.openShard(SHARDS, 1)).toThrow(RangeError);
  });

  it('is refused when another enclave opened it with a higher generation since, and keeps nothing of it in memory', async () => {
    const a = await start();
    await a.store.openShard(1, 3);
    await a.memory.add({ tenant_id: one, content: 'written by generation 3' });
    await a.store.closeShard(1);
    const b = await start();
    await b.store.openShard(1, 7);
    await b.store.closeShard(1);
    await expect(a.store.openShard(1, 5)).rejects.toThrow(/names owner generation 7, and this enclave opens it as generation 5/);
    expect(a.store.open).toEqual([]);
    expect(a.memory.usage.memories).toBe(0);
    expectNotHeld(refusal(a.memory, one), 1);
  });

  it('close waits for the writes in flight: they are acknowledged and kept, and a write after it is refused and not stored', async () => {
    const { blobs, gate } = gatedBlobs();
    const { memory, store } = await start({}, blobs);
    await store.openShard(1, 1);
    const waiting = gate.hold();
    const inFlight = memory.add({ tenant_id: one, content: 'in flight when the close began' });
    await waiting;
    let closed = false;
    const closing = store.closeShard(1).then(() => { closed = true; });
    // Refused at once, before the close is done: no new change for the shard.
    expectNotHeld(refusal(memory, one), 1);
    await expect(memory.add({ tenant_id: one, content: 'sent after the close began' })).rejects.toSatisfy((err) => {
      expectNotHeld(err, 1);
      return true;
    });
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(closed).toBe(false);
    gate.open();
    const acknowledged = await inFlight;
    await closing;
    expect(memory.usage.memories).toBe(0);

    await store.openShard(1, 2);
    expect(memory.list(one, 10)?.data.map((r) => r.content)).toEqual(['in flight when the close began']);
    expect(memory.get(one, acknowledged.id)).toEqual(acknowledged);
  });

  it('a shard moved to another enclave continues the same chain there, and the old one refuses its next write', async () => {
    const a = await start();
    await a.store.openShard(1, 1);
    await a.memory.add({ tenant_id: one, content: 'before the move' });
    const before = a.store.head(1);
    // Not closed on A (a stale owner): B opens it with a higher generation.
    const b = await start();
    await b.store.openShard(1, 2);
    expect(b.store.head(1)).toEqual(before);
    expect(b.store.ancestry(1, before)).toBe('yes');
    await b.memory.add({ tenant_id: one, content: 'after the move' });
    expect(b.store.ancestry(1, before)).toBe('yes');
    expect(b.store.head(1).seq).toBe(before.seq + 1);
    await expect(a.memory.add({ tenant_id: one, content: 'the stale owner writes' })).rejects.toSatisfy((err) => {
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).code).toBe('shard_not_owned');
      expect((err as ApiError).headers[SHARD_MISS_HEADER]).toBe('1');
      return true;
    });
    expect(a.store.holds(1)).toBe(false);
    expect(a.store.open).toEqual([]);
    expect(() => a.store.refuseIfNotHeld(one)).toThrow(/no longer owned by this enclave \(owner generation 1\)/);
    const c = await start();
    await c.store.openShard(1, 3);
    expect(c.memory.list(one, 10)?.data.map((r) => r.content).sort()).toEqual(['after the move', 'before the move']);
  });
});

describe('SHARDS_OPEN=all (the default)', () => {
  it('opens every shard at start, as before', async () => {
    const { memory, store } = await start({ openShards: 'all', generation: 1 });
    expect(store.open).toEqual([0, 1, 2, 3]);
    expect(refusal(memory, one)).toBeUndefined();
    await memory.add({ tenant_id: one, content: 'served at once' });
    expect(store.head(1).seq).toBe(1);
  });
});
