import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { CorruptStoreError } from '../../enclave/storage/errors.js';
import { DurableStore } from '../../enclave/storage/store.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { flipByte, frameSpans } from '../helpers/sealed-files.js';

/**
 * The host keeps the store's blobs and may rearrange them as it likes: every arrangement
 * that is not the store's own history must be refused at start, with a reason that names
 * what is wrong. The host here is the test, editing the host store's folder directly.
 */
let embedder: Embedder;
const sealingKey = randomBytes(32);
const dirs: string[] = [];
const opened: DurableStore[] = [];

beforeAll(async () => {
  embedder = await loadEmbedder({ name: 'static', modelsDir });
});
afterAll(async () => {
  await embedder?.close();
});
let dir: string;
beforeEach(() => {
  dir = fresh();
});
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close().catch(() => {});
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function fresh(): string {
  const d = mkdtempSync(join(tmpdir(), 'chain-'));
  dirs.push(d);
  return d;
}

async function open(at = dir) {
  const memory = new MemoryService(embedder);
  const store = await DurableStore.open({
    blobs: new FsBlobStore(at), prefix: '', sealingKey, embedding: memory.embeddingModel, snapshotLogBytes: 1 << 30,
  }, memory);
  memory.useJournal(store);
  opened.push(store);
  return { memory, store };
}
async function close(store: DurableStore) {
  opened.splice(opened.indexOf(store), 1);
  await store.close();
}

const log = (g: number, at = dir) => join(at, `log-${String(g).padStart(12, '0')}.sealed`);
const files = (at = dir) => readdirSync(at).sort();
const add = (memory: MemoryService, n: number, tag: string) =>
  Promise.all(Array.from({ length: n }, (_, i) => memory.add({ tenant_id: 't', content: `${tag} memory number ${i} about gardens` })));

/** Compacts without finishing the snapshot (as if the enclave died before writing it): a new segment, the old one kept. */
async function rotateWithoutSnapshot(store: DurableStore, at = dir) {
  mkdirSync(join(at, 'snapshot.sealed.tmp'));
  await expect(store.compact()).rejects.toThrow();
  rmSync(join(at, 'snapshot.sealed.tmp'), { recursive: true });
}

/** Three segments and no snapshot: log 1 and log 2 complete, log 3 current. */
async function threeSegments() {
  const { memory, store } = await open();
  await add(memory, 3, 'first');
  await rotateWithoutSnapshot(store);
  await add(memory, 3, 'second');
  await rotateWithoutSnapshot(store);
  await add(memory, 3, 'third');
  await close(store);
  expect(files()).toEqual(['log-000000000001.sealed', 'log-000000000002.sealed', 'log-000000000003.sealed']);
}

async function refusal(at = dir): Promise<string> {
  const err = await open(at).then(() => undefined, (e: Error) => e);
  expect(err).toBeInstanceOf(CorruptStoreError);
  return err!.message;
}

