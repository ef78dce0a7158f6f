import { readFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { clsPool, l2Normalise, meanPool } from '../../enclave/embedding/pooling.js';
import { MAX_TEXTS_PER_RUN, MAX_TOKENS_PER_RUN, loadTransformerEmbedder, runs } from '../../enclave/embedding/transformer-embedder.js';
import { formatManifest, parseManifest, type TransformerManifest } from '../../enclave/embedding/transformer-manifest.js';
import { PINNED_MODELS, type ModelPin } from '../../enclave/embedding/transformer-pins.js';
import { SentenceTokenizer } from '../../enclave/embedding/transformer-tokenizer.js';
import { TINY_HIDDEN, TINY_POSITIONS, TINY_VOCAB, installTinyBert, referenceEmbedding, sha256, tinyTokenizerJson, tinyVocabTxt, type TinyBert } from '../helpers/tiny-bert.js';

const id = (token: string) => {
  const i = TINY_VOCAB.indexOf(token);
  if (i < 0) throw new Error(`no ${token} in the tiny vocabulary`);
  return i;
};
const ids = (...tokens: string[]) => tokens.map(id);

// onnxruntime may sum in another order when rows are padded, so equal vectors can differ in the last bits.
const TOLERANCE = 1e-5;
function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tolerance = TOLERANCE): void {
  expect(actual.length).toBe(expected.length);
  for (let i = 0; i < actual.length; i++) expect(Math.abs(actual[i] - expected[i]), `component ${i}`).toBeLessThan(tolerance);
}
const distance = (a: ArrayLike<number>, b: ArrayLike<number>) => Math.hypot(...Array.from(a, (x, i) => x - b[i]));

describe('SentenceTokenizer', () => {
  const json = SentenceTokenizer.load('tokenizer.json', tinyTokenizerJson(), { lowercase: true });
  const vocab = SentenceTokenizer.load('vocab.txt', tinyVocabTxt(), { lowercase: true });

  it('splits into WordPiece ids between [CLS] and [SEP], lowercased, accents stripped, unknown words [UNK]', () => {
    expect(json.encode('The cats sat on my mat.', 64)).toEqual({
      ids: ids('[CLS]', 'the', 'cat', '##s', 'sat', 'on', 'my', 'mat', '.', '[SEP]'),
      typeIds: new Array(10).fill(0),
    });
    expect(json.encode('Café ZX44 playing', 64).ids).toEqual(ids('[CLS]', 'cafe', 'zx', '##44', 'play', '##ing', '[SEP]'));
    expect(json.encode('a xylophone', 64).ids).toEqual(ids('[CLS]', 'a', '[UNK]', '[SEP]'));
    expect(json.encode('', 64).ids).toEqual(ids('[CLS]', '[SEP]'));
    expect(json.specialTokens).toBe(2);
    expect(json.padId).toBe(id('[PAD]'));
  });

  it('gives the same ids from vocab.txt as from tokenizer.json', () => {
    for (const text of ['The cats sat on my mat.', 'My DOG is called Rex, in the park?', 'Café ZX44', 'unknown words here', '  spaced\tout\n']) {
      expect(vocab.encode(text, 64)).toEqual(json.encode(text, 64));
    }
  });

  it('truncates to max_length keeping [CLS] first and [SEP] last', () => {
    const words = Array.from({ length: 30 }, (_, i) => ['the', 'cat', 'sat', 'on'][i % 4]);
    const encoded = json.encode(words.join(' '), 16);
    expect(encoded.ids).toEqual(ids('[CLS]', ...words.slice(0, 14), '[SEP]'));
    expect(json.encode(words.slice(0, 14).join(' '), 16)).toEqual(encoded);
    expect(() => json.encode('the cat', 2)).toThrow(/no room/);
  });

  it('refuses a vocab.txt without BERT special tokens, and a tokenizer.json that is not JSON', () => {
    expect(() => SentenceTokenizer.load('vocab.txt', 'the\ncat\n', { lowercase: true })).toThrow(/\[UNK\]/);
    expect(() => SentenceTokenizer.load('tokenizer.json', '{not json', { lowercase: true })).toThrow(/not a JSON object/);
  });
});

