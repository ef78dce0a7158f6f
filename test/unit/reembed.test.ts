import { Writable } from 'node:stream';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import type { MemoryRecord } from '../../enclave/memory/types.js';
import { reembedWithProgress, sameEmbeddingModel } from '../../enclave/memory/model-change.js';
import type { EmbeddingModelId } from '../../enclave/memory/types.js';
import { centredCosine, SHRINK } from '../../enclave/retrieval/tenant-centre.js';
import { buildStaticSifModel } from '../../scripts/build-model.js';
import { rankVector } from '../../bench/eval/rankers.js';
import { installTinyBert } from '../helpers/tiny-bert.js';

// Two real models: the built-in static one (100-d) and a generated tiny transformer (8-d).
let staticModel: Embedder;
let tiny: Embedder;
/** The tiny model with max_length 40 but only 16 positions: it fails on texts over 14 tokens. */
let brokenOnLongTexts: Embedder;
let tinyDir: string;

beforeAll(async () => {
  await buildStaticSifModel(); // no-op when models/ already holds it
  staticModel = await loadEmbedder({ name: 'static', modelsDir });
  tinyDir = await mkdtemp(join(tmpdir(), 'reembed-models-'));
  await installTinyBert(tinyDir, 'tiny');
  await installTinyBert(tinyDir, 'tiny-overlong', { maxLength: 40 });
  tiny = await loadEmbedder({ name: 'tiny', modelsDir: tinyDir });
  brokenOnLongTexts = await loadEmbedder({ name: 'tiny-overlong', modelsDir: tinyDir });
});
afterAll(async () => {
  await Promise.all([staticModel, tiny, brokenOnLongTexts].map((e) => e?.close()));
  await rm(tinyDir, { recursive: true, force: true });
});

const words = ['the', 'cat', 'dog', 'sat', 'on', 'my', 'mat', 'park', 'invoice', 'due', 'friday', 'rex', 'called', 'playing'];
/** Distinct short texts: both models give each its own vector. */
const text = (n: number) => `${words[n % 14]} ${words[(n * 3 + 1) % 14]} ${words[(n * 5 + 2) % 14]} ${words[Math.floor(n / 14) % 14]}`;
const idOf = (m: { id: string; dimension: number; sha256: string }): EmbeddingModelId => ({ id: m.id, dimension: m.dimension, sha256: m.sha256 });

/**
 * Queries by a memory's exact content in the vector ranking (the index under test; the
 * hybrid ranking may put a memory with a stronger lexical match first): found first with cosine 1.
 */
async function expectFoundByOwnContent(memory: MemoryService, record: MemoryRecord): Promise<void> {
  const [top] = await memory.query({ tenant_id: record.tenant_id, query: record.content, top_k: 1 }, rankVector);
  expect(top.scores.vector).toBeCloseTo(1, 4);
  expect(top.record.content).toBe(record.content);
}