describe('the store refuses a history the enclave did not write', () => {
  it('opens its own history, and reports the state head it recovered', async () => {
    await threeSegments();
    const { memory, store } = await open();
    expect(store.recovery).toMatchObject({ logs: 3, events: 9, head: { seq: 9 } });
    expect((await memory.query({ tenant_id: 't', query: 'third memory number 2', top_k: 1 }))[0].record.content).toMatch(/third/);
  });

  it('the attack that went unnoticed before: snapshot deleted, an older copy of a non-last segment put back, the newer one kept', async () => {
    const { memory, store } = await open();
    await add(memory, 2, 'early');
    const earlyLog1 = readFileSync(log(1)); // the host keeps a copy
    const later = await add(memory, 2, 'later');
    await store.compact(); // snapshot 2, log 2; log 1 deleted
    await memory.delete('t', later[0].id);
    await close(store);
    expect(files()).toEqual(['log-000000000002.sealed', 'snapshot.sealed']);

    rmSync(join(dir, 'snapshot.sealed'));
    writeFileSync(log(1), earlyLog1);
    expect(await refusal()).toMatch(/log-000000000002\.sealed does not continue log-000000000001\.sealed: it starts at state 4:.* but that ends at 2:/);
  });

  it('a non-last segment cut at a frame boundary', async () => {
    await threeSegments();
    const data = readFileSync(log(2));
    const spans = frameSpans(data);
    writeFileSync(log(2), data.subarray(0, spans[spans.length - 1][0]));
    expect(await refusal()).toMatch(/log-000000000003\.sealed does not continue log-000000000002\.sealed/);
  });

  it('a non-last segment cut inside a frame', async () => {
    await threeSegments();
    const data = readFileSync(log(1));
    writeFileSync(log(1), data.subarray(0, data.length - 10));
    expect(await refusal()).toMatch(/log-000000000001\.sealed: an incomplete frame/);
  });

  it('two segments swapped', async () => {
    await threeSegments();
    renameSync(log(1), join(dir, 'swap'));
    renameSync(log(2), log(1));
    renameSync(join(dir, 'swap'), log(2));
    expect(await refusal()).toMatch(/log-000000000001\.sealed holds log 2: it was renamed or copied/);
  });

  it('a middle segment dropped', async () => {
    await threeSegments();
    rmSync(log(2));
    expect(await refusal()).toMatch(/log-000000000002\.sealed is missing/);
  });

  it('the first segment dropped (and the store made to look new)', async () => {
    await threeSegments();
    rmSync(log(1));
    expect(await refusal()).toMatch(/log-000000000001\.sealed is missing/);
  });

  it('a segment brought from another store sealed with the same key', async () => {
    await threeSegments();
    const other = fresh();
    const b = await open(other);
    await add(b.memory, 3, 'other');
    await rotateWithoutSnapshot(b.store, other);
    await add(b.memory, 1, 'other');
    await close(b.store);
    copyFileSync(log(2, other), log(2));
    expect(await refusal()).toMatch(/log-000000000002\.sealed belongs to another store/);
  });

  it('an older snapshot replayed in place of the newer one', async () => {
    const { memory, store } = await open();
    await add(memory, 2, 'one');
    await store.compact(); // snapshot 2
    const oldSnapshot = readFileSync(join(dir, 'snapshot.sealed'));
    await add(memory, 2, 'two');
    await store.compact(); // snapshot 3; log 2 deleted
    await add(memory, 1, 'three');
    await close(store);
    writeFileSync(join(dir, 'snapshot.sealed'), oldSnapshot);
    expect(await refusal()).toMatch(/log-000000000002\.sealed is missing/);
  });

  it('a snapshot that does not match the segment after it', async () => {
    const { memory, store } = await open();
    await add(memory, 2, 'one');
    await store.compact();
    const snapshotAt2 = readFileSync(join(dir, 'snapshot.sealed'));
    const log2Early = readFileSync(log(2));
    await add(memory, 2, 'two');
    await store.compact();
    await close(store);
    // Snapshot 2 with the log 2 it began (consistent), but a log 3 that continues more changes.
    writeFileSync(join(dir, 'snapshot.sealed'), snapshotAt2);
    writeFileSync(log(2), log2Early);
    expect(await refusal()).toMatch(/log-000000000003\.sealed does not continue log-000000000002\.sealed/);
  });

  it('a flipped byte in any segment', async () => {
    await threeSegments();
    flipByte(log(2), frameSpans(readFileSync(log(2)))[1][0] + 50);
    expect(await refusal()).toMatch(/log-000000000002\.sealed: a frame that does not authenticate/);
  });

  it('still cuts a torn tail of the newest segment (an interrupted append), and goes on from there', async () => {
    await threeSegments();
    const data = readFileSync(log(3));
    writeFileSync(log(3), data.subarray(0, data.length - 7));
    const { store } = await open();
    expect(store.recovery.cutTail).toMatchObject({ file: 'log-000000000003.sealed' });
    expect(store.recovery.head.seq).toBe(8);
  });
});