describe('pooling', () => {
  // batch 2, sequence 3, hidden 2
  const tensor = { data: Float32Array.from([1, 2, 3, 4, 100, 100, 5, 6, 7, 8, 9, 10]), batch: 2, sequence: 3, hidden: 2 };

  it('means over the masked positions only', () => {
    const [first, second] = meanPool(tensor, [1, 1, 0, 1, 0, 0]);
    expect(Array.from(first)).toEqual([2, 3]); // ([1,2] + [3,4]) / 2; [100,100] is padding
    expect(Array.from(second)).toEqual([5, 6]);
    expect(Array.from(meanPool(tensor, [0, 0, 0, 1, 1, 1])[0])).toEqual([0, 0]); // nothing unmasked: zero vector
    expect(Array.from(meanPool(tensor, [0, 0, 0, 1, 1, 1])[1])).toEqual([7, 8]);
  });

  it('takes the first token for cls', () => {
    expect(clsPool(tensor).map((v) => Array.from(v))).toEqual([[1, 2], [5, 6]]);
  });

  it('normalises to unit length, and leaves a zero vector zero', () => {
    expect(Array.from(l2Normalise(Float32Array.from([3, 4])))).toEqual([Math.fround(0.6), Math.fround(0.8)]);
    expect(Array.from(l2Normalise(new Float32Array(3)))).toEqual([0, 0, 0]);
  });
});

describe('runs', () => {
  const text = (length: number) => ({ ids: new Array<number>(length).fill(5), typeIds: new Array<number>(length).fill(0) });

  it('covers every text once, grouping by length within the run limits', () => {
    const lengths = Array.from({ length: 300 }, (_, i) => 3 + ((i * 37) % 500));
    const texts = lengths.map(text);
    const all = [...runs(texts)];
    expect(all.flat().sort((a, b) => a - b)).toEqual(lengths.map((_, i) => i));
    for (const run of all) {
      const longest = Math.max(...run.map((i) => lengths[i]));
      expect(run.length).toBeLessThanOrEqual(MAX_TEXTS_PER_RUN);
      expect(run.length * longest).toBeLessThanOrEqual(MAX_TOKENS_PER_RUN);
    }
  });

  it('still runs a single text longer than the token budget, alone', () => {
    expect([...runs([text(3), text(MAX_TOKENS_PER_RUN + 1)])]).toEqual([[0], [1]]);
  });
});

