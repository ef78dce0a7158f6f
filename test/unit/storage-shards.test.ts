import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { ShardedStore, type ShardedOptions } from '../../enclave/storage/sharded-store.js';
import { SHARD_MAP_NAME } from '../../enclave/storage/shard-map.js';
import { DurableStore } from '../../enclave/storage/store.js';
import { storeFixture } from '../helpers/store-fixture.js';
import { MAX_SHARDS, shardOf, shardOfAnswer } from '../../protocol/shards.js';

const fx = storeFixture('shards');
const sealingKey = randomBytes(32);

async function start(options: Partial<ShardedOptions> = {}) {
  const memory = new MemoryService(fx.embedder);
  const store = await ShardedStore.open({ blobs: fx.host(), sealingKey, embedding: memory.embeddingModel, snapshotLogBytes: 1 << 30, ...options }, memory);
  memory.useJournal(store);
  fx.track(store);
  return { memory, store };
}
const stop = (store: { close(): Promise<void> }) => fx.stop(store);

const tenants = Array.from({ length: 40 }, (_, i) => `tenant-${i}`);
const ids = (memory: MemoryService) => [...memory.entries()].map((e) => `${e.record.tenant_id}/${e.record.content}`).sort();

describe('shard mapping', () => {
  it('is a stable hash of the tenant id: the same shard in every process, for ever', () => {
    // Fixed values: a change of the hash would move every tenant to another shard's store.
    expect([shardOf('alice', 8), shardOf('bob', 8), shardOf('tenant-0', 8), shardOf('ü', 8)]).toEqual([1, 0, 2, 2]);
    expect(shardOf('anything', 1)).toBe(0);
    expect(() => shardOf('a', 0)).toThrow(RangeError);
    expect(() => shardOf('a', MAX_SHARDS + 1)).toThrow(RangeError);
  });

  it('spreads tenants over every shard', () => {
    const counts = new Array<number>(8).fill(0);
    for (let i = 0; i < 8000; i++) counts[shardOf(`t${i}`, 8)]++;
    for (const n of counts) expect(n).toBeGreaterThan(800);
  });

  it('names the first tenant\'s shard for an answer, and shard 0 for one that acted for no tenant', () => {
    expect(shardOfAnswer('', 8)).toBe(0);
    expect(shardOfAnswer(undefined, 8)).toBe(0);
    expect(shardOfAnswer('bob,carol', 8)).toBe(shardOf('bob', 8));
  });
});

