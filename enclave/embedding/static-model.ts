/**
 * The static SIF sentence-embedding model as the enclave sees it: its on-disk layout and its
 * manifest. A sentence vector is the SIF-weighted sum of its GloVe word vectors (Arora et al.
 * 2017, "A simple but tough-to-beat baseline for sentence embeddings"), L2-normalised.
 *
 * How the word table and the ONNX graph are built is install-time code and lives in
 * scripts/lib/static-model-build.ts, outside the code attestation measures.
 */
import type { SubwordTable } from './tokenizer.js';

/** Files of the built model in models/<id>/, and the names of its graph input and output. */
export const STATIC_MODEL = {
  id: 'static-sif-100d',
  dimension: 100,
  modelFile: 'model.onnx',
  vocabFile: 'vocab.txt',
  manifestFile: 'model.json',
  inputName: 'input_ids',
  /** Float [batch, sequence]: the share of its token's weight each id carries (see tokenizer.encode). */
  scalesInputName: 'token_scales',
  outputName: 'embeddings',
  /** Metadata key in model.onnx that binds the vocabulary to the measured model bytes. */
  vocabHashKey: 'vocab_sha256',
  /** Metadata key in model.onnx holding the subword layout (JSON), which fixes the bucket ids. */
  subwordKey: 'subwords',
} as const;

/** model.json: what was built, from what, and the hashes that tie the files together. */
export interface StaticModelManifest {
  name: string;
  dimension: number;
  /** Tokens in vocab.txt, not counting the padding entry (id 0). */
  vocabularySize: number;
  sif_a: number;
  /** Principal directions projected out of the word table (see removeCommonComponents). */
  common_components: number;
  /** Subword buckets for out-of-vocabulary words: rows offset ... offset + buckets - 1 (see subwords.ts). */
  subwords: SubwordTable & { weight: number };
  /** SHA-256 (hex) of model.onnx. */
  sha256: string;
  /** SHA-256 (hex) of vocab.txt; also stored inside model.onnx under STATIC_MODEL.vocabHashKey. */
  vocab_sha256: string;
  source: { package: string; version: string };
  built_at: string;
}

/** The subword layout as recorded in model.onnx: fixed key order, so builder and loader agree byte for byte. */
export function subwordLayoutJson({ offset, buckets, minN, maxN }: SubwordTable): string {
  return JSON.stringify({ offset, buckets, minN, maxN });
}

/** Line 0 of vocab.txt. The tokenizer splits "<" and ">" off, so it never matches a token. */
export const PADDING_TOKEN = '<pad>';

/** Reads vocab.txt (written by formatVocab in scripts/lib/static-model-build.ts): index = id, index 0 = padding. */
export function parseVocab(text: string): string[] {
  const lines = text.split('\n');
  if (lines.pop() !== '' || lines[0] !== PADDING_TOKEN) throw new Error('vocab.txt is malformed');
  return lines;
}