describe('transformer embedder (generated tiny BERT)', () => {
  let modelsDir: string;
  const embedders: Embedder[] = [];
  let mean: Embedder;
  let model: TinyBert;
  const tokenizer = SentenceTokenizer.load('tokenizer.json', tinyTokenizerJson(), { lowercase: true });
  const reference = (text: string, pooling: 'mean' | 'cls' | 'none' = 'mean', m = model) =>
    referenceEmbedding(m, tokenizer.encode(text, TINY_POSITIONS).ids, pooling);

  beforeAll(async () => {
    modelsDir = await mkdtemp(join(tmpdir(), 'transformer-models-'));
    ({ model } = await installTinyBert(modelsDir, 'tiny-mean'));
    mean = await loadEmbedder({ name: 'tiny-mean', modelsDir });
    embedders.push(mean);
  });
  afterAll(async () => {
    await Promise.all(embedders.map((e) => e.close()));
    await rm(modelsDir, { recursive: true, force: true });
  });

  const texts = ['The cats sat on my mat.', 'my dog is called rex', 'invoice due friday', '', 'Café ZX44?'];

  it('reports its name, dimension, and the SHA-256 of the model.json it checked its files against', async () => {
    expect(mean.id).toBe('tiny-mean');
    expect(mean.dimension).toBe(TINY_HIDDEN);
    expect(mean.sha256).toBe(sha256(await readFile(join(modelsDir, 'tiny-mean', 'model.json'))));
  });

  it('matches a hand computation of the model with mean pooling and normalisation', async () => {
    const vectors = await Promise.all(texts.map(async (text) => (await mean.embed([text]))[0]));
    vectors.forEach((vector, i) => expectClose(vector, reference(texts[i])));
    expect(Math.hypot(...vectors[0])).toBeCloseTo(1, 5);
  });

  it('gives a text the same vector alone as padded in a batch with longer texts', async () => {
    const short = 'my dog';
    const long = 'the cat sat on the mat in the park on friday';
    const [alone] = await mean.embed([short]);
    const [inBatch, longVector] = await mean.embed([short, long]);
    expectClose(inBatch, alone);
    expectClose(longVector, reference(long));
    // The check can fail: had the padding counted, the vector would be far off.
    const padded = [...tokenizer.encode(short, 16).ids, ...new Array(8).fill(tokenizer.padId)];
    expect(distance(referenceEmbedding(model, padded, 'mean'), alone)).toBeGreaterThan(0.05);
  });

  it('embeds batches larger than one run, in order', async () => {
    const words = ['the', 'cat', 'dog', 'sat', 'on', 'mat', 'park', 'invoice', 'friday', 'playing'];
    const many = Array.from({ length: 3 * MAX_TEXTS_PER_RUN + 5 }, (_, n) => words.slice(0, 1 + (n * 7) % 14).join(' ') + ` ${words[n % 10]}`);
    const batch = await mean.embed(many);
    expect(batch).toHaveLength(many.length);
    batch.forEach((vector, n) => expectClose(vector, reference(many[n])));
  });

  it('truncates long texts to max_length instead of failing in the model', async () => {
    const words = Array.from({ length: 40 }, (_, i) => ['the', 'cat', 'sat', 'on', 'my', 'mat'][i % 6]);
    const [whole] = await mean.embed([words.join(' ')]);
    const [head] = await mean.embed([words.slice(0, TINY_POSITIONS - 2).join(' ')]);
    expectClose(whole, head);
    const [shorter] = await mean.embed([words.slice(0, TINY_POSITIONS - 3).join(' ')]);
    expect(distance(shorter, head)).toBeGreaterThan(1e-3);
  });

  it.each([
    ['cls pooling', { pooling: 'cls' as const }],
    ['a pooled output used as is', { pooling: 'none' as const, output: 'sentence_embedding' }],
    ['a model without token_type_ids', { tokenTypes: false }],
    ['a vocab.txt tokenizer', { tokenizer: 'vocab.txt' as const }],
  ])('handles %s', async (label, options) => {
    const name = `tiny-${label.replace(/[^a-z]+/g, '-')}`;
    const { model: variant, manifest } = await installTinyBert(modelsDir, name, { ...options, seed: 11 });
    const embedder = await loadEmbedder({ name, modelsDir });
    embedders.push(embedder);
    const vectors = await embedder.embed(texts);
    vectors.forEach((vector, i) => expectClose(vector, reference(texts[i], manifest.pooling, variant)));
  });
});

