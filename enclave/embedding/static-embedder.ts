/**
 * The runtime of the built-in static model (static-sif-100d): checks the built files against
 * their manifest, then embeds by the ONNX graph the install-time build wrote (see docs/retrieval.md,
 * "The default model").
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ort } from './onnxruntime.js';
import { STATIC_MODEL, parseVocab, subwordLayoutJson, type StaticModelManifest } from './static-model.js';
import { encode, vocabularyFromList, type Encoded, type SubwordTable, type Vocabulary } from './tokenizer.js';
import type { Embedder } from './types.js';

/**
 * Tokens per text that are embedded; the rest of a longer text is ignored. A static model
 * gains little from more words of one text, and the cap bounds the work a single text costs.
 */
export const MAX_TOKENS_PER_TEXT = 512;

/**
 * Padded ids (texts x longest text) per ONNX run. The graph materialises a float vector per
 * id, so this bounds each intermediate tensor of a run to ~26 MB; larger batches take
 * several runs.
 */
const MAX_IDS_PER_RUN = 64 * 1024;

const BUILD_HINT = 'run `npm run prepare` (or `node dist/scripts/build-model.js` after `npm run build`)';

/**
 * Loads models/static-sif-100d after checking its files against model.json. The session is
 * created from the very bytes that were hashed, and model.onnx carries the vocabulary's hash,
 * so the measured model hash also pins the token ids.
 */
export async function loadStaticSif(modelsDir: string): Promise<Embedder> {
  const dir = join(modelsDir, STATIC_MODEL.id);
  const [manifestText, model, vocabText] = await Promise.all(
    [STATIC_MODEL.manifestFile, STATIC_MODEL.modelFile, STATIC_MODEL.vocabFile].map((file) =>
      readFile(join(dir, file)).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') throw error;
        throw new Error(`embedding model ${STATIC_MODEL.id} is not built (no ${file} in ${dir}): ${BUILD_HINT}`);
      }),
    ),
  );
  const sha256 = hash(model);
  const vocabSha256 = hash(vocabText);
  const manifest = parseManifest(manifestText);
  // onnxruntime-node does not expose model metadata, so the vocabulary hash and the subword
  // layout recorded in model.onnx are checked by finding them in the model's bytes.
  if (
    manifest?.sha256 !== sha256 ||
    manifest.vocab_sha256 !== vocabSha256 ||
    manifest.dimension !== STATIC_MODEL.dimension ||
    !manifest.subwords ||
    !model.includes(vocabSha256) ||
    !model.includes(subwordLayoutJson(manifest.subwords))
  ) {
    throw new Error(`embedding model in ${dir} does not match its model.json; rebuild it with \`node dist/scripts/build-model.js --force\``);
  }

  const session = await ort.InferenceSession.create(model, { executionProviders: ['cpu'] });
  const vocab = vocabularyFromList(parseVocab(vocabText.toString('utf8')));
  const { offset, buckets, minN, maxN } = manifest.subwords;
  return new StaticSifEmbedder(session, vocab, { offset, buckets, minN, maxN }, sha256);
}

class StaticSifEmbedder implements Embedder {
  readonly id = STATIC_MODEL.id;
  readonly dimension = STATIC_MODEL.dimension;

  constructor(
    private readonly session: ort.InferenceSession,
    private readonly vocab: Vocabulary,
    private readonly subwords: SubwordTable,
    readonly sha256: string,
  ) {}

  async embed(texts: string[]): Promise<Float32Array[]> {
    const encoded = texts.map((text) => encode(text, this.vocab, MAX_TOKENS_PER_TEXT, this.subwords));
    const vectors: Float32Array[] = [];
    for (const run of planRuns(encoded.map(({ ids }) => ids.length))) {
      vectors.push(...(await this.run(encoded.slice(run.start, run.end))));
    }
    return vectors;
  }

  /** Embeds texts in one ONNX run, right-padding their ids with 0 (scale 0) to the longest. */
  private async run(batch: Encoded[]): Promise<Float32Array[]> {
    // At least one column, so a batch of texts without known words is still a valid tensor.
    const length = batch.reduce((longest, { ids }) => Math.max(longest, ids.length), 1);
    const input = new BigInt64Array(batch.length * length);
    const scales = new Float32Array(batch.length * length);
    batch.forEach(({ ids, scales: shares }, row) =>
      ids.forEach((id, col) => {
        input[row * length + col] = BigInt(id);
        scales[row * length + col] = shares[col];
      }),
    );
    const feeds = {
      [STATIC_MODEL.inputName]: new ort.Tensor('int64', input, [batch.length, length]),
      [STATIC_MODEL.scalesInputName]: new ort.Tensor('float32', scales, [batch.length, length]),
    };
    const output = (await this.session.run(feeds))[STATIC_MODEL.outputName];
    const data = output.data as Float32Array;
    return batch.map((_, row) => data.slice(row * this.dimension, (row + 1) * this.dimension));
  }

  async close(): Promise<void> {
    await this.session.release();
  }
}

/**
 * Splits a batch of texts (given by their id counts), in order, into runs [start, end) of at
 * most MAX_IDS_PER_RUN padded ids. A full API batch (100 texts of at most MAX_TOKENS_PER_TEXT
 * ids: 51,200) always fits one run.
 */
export function planRuns(lengths: readonly number[]): { start: number; end: number }[] {
  const runs: { start: number; end: number }[] = [];
  let start = 0;
  let longest = 1;
  lengths.forEach((length, i) => {
    if (i > start && (i - start + 1) * Math.max(longest, length) > MAX_IDS_PER_RUN) {
      runs.push({ start, end: i });
      start = i;
      longest = 1;
    }
    longest = Math.max(longest, length);
  });
  if (lengths.length > start) runs.push({ start, end: lengths.length });
  return runs;
}

function parseManifest(text: Buffer): StaticModelManifest | undefined {
  try {
    return JSON.parse(text.toString('utf8')) as StaticModelManifest;
  } catch {
    return undefined; // reported as a mismatch, which says how to rebuild
  }
}

function hash(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}