describe('sharded store', () => {
  it('keeps each shard in its own folder and recovers every tenant from them', async () => {
    const { memory, store } = await start({ shards: 4 });
    for (const t of tenants) await memory.add({ tenant_id: t, content: `memory of ${t}` });
    // One batch across shards: each part goes to its own shard.
    await memory.addMany(tenants.slice(0, 10).map((t) => ({ tenant_id: t, content: `second of ${t}` })));
    const before = ids(memory);
    expect(new Set(tenants.map((t) => store.shardOf(t))).size).toBe(4);
    await stop(store);
    expect(readdirSync(fx.dir).filter((f) => f.startsWith('shard-')).sort()).toEqual(['shard-00', 'shard-01', 'shard-02', 'shard-03']);
    const again = await start();
    expect(again.store.count).toBe(4);
    expect(ids(again.memory)).toEqual(before);
    // Each shard's chain counts only its own tenants' changes.
    const perShard = [0, 1, 2, 3].map((s) => again.store.head(s).seq);
    expect(perShard.reduce((a, b) => a + b, 0)).toBe(tenants.length + 10);
  });

  it('snapshots and compacts each shard on its own', async () => {
    const { memory, store } = await start({ shards: 3, snapshotLogBytes: 2048 });
    for (let i = 0; i < 120; i++) await memory.add({ tenant_id: tenants[i % tenants.length], content: `fact number ${i} about ${tenants[i % tenants.length]}` });
    const before = ids(memory);
    await stop(store);
    for (const s of ['shard-00', 'shard-01', 'shard-02']) expect(existsSync(join(fx.dir, s, 'snapshot.sealed'))).toBe(true);
    const again = await start();
    expect(ids(again.memory)).toEqual(before);
  });

  it('fences every shard with the owner\'s generation: the old owner\'s write names its tenant\'s shard; a lower generation is refused', async () => {
    // One host store process serves both enclaves: one FsBlobStore (it keeps the sizes of the blobs it appends to).
    const blobs = fx.host();
    const old = await start({ blobs, shards: 4, generation: 1 });
    const tenant = tenants.find((t) => shardOf(t, 4) === 2)!;
    await old.memory.add({ tenant_id: tenant, content: 'before' });
    const owner = await start({ blobs, shards: 4, generation: 2 });
    await expect(old.memory.add({ tenant_id: tenant, content: 'after' })).rejects.toMatchObject({
      code: 'shard_not_owned', message: expect.stringMatching(/^shard 2 \(shard-02\/\) is no longer owned by this enclave \(owner generation 1\)/),
    });
    // From then on it serves that shard's tenants no more, reads included; another shard's it has not written since goes on until its next write.
    expect(() => old.memory.admitTenant(tenant, undefined)).toThrow(/^shard 2 \(shard-02\/\) is no longer owned/);
    const other = tenants.find((t) => shardOf(t, 4) === 1)!;
    expect(() => old.memory.admitTenant(other, undefined)).not.toThrow();
    await expect(old.memory.add({ tenant_id: other, content: 'x' })).rejects.toMatchObject({ code: 'shard_not_owned' });
    expect(() => old.memory.admitTenant(other, undefined)).toThrow(/^shard 1 \(shard-01\/\) is no longer owned/);
    await owner.memory.add({ tenant_id: tenant, content: 'by the owner' });
    await expect(start({ blobs, shards: 4, generation: 1 })).rejects.toThrow(/^shard 0 \(shard-00\/\) belongs to a newer owner: .* names owner generation 2, and this enclave opens it as generation 1/);
    expect(ids((await start({ blobs, shards: 4, generation: 2 })).memory)).toEqual([`${tenant}/before`, `${tenant}/by the owner`]);
  });

  it('refuses a shard whose folder holds another shard\'s store, naming the shard', async () => {
    const { memory, store } = await start({ shards: 4 });
    for (const t of tenants) await memory.add({ tenant_id: t, content: `memory of ${t}` });
    await stop(store);
    renameSync(join(fx.dir, 'shard-01'), join(fx.dir, 'swap'));
    renameSync(join(fx.dir, 'shard-02'), join(fx.dir, 'shard-01'));
    renameSync(join(fx.dir, 'swap'), join(fx.dir, 'shard-02'));
    await expect(start()).rejects.toThrow(/shard 1 \(shard-01\/\) holds store [0-9a-f]{32}, but the shard map says it is store [0-9a-f]{32}/);
  });

  it('refuses a count other than the one the data was made with', async () => {
    const { store } = await start({ shards: 4 });
    await stop(store);
    await expect(start({ shards: 2 })).rejects.toThrow(/SHARDS is 2, but this service's data was made with 4 shards/);
    // Unset: the recorded count.
    const again = await start();
    expect(again.store.count).toBe(4);
  });

  it('refuses shards whose map is gone (a host that would make a new map with another count)', async () => {
    const { memory, store } = await start({ shards: 4 });
    await memory.add({ tenant_id: 'a', content: 'kept' });
    await stop(store);
    rmSync(join(fx.dir, SHARD_MAP_NAME));
    await expect(start({ shards: 2 })).rejects.toThrow(/holds shards \(shard-00\/, shard-01\/, shard-02\/, …\) but not memory\/shards.sealed/);
  });

  it('refuses a map that was altered', async () => {
    const { store } = await start({ shards: 2 });
    await stop(store);
    await expect(start({ sealingKey: randomBytes(32) })).rejects.toThrow(/shards.sealed does not open: it was sealed with a different key/);
  });

  it('opens a store made before shards as one shard, with nothing lost, and keeps it so', async () => {
    // What the code before shards wrote: one store in memory/.
    const memory = new MemoryService(fx.embedder);
    const old = await DurableStore.open({ blobs: fx.host(), sealingKey, embedding: memory.embeddingModel, snapshotLogBytes: 1 << 30 }, memory);
    memory.useJournal(old);
    for (const t of tenants) await memory.add({ tenant_id: t, content: `memory of ${t}` });
    const { storeId, head } = { storeId: old.storeId, head: old.head };
    const before = ids(memory);
    await old.close();

    const { memory: m1, store } = await start({ shards: 8 });
    expect(store.count).toBe(1);
    expect(store.storeId(0)).toBe(storeId);
    expect(store.head(0)).toEqual(head);
    expect(ids(m1)).toEqual(before);
    await m1.add({ tenant_id: 'late', content: 'after the map' });
    await stop(store);
    expect(existsSync(join(fx.dir, SHARD_MAP_NAME))).toBe(true);
    const { memory: m2, store: s2 } = await start();
    expect(s2.count).toBe(1);
    expect(ids(m2)).toEqual([...before, 'late/after the map'].sort());
  });
});