describe('transformer model loading refuses what it cannot trust', () => {
  let modelsDir: string;
  beforeAll(async () => {
    modelsDir = await mkdtemp(join(tmpdir(), 'transformer-bad-'));
  });
  afterAll(async () => {
    await rm(modelsDir, { recursive: true, force: true });
  });

  const rewriteManifest = async (name: string, change: (m: TransformerManifest) => TransformerManifest) => {
    const file = join(modelsDir, name, 'model.json');
    const manifest = parseManifest(await readFile(file, 'utf8'), file);
    await writeFile(file, formatManifest(change(manifest)));
  };

  it('a model.onnx or tokenizer whose bytes do not match model.json', async () => {
    const { dir } = await installTinyBert(modelsDir, 'tampered');
    const onnx = await readFile(join(dir, 'model.onnx'));
    onnx[onnx.length - 1] ^= 1; // one bit of one weight
    await writeFile(join(dir, 'model.onnx'), onnx);
    await expect(loadEmbedder({ name: 'tampered', modelsDir })).rejects.toThrow(/model\.onnx does not match the SHA-256/);

    await installTinyBert(modelsDir, 'tampered-vocab');
    const tokenizerFile = join(modelsDir, 'tampered-vocab', 'tokenizer.json');
    await writeFile(tokenizerFile, (await readFile(tokenizerFile, 'utf8')).replace('"cat":6', '"cat":7'));
    await expect(loadEmbedder({ name: 'tampered-vocab', modelsDir })).rejects.toThrow(/tokenizer\.json does not match/);
  });

  it('a model.json whose dimension, output or name is wrong', async () => {
    await installTinyBert(modelsDir, 'wrong-dim', { dimension: 384 });
    await expect(loadEmbedder({ name: 'wrong-dim', modelsDir })).rejects.toThrow(/dimension 384, the model gives 8/);
    await installTinyBert(modelsDir, 'wrong-output', { output: 'pooler_output' });
    await expect(loadEmbedder({ name: 'wrong-output', modelsDir })).rejects.toThrow(/no output pooler_output \(outputs: last_hidden_state, sentence_embedding\)/);
    await installTinyBert(modelsDir, 'wrong-rank', { output: 'sentence_embedding', pooling: 'mean' });
    await expect(loadEmbedder({ name: 'wrong-rank', modelsDir })).rejects.toThrow(/needs float32 \[batch, sequence, hidden\]/);
    await installTinyBert(modelsDir, 'renamed');
    await rewriteManifest('renamed', (m) => ({ ...m, name: 'other' }));
    await expect(loadEmbedder({ name: 'renamed', modelsDir })).rejects.toThrow(/describes model "other"/);
    await rewriteManifest('renamed', (m) => ({ ...m, name: 'renamed', pooling: 'max' as never }));
    await expect(loadEmbedder({ name: 'renamed', modelsDir })).rejects.toThrow(/pooling must be one of mean, cls, none/);
  });

  it('an installed pinned model whose hashes are not the pinned ones', async () => {
    const { manifest } = await installTinyBert(modelsDir, 'pinned-tiny');
    const pin: ModelPin = {
      name: 'pinned-tiny', repo: 'example/tiny', revision: 'a'.repeat(40), dimension: 8, max_length: 16, pooling: 'mean',
      output: 'last_hidden_state', lowercase: true,
      files: { model: { path: 'model.onnx', sha256: manifest.files.model.sha256 }, tokenizer: { path: 'tokenizer.json', sha256: 'b'.repeat(64) } },
    };
    await expect(loadTransformerEmbedder(modelsDir, 'pinned-tiny', pin)).rejects.toThrow(/tokenizer\.json is not the pinned file/);
    const good = { ...pin, files: { ...pin.files, tokenizer: { path: 'tokenizer.json' as const, sha256: manifest.files.tokenizer.sha256 } } };
    await (await loadTransformerEmbedder(modelsDir, 'pinned-tiny', good)).close();
  });

  it('an unknown model name, naming the known ones; a pinned model that is not installed, saying how to fetch it', async () => {
    await expect(loadEmbedder({ name: 'bert-huge', modelsDir })).rejects.toThrow(
      /unknown embedder "bert-huge"; known: static, static-sif-100d, all-MiniLM-L6-v2, bge-small-en-v1\.5 .*npm run model:fetch/,
    );
    for (const name of ['../tampered', '/etc', 'tampered/../tampered', '']) {
      await expect(loadEmbedder({ name, modelsDir })).rejects.toThrow(/unknown embedder/);
    }
    expect(PINNED_MODELS.map((p) => p.name)).toContain('all-MiniLM-L6-v2');
    await expect(loadEmbedder({ name: 'all-MiniLM-L6-v2', modelsDir })).rejects.toThrow(
      /all-MiniLM-L6-v2 is not installed \(no model\.json.*npm run model:fetch -- all-MiniLM-L6-v2/,
    );
  });
});
