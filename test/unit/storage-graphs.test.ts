import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import type { MemoryRecord } from '../../enclave/memory/types.js';
import { graphName, readGraphs, type TenantGraph } from '../../enclave/storage/graph-file.js';
import { deriveStorageKey } from '../../enclave/storage/sealed-file.js';
import { DurableStore } from '../../enclave/storage/store.js';
import { DEFAULT_HNSW } from '../../enclave/vectors/hnsw-index.js';
import { flipByte, frameSpans } from '../helpers/sealed-files.js';
import { storeFixture } from '../helpers/store-fixture.js';

/**
 * The vector graphs saved with each snapshot (storage/graph-file.ts), through a real host
 * store's folder: what a shard opened from them answers, what the host can do to them, and
 * what they must never hold. test/integration/shard-graphs.test.ts runs the real processes.
 */
const fx = storeFixture('graphs');
const sealingKey = randomBytes(32);
/** Tenants above 64 memories get an HNSW graph, so a few hundred memories make one. */
const tiers = { promoteAbove: 64, hnsw: DEFAULT_HNSW };

async function start() {
  const memory = new MemoryService(fx.embedder, { vectorIndex: tiers });
  const store = await DurableStore.open({ blobs: fx.host(), prefix: '', sealingKey, embedding: memory.embeddingModel, snapshotLogBytes: 1 << 30 }, memory);
  memory.useJournal(store);
  fx.track(store);
  return { memory, store };
}

const words = ['apple', 'river', 'garden', 'piano', 'winter', 'castle', 'coffee', 'island', 'doctor', 'engine', 'forest', 'silver'];
const sentence = (i: number) => `${words[i % 12]} ${words[Math.floor(i / 12) % 12]} ${words[Math.floor(i / 144) % 12]} number ${i}`;
const graphFiles = () => readdirSync(fx.dir).filter((name) => name.startsWith('graph-')).sort();

/** Every query's top ten, ids and scores: what two opens of the same store must agree on. */
async function answers(memory: MemoryService, tenant: string): Promise<string[]> {
  const out: string[] = [];
  for (let q = 0; q < 40; q++) {
    const hits = await memory.query({ tenant_id: tenant, query: sentence(q * 7 + 3), top_k: 10 });
    out.push(hits.map((h) => `${h.record.id}:${h.score.toFixed(6)}`).join(' '));
  }
  return out;
}

async function savedGraphs(generation: number): Promise<TenantGraph[]> {
  const bytes = readFileSync(join(fx.dir, graphName(generation)));
  async function* chunks() { yield bytes; }
  // The snapshot's meta is not at hand here: read the file's own and hand it back.
  const meta = JSON.parse(await firstFrameJson(bytes)) as { store_id: string; generation: number; head: { seq: number; hash: string } };
  return readGraphs(chunks(), deriveStorageKey(sealingKey), graphName(generation), meta);
}
async function firstFrameJson(bytes: Buffer): Promise<string> {
  const { readSealedFile } = await import('../../enclave/storage/sealed-file.js');
  const file = await readSealedFile(bytes, 'graph', deriveStorageKey(sealingKey), 'graph', { allowTail: false });
  return file.payloads[0].subarray(1).toString('utf8');
}

/** A store with a large tenant and a small one, compacted (so a graph is saved), then a tail of adds, updates and deletes. */
async function storeWithTail() {
  const a = await start();
  const big: MemoryRecord[] = [];
  for (let i = 0; i < 300; i++) big.push(await a.memory.add({ tenant_id: 'big', content: sentence(i) }));
  for (let i = 0; i < 20; i++) await a.memory.add({ tenant_id: 'small', content: sentence(i) });
  await a.store.compact();
  for (let i = 300; i < 330; i++) await a.memory.add({ tenant_id: 'big', content: sentence(i) });
  for (let i = 0; i < 10; i++) await a.memory.update('big', big[i].id, { content: `${sentence(i + 500)} changed` });
  for (let i = 10; i < 20; i++) await a.memory.delete('big', big[i].id);
  const expected = await answers(a.memory, 'big');
  await a.store.close();
  return expected;
}

