import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import type { MemoryRecord } from '../../enclave/memory/types.js';
import { EmbeddingModelChangedError } from '../../enclave/storage/errors.js';
import { logName, SealedLog } from '../../enclave/storage/log-file.js';
import { encodeEvent } from '../../enclave/storage/payloads.js';
import { deriveStorageKey } from '../../enclave/storage/sealed-file.js';
import { genesisHead } from '../../enclave/storage/state-head.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { DurableStore } from '../../enclave/storage/store.js';
import { buildStaticSifModel } from '../../scripts/build-model.js';
import { installTinyBert } from '../helpers/tiny-bert.js';

// Real models: the built-in static one (100-d), a generated tiny transformer (8-d), the same
// tiny model rebuilt with other weights under the same name, and one that fails on long texts.
let staticModel: Embedder;
let tiny: Embedder;
let tinyRebuilt: Embedder;
let brokenOnLongTexts: Embedder;
let modelsTmp: string;
let dir: string;
const sealingKey = randomBytes(32);
const open: DurableStore[] = [];

beforeAll(async () => {
  await buildStaticSifModel(); // no-op when models/ already holds it
  staticModel = await loadEmbedder({ name: 'static', modelsDir });
  modelsTmp = await mkdtemp(join(tmpdir(), 'store-models-'));
  await installTinyBert(modelsTmp, 'tiny');
  await installTinyBert(join(modelsTmp, 'rebuilt'), 'tiny', { seed: 8 });
  await installTinyBert(modelsTmp, 'tiny-overlong', { maxLength: 40 });
  tiny = await loadEmbedder({ name: 'tiny', modelsDir: modelsTmp });
  tinyRebuilt = await loadEmbedder({ name: 'tiny', modelsDir: join(modelsTmp, 'rebuilt') });
  brokenOnLongTexts = await loadEmbedder({ name: 'tiny-overlong', modelsDir: modelsTmp });
});
afterAll(async () => {
  await Promise.all([staticModel, tiny, tinyRebuilt, brokenOnLongTexts].map((e) => e?.close()));
  await rm(modelsTmp, { recursive: true, force: true });
});
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'store-model-'));
});
afterEach(async () => {
  for (const store of open.splice(0)) await store.close().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
});

/** Opens the store with `model`; with `reembed`, a store of another model is re-embedded with it. */
async function start(model: Embedder, options: { reembed?: boolean } = {}) {
  const memory = new MemoryService(model);
  let reembeds = 0;
  const store = await DurableStore.open({
    blobs: new FsBlobStore(dir),
    prefix: '',
    sealingKey,
    embedding: memory.embeddingModel,
    reembed: options.reembed ? async () => { reembeds++; await memory.reembed(model); } : undefined,
    snapshotLogBytes: 1 << 30,
  }, memory);
  memory.useJournal(store);
  open.push(store);
  return { memory, store, reembeds };
}
async function stop(store: DurableStore) {
  open.splice(open.indexOf(store), 1);
  await store.close();
}

const words = ['the', 'cat', 'dog', 'sat', 'on', 'my', 'mat', 'park', 'invoice', 'due', 'friday', 'rex', 'called', 'playing'];
/** Distinct short texts that both the static and the tiny model know: each gets its own vector. */
const text = (n: number) => `${words[n % 14]} ${words[(n * 3 + 1) % 14]} ${words[(n * 5 + 2) % 14]} ${words[Math.floor(n / 14) % 14]}`;

const files = () => readdirSync(dir).sort();
const readState = () => new Map(files().map((name) => [name, readFileSync(join(dir, name))]));
function writeState(state: Map<string, Buffer>) {
  for (const name of files()) rmSync(join(dir, name));
  for (const [name, data] of state) writeFileSync(join(dir, name), data);
}

/** Every memory is there as stored, and found first by its own content with the model's vectors (cosine 1 from the tenant's mean). */
async function expectAllFound(memory: MemoryService, records: MemoryRecord[]) {
  expect([...memory.entries()].map((e) => e.record.id).sort()).toEqual(records.map((r) => r.id).sort());
  for (const record of records) {
    expect(memory.get(record.tenant_id, record.id)).toEqual(record);
    const [top] = await memory.query({ tenant_id: record.tenant_id, query: record.content, top_k: 1 });
    expect(top.record.id).toBe(record.id);
    expect(top.scores.vector).toBeCloseTo(1, 4);
  }
}

/**
 * A static-model store with a snapshot and a log after it: 40 memories in three tenants,
 * 5 of them deleted. Returns the memories that remain.
 */