describe('MemoryService.reembed', () => {
  let memory: MemoryService;
  let alice: MemoryRecord[];
  let bob: MemoryRecord[];

  beforeEach(async () => {
    memory = new MemoryService(staticModel);
    alice = [];
    bob = [];
    for (let n = 0; n < 70; n++) alice.push(await memory.add({ tenant_id: 'alice', content: text(n) }));
    for (let n = 0; n < 3; n++) bob.push(await memory.add({ tenant_id: 'bob', content: `${text(n + 100)} invoice` }));
  });

  it('re-embeds every memory of every tenant in batches, reporting progress, and then adds and queries with the new model', async () => {
    expect(memory.embeddingModel).toEqual(idOf(staticModel));
    const progress: [number, number][] = [];
    await memory.reembed(tiny, (done, total) => progress.push([done, total]));

    // 70 + 3 memories, 64 per batch: a first report, 64 and 70 for alice, 73 with bob.
    expect(progress).toEqual([[0, 73], [64, 73], [70, 73], [73, 73]]);
    expect(memory.embeddingModel).toEqual({ id: 'tiny', dimension: 8, sha256: tiny.sha256 });

    // Records are unchanged; the index holds the tiny model's vectors of their contents.
    expect(memory.get('alice', alice[5].id)).toEqual(alice[5]);
    for (const record of [alice[0], alice[69], ...bob]) await expectFoundByOwnContent(memory, record);
    const [query] = await tiny.embed(['the cat sat']);
    const [first] = await memory.query({ tenant_id: 'alice', query: 'the cat sat', top_k: 1 }, rankVector);
    const [expected] = await tiny.embed([first.record.content]);
    // Measured from alice's mean under the new model: the centre was rebuilt with the index.
    const mean = new Float32Array(tiny.dimension);
    for (const vector of await tiny.embed(alice.map((r) => r.content))) vector.forEach((x, d) => (mean[d] += x / (alice.length + SHRINK)));
    expect(first.scores.vector).toBeCloseTo(centredCosine(query, expected, mean), 4);

    // Tenants stay apart, deletes still work, and a new memory is indexed with the new model.
    const bobHits = await memory.query({ tenant_id: 'bob', query: alice[0].content, top_k: 10 });
    expect(bobHits.map((hit) => hit.record.tenant_id)).toEqual(['bob', 'bob', 'bob']);
    expect(await memory.delete('alice', alice[0].id)).toBe(true);
    expect((await memory.query({ tenant_id: 'alice', query: alice[0].content, top_k: 70 })).map((h) => h.record.id)).not.toContain(alice[0].id);
    await expectFoundByOwnContent(memory, await memory.add({ tenant_id: 'carol', content: 'my dog is called rex' }));
  });

  it('goes back the other way too (8-d to 100-d)', async () => {
    await memory.reembed(tiny);
    await memory.reembed(staticModel);
    expect(memory.embeddingModel).toEqual(idOf(staticModel));
    for (const record of [alice[3], bob[1]]) await expectFoundByOwnContent(memory, record);
  });

  it('changes nothing when embedding fails part-way', async () => {
    // alice's short memories embed; bob's long one makes the model fail in its position table.
    await memory.add({ tenant_id: 'bob', content: Array.from({ length: 20 }, () => 'cat').join(' ') });
    await expect(memory.reembed(brokenOnLongTexts)).rejects.toThrow();
    expect(memory.embeddingModel).toEqual(idOf(staticModel));
    for (const record of [alice[0], alice[69], bob[0]]) await expectFoundByOwnContent(memory, record);
    await memory.add({ tenant_id: 'alice', content: 'still the static model' }); // 100-d index, 100-d vector
  });

  it('refuses to run twice at once', async () => {
    const first = memory.reembed(tiny);
    await expect(memory.reembed(tiny)).rejects.toThrow(/already running/);
    await first;
  });
});

describe('a model change', () => {
  const recorded = { id: 'static-sif-100d', dimension: 100, sha256: 'a'.repeat(64) };

  it('is a different id, dimension or hash', () => {
    expect(sameEmbeddingModel(recorded, { ...recorded })).toBe(true);
    for (const current of [{ ...recorded, id: 'all-MiniLM-L6-v2' }, { ...recorded, dimension: 384 }, { ...recorded, sha256: 'b'.repeat(64) }]) {
      expect(sameEmbeddingModel(recorded, current)).toBe(false);
    }
  });

  it('re-embeds with progress in the log', async () => {
    const lines: { msg: string; percent?: number; memories?: number }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()));
        done();
      },
    });
    const log = pino({ level: 'info' }, sink);
    const memory = new MemoryService(staticModel);
    for (let n = 0; n < 100; n++) await memory.add({ tenant_id: 'alice', content: text(n) });

    await reembedWithProgress(memory, tiny, log);
    expect(memory.embeddingModel).toEqual(idOf(tiny));
    // Batches of 64: the first report, then each tenth of the work that a batch reaches.
    expect(lines.filter((l) => l.msg === 're-embedding memories with tiny').map((l) => l.percent)).toEqual([0, 64, 100]);
    expect(lines.at(-1)).toMatchObject({ msg: 're-embedded all memories', memories: 100 });
  });
});