describe('vector graphs saved with the snapshot', () => {
  it('open instead of being rebuilt, with the tail replayed on top, and answer as a rebuilt index does', async () => {
    const expected = await storeWithTail();
    expect(graphFiles()).toEqual([graphName(2)]);

    const restored = await start();
    expect(restored.store.recovery.graphs).toEqual({ restored: 1 });
    expect(await answers(restored.memory, 'big')).toEqual(expected);
    expect(restored.memory.usage).toMatchObject({ tenants: 2, memories: 340 });
    await fx.stop(restored.store);

    // Without the graph the index is rebuilt, and answers the same.
    unlinkSync(join(fx.dir, graphName(2)));
    const rebuilt = await start();
    expect(rebuilt.store.recovery.graphs).toBeUndefined();
    expect(await answers(rebuilt.memory, 'big')).toEqual(expected);
  });

  it('are refused when the host alters, cuts or swaps them, and the index is rebuilt', async () => {
    const expected = await storeWithTail();
    const path = join(fx.dir, graphName(2));
    const good = readFileSync(path);
    const spans = frameSpans(good);

    // One byte changed inside a frame: its seal fails.
    flipByte(path, spans[3][0] + 40);
    const altered = await start();
    expect(altered.store.recovery.graphs).toMatchObject({ restored: 0, refused: expect.stringMatching(/does not authenticate/) });
    expect(await answers(altered.memory, 'big')).toEqual(expected);
    await fx.stop(altered.store);

    // Cut short.
    writeFileSync(path, good.subarray(0, spans[spans.length - 2][1]));
    const cut = await start();
    expect(cut.store.recovery.graphs).toMatchObject({ restored: 0, refused: expect.stringMatching(/ends early/) });
    expect(await answers(cut.memory, 'big')).toEqual(expected);
    await fx.stop(cut.store);

    // An older graph of the same store put in the newer one's place: it names another snapshot.
    writeFileSync(path, good);
    const c = await start();
    await c.memory.add({ tenant_id: 'big', content: 'one more after the first graph' });
    const next = await c.memory.query({ tenant_id: 'big', query: sentence(9), top_k: 5 });
    await c.store.compact();
    await fx.stop(c.store);
    expect(graphFiles()).toEqual([graphName(3)]);
    writeFileSync(join(fx.dir, graphName(3)), good);
    const swapped = await start();
    expect(swapped.store.recovery.graphs).toMatchObject({ restored: 0, refused: expect.stringMatching(/saved with another snapshot/) });
    expect((await swapped.memory.query({ tenant_id: 'big', query: sentence(9), top_k: 5 })).map((h) => h.record.id)).toEqual(next.map((h) => h.record.id));
  });

  it('keep no deleted memory\'s vector: the graph written at the next compaction holds it nowhere', async () => {
    const a = await start();
    const big: MemoryRecord[] = [];
    for (let i = 0; i < 200; i++) big.push(await a.memory.add({ tenant_id: 'big', content: sentence(i) }));
    // Words no other memory has together (the static embedder ignores their order).
    const gone = await a.memory.add({ tenant_id: 'big', content: 'silver forest engine doctor island' });
    await a.store.compact();
    const vector = [...a.memory.entries()].find((e) => e.record.id === gone.id)!.vector;
    await a.memory.delete('big', gone.id);
    await a.store.compact();
    expect(graphFiles()).toEqual([graphName(3)]);

    const [{ graph }] = await savedGraphs(3);
    // The label is still in the graph (a waypoint, free for the next add)...
    expect(graph.ids).toContain('');
    expect(graph.ids).not.toContain(gone.id);
    // ...but neither the rows nor hnswlib's own (normalised) copy keep anything near its vector.
    expect(Buffer.from(graph.rows.buffer).indexOf(Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength))).toBe(-1);
    expect(nearestInFile(graph.file, vector)).toBeLessThan(0.99);
    // While every kept memory's vector is there.
    const kept = [...a.memory.entries()].find((e) => e.record.id === big[43].id)!.vector;
    expect(nearestInFile(graph.file, kept)).toBeGreaterThan(0.9999);
  });

  it('are never saved for a tenant sealed under a key its client holds', async () => {
    const a = await start();
    a.memory.admitTenant('keyed', randomBytes(32));
    for (let i = 0; i < 100; i++) await a.memory.add({ tenant_id: 'keyed', content: sentence(i) });
    for (let i = 0; i < 100; i++) await a.memory.add({ tenant_id: 'plain', content: sentence(i) });
    await a.store.compact();
    expect((await savedGraphs(2)).map((g) => g.tenantId)).toEqual(['plain']);
  });
});

/** The highest cosine between `vector` and any element's vector in an hnswlib file (layout: vectors/hnsw-file.ts). */
function nearestInFile(file: Buffer, vector: Float32Array): number {
  const count = Number(file.readBigUInt64LE(16));
  const perElement = Number(file.readBigUInt64LE(24));
  const dataOffset = Number(file.readBigUInt64LE(40));
  let best = -Infinity;
  for (let i = 0; i < count; i++) {
    const at = 96 + i * perElement + dataOffset;
    let dot = 0;
    for (let d = 0; d < vector.length; d++) dot += file.readFloatLE(at + 4 * d) * vector[d];
    best = Math.max(best, dot);
  }
  return best;
}