async function staticStore(): Promise<MemoryRecord[]> {
  const a = await start(staticModel);
  const records: MemoryRecord[] = [];
  for (let n = 0; n < 30; n++) records.push(await a.memory.add({ tenant_id: `t${n % 3}`, content: text(n), metadata: { n } }));
  await a.store.compact();
  for (let n = 30; n < 40; n++) records.push(await a.memory.add({ tenant_id: `t${n % 3}`, content: text(n), metadata: { n } }));
  const deleted = [records[0], records[7], records[31], records[32], records[39]];
  for (const r of deleted) expect(await a.memory.delete(r.tenant_id, r.id)).toBe(true);
  await stop(a.store);
  return records.filter((r) => !deleted.includes(r));
}

describe('durable store after an embedding model change', () => {
  it('re-embeds every memory with the new model and rewrites the store under it', async () => {
    const kept = await staticStore();
    expect(files()).toEqual(['log-000000000002.sealed', 'snapshot.sealed']);

    const b = await start(tiny, { reembed: true });
    expect(b.reembeds).toBe(1);
    expect(b.store.recovery).toMatchObject({ snapshotGeneration: 2, logs: 1 });
    expect(b.store.recovery.modelChange).toEqual({
      from: { id: staticModel.id, dimension: 100, sha256: staticModel.sha256 },
      to: { id: 'tiny', dimension: 8, sha256: tiny.sha256 },
      memories: 35,
    });
    await expectAllFound(b.memory, kept);
    // A new log and a snapshot under the new model; the old files are gone.
    expect(files()).toEqual(['log-000000000003.sealed', 'snapshot.sealed']);
    const later = await b.memory.add({ tenant_id: 't1', content: 'my dog is called rex' });
    await stop(b.store);

    // The store now is the new model's: it opens without re-embedding, even when it may not.
    const c = await start(tiny);
    expect(c.store.recovery.modelChange).toBeUndefined();
    await expectAllFound(c.memory, [...kept, later]);
    await stop(c.store);

    // And back again, 8-d to 100-d.
    const d = await start(staticModel, { reembed: true });
    expect(d.store.recovery.modelChange).toMatchObject({ from: { id: 'tiny', dimension: 8 }, to: { id: staticModel.id, dimension: 100 }, memories: 36 });
    await expectAllFound(d.memory, [...kept, later]);
  });

  it('refuses without re-embedding, naming both models, and changes nothing; a rebuilt model under the same name is a change', async () => {
    const a = await start(tiny);
    const records = [];
    for (let n = 0; n < 5; n++) records.push(await a.memory.add({ tenant_id: 't', content: text(n) }));
    await stop(a.store);
    const before = readState();

    const err = await start(tinyRebuilt).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EmbeddingModelChangedError);
    expect((err as EmbeddingModelChangedError).stored).toEqual({ id: 'tiny', dimension: 8, sha256: tiny.sha256 });
    expect((err as Error).message).toBe(
      `log-000000000001.sealed holds vectors from embedding model tiny (8-d, sha256 ${tiny.sha256.slice(0, 12)}) ` +
        `but this enclave runs tiny (8-d, sha256 ${tinyRebuilt.sha256.slice(0, 12)}); refusing to mix vectors of two models: ` +
        'start with EMBEDDING_MODEL=tiny (the same model files), or set ON_MODEL_CHANGE=reembed to re-embed every stored memory with the new model',
    );
    expect(readState()).toEqual(before);

    const b = await start(tinyRebuilt, { reembed: true });
    expect(b.reembeds).toBe(1);
    await expectAllFound(b.memory, records);
  });

  it('starts an empty store over under the new model, with or without re-embedding', async () => {
    const a = await start(staticModel);
    const only = await a.memory.add({ tenant_id: 't', content: 'short-lived' });
    await a.memory.delete('t', only.id);
    await stop(a.store);

    const b = await start(tiny);
    expect(b.store.recovery.modelChange).toMatchObject({ memories: 0 });
    expect([...b.memory.entries()]).toEqual([]);
    expect(files()).toEqual(['log-000000000002.sealed', 'snapshot.sealed']);
    await stop(b.store);
    expect((await start(tiny)).store.recovery.modelChange).toBeUndefined();
  });

  it('leaves every file as it was when re-embedding fails part-way (or the enclave dies during it)', async () => {
    const kept = await staticStore();
    // The failing model embeds short texts, but not this one (longer than its position table).
    const long = Array.from({ length: 20 }, () => 'cat').join(' ');
    const a = await start(staticModel);
    kept.push(await a.memory.add({ tenant_id: 't2', content: long }));
    await stop(a.store);
    const before = readState();

    await expect(start(brokenOnLongTexts, { reembed: true })).rejects.toThrow();
    // The same files, with the same bytes; the newest segment only gained the fence that opening it wrote.
    const after = readState();
    expect([...after.keys()]).toEqual([...before.keys()]);
    for (const [name, data] of before) {
      if (name.startsWith('log-')) expect(after.get(name)!.subarray(0, data.length).equals(data), name).toBe(true);
      else expect(after.get(name), name).toEqual(data);
    }

    const b = await start(staticModel);
    expect(b.store.recovery.modelChange).toBeUndefined();
    await expectAllFound(b.memory, kept);
  });

  it('opens after a crash at any step of rewriting the store, re-embedding again until the rewrite is complete', async () => {
    const kept = await staticStore();
    const old = readState(); // snapshot.sealed (generation 2) and log 2, of the static model
    const b = await start(tiny, { reembed: true });
    await stop(b.store);
    const rewritten = readState(); // snapshot.sealed (generation 3) and log 3, of the tiny model
    expect([...rewritten.keys()]).toEqual(['log-000000000003.sealed', 'snapshot.sealed']);
    const newLog = rewritten.get('log-000000000003.sealed')!;

    // Crash after the new model's log was created, before the snapshot replaced the old one:
    // old snapshot and log, and the new (empty) log after them. Re-embedded again.
    writeState(new Map([...old, ['log-000000000003.sealed', newLog], ['snapshot.sealed.tmp', Buffer.from('half a snapshot')]]));
    const c = await start(tiny, { reembed: true });
    expect(c.reembeds).toBe(1);
    expect(c.store.recovery).toMatchObject({ snapshotGeneration: 2, logs: 2, modelChange: { from: { id: staticModel.id }, to: { id: 'tiny' }, memories: 35 } });
    await expectAllFound(c.memory, kept);
    expect(files()).toEqual(['log-000000000004.sealed', 'snapshot.sealed']);
    await stop(c.store);

    // ... and without re-embedding that state is refused, naming the old model's file.
    writeState(new Map([...old, ['log-000000000003.sealed', newLog]]));
    await expect(start(tiny)).rejects.toThrow(/^snapshot\.sealed holds vectors from embedding model static-sif-100d/);

    // Crash after the new snapshot, before the old log was deleted: nothing to re-embed.
    writeState(new Map([...rewritten, ['log-000000000002.sealed', old.get('log-000000000002.sealed')!]]));
    const d = await start(tiny);
    expect(d.store.recovery.modelChange).toBeUndefined();
    await expectAllFound(d.memory, kept);
    expect(files()).toEqual(['log-000000000003.sealed', 'snapshot.sealed']);
  });

  it('re-embeds an updated memory too: an update is restored without its old vector, like an add', async () => {
    const a = await start(staticModel);
    const first = await a.memory.add({ tenant_id: 't', content: text(1) });
    const updated = await a.memory.update('t', first.id, { content: text(2) });
    await stop(a.store);
    const b = await start(tiny, { reembed: true });
    expect(b.store.recovery.skipped).toBeUndefined();
    await expectAllFound(b.memory, [updated!]);
  });

  it('reads a format 1 store, which recorded no model hash, by re-embedding it', async () => {
    // Written as the first release of the store did: no embedding_sha256 in the file meta.
    const key = deriveStorageKey(sealingKey);
    const log = await SealedLog.create(new FsBlobStore(dir), logName(1), key, {
      format: 1, kind: 'log', generation: 1, embedding_model: staticModel.id, dimension: staticModel.dimension, created_at: 1_700_000_000,
      head: genesisHead('legacy'),
    });
    const records: MemoryRecord[] = Array.from({ length: 3 }, (_, n) => ({
      id: `mem_${String(n).padStart(32, '0')}`, object: 'memory', tenant_id: 't', content: text(n), metadata: {}, created_at: 1_700_000_000,
    }));
    const vectors = await staticModel.embed(records.map((r) => r.content));
    await log.append(records.map((record, i) => encodeEvent({ type: 'add', record, vector: vectors[i] })));
    await log.close();

    await expect(start(staticModel)).rejects.toThrow(/holds vectors from embedding model static-sif-100d \(100-d, sha256 unrecorded\)/);
    const a = await start(staticModel, { reembed: true });
    expect(a.reembeds).toBe(1);
    await expectAllFound(a.memory, records);
    await stop(a.store);
    expect((await start(staticModel)).store.recovery.modelChange).toBeUndefined();
  });
});
