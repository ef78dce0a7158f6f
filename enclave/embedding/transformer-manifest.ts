/**
 * models/<name>/model.json of a transformer sentence model: what `npm run model:fetch` writes
 * and what the enclave loads. It names the two files of the model with their SHA-256 and the
 * few settings that decide how vectors are made from them.
 *
 * The file is written deterministically (fixed key order, no timestamps), because its own
 * SHA-256 is the model hash the enclave reports for attestation (see transformer-embedder.ts):
 * the same model installed twice must measure the same.
 */

export const TRANSFORMER_FORMAT = 'bert-onnx/1';
export const MANIFEST_FILE = 'model.json';
export const MODEL_FILE = 'model.onnx';

/**
 * How a sentence vector is read off the model's output:
 *  - mean: average of the token vectors of `output` [batch, seq, hidden] over the attention mask
 *    (sentence-transformers' mean pooling, e.g. all-MiniLM-L6-v2);
 *  - cls: the first token's vector (e.g. the BGE models, trained for it);
 *  - none: `output` is already one vector per text [batch, dim] (exports that include pooling).
 * Vectors are L2-normalised in every case.
 */
export const POOLINGS = ['mean', 'cls', 'none'] as const;
export type Pooling = (typeof POOLINGS)[number];

/** The tokenizer files the loader understands: a Hugging Face tokenizer.json, or a WordPiece vocab.txt. */
export const TOKENIZER_FILES = ['tokenizer.json', 'vocab.txt'] as const;
export type TokenizerFile = (typeof TOKENIZER_FILES)[number];

export interface ManifestFile<P extends string = string> {
  path: P;
  sha256: string;
}

export interface TransformerManifest {
  format: typeof TRANSFORMER_FORMAT;
  /** The EMBEDDING_MODEL value; equals the folder name. */
  name: string;
  dimension: number;
  /** Tokens per text, special tokens included; the rest of a longer text is cut off. */
  max_length: number;
  pooling: Pooling;
  /** The graph output pooled (or used as is, with pooling "none"). */
  output: string;
  /** Only for vocab.txt (tokenizer.json carries its own normaliser): lowercase and strip accents, as uncased BERT. */
  lowercase: boolean;
  files: { model: ManifestFile<typeof MODEL_FILE>; tokenizer: ManifestFile<TokenizerFile> };
  /** Where the files came from (informational). */
  source: { repo: string; revision: string } | null;
}

/** Folder-safe model names: they become a path under models/. */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const SHA256 = /^[0-9a-f]{64}$/;

export function isValidModelName(name: string): boolean {
  return MODEL_NAME.test(name);
}

export function isSha256(value: unknown): value is string {
  return typeof value === 'string' && SHA256.test(value);
}

/** The manifest's bytes: keys in a fixed order, two-space indent, final newline. */
export function formatManifest(manifest: TransformerManifest): string {
  const ordered: TransformerManifest = {
    format: manifest.format,
    name: manifest.name,
    dimension: manifest.dimension,
    max_length: manifest.max_length,
    pooling: manifest.pooling,
    output: manifest.output,
    lowercase: manifest.lowercase,
    files: {
      model: { path: manifest.files.model.path, sha256: manifest.files.model.sha256 },
      tokenizer: { path: manifest.files.tokenizer.path, sha256: manifest.files.tokenizer.sha256 },
    },
    source: manifest.source && { repo: manifest.source.repo, revision: manifest.source.revision },
  };
  return JSON.stringify(ordered, null, 2) + '\n';
}

/** Parses and checks a model.json; throws naming every problem. */
export function parseManifest(text: string, where: string): TransformerManifest {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`${where} is not JSON`);
  }
  const m = value as Partial<Record<keyof TransformerManifest, unknown>>;
  const problems: string[] = [];
  const need = (ok: boolean, problem: string) => {
    if (!ok) problems.push(problem);
  };
  if (typeof value !== 'object' || value === null) throw new Error(`${where} is not a JSON object`);
  need(m.format === TRANSFORMER_FORMAT, `format must be "${TRANSFORMER_FORMAT}"`);
  need(typeof m.name === 'string' && isValidModelName(m.name), 'name must be a model name (letters, digits, . _ -)');
  need(Number.isInteger(m.dimension) && (m.dimension as number) > 0 && (m.dimension as number) <= 65536, 'dimension must be a positive integer');
  need(Number.isInteger(m.max_length) && (m.max_length as number) >= 3 && (m.max_length as number) <= 8192, 'max_length must be an integer in 3..8192');
  need((POOLINGS as readonly unknown[]).includes(m.pooling), `pooling must be one of ${POOLINGS.join(', ')}`);
  need(typeof m.output === 'string' && m.output.length > 0, 'output must name a graph output');
  need(typeof m.lowercase === 'boolean', 'lowercase must be true or false');
  const files = m.files as Partial<TransformerManifest['files']> | undefined;
  need(files?.model?.path === MODEL_FILE && isSha256(files.model.sha256), `files.model must be {"path": "${MODEL_FILE}", "sha256": <64 hex>}`);
  need(
    (TOKENIZER_FILES as readonly unknown[]).includes(files?.tokenizer?.path) && isSha256(files?.tokenizer?.sha256),
    `files.tokenizer must be {"path": ${TOKENIZER_FILES.map((f) => `"${f}"`).join(' or ')}, "sha256": <64 hex>}`,
  );
  const source = m.source as TransformerManifest['source'] | undefined;
  need(source === null || (typeof source?.repo === 'string' && typeof source.revision === 'string'), 'source must be null or {repo, revision}');
  if (problems.length > 0) throw new Error(`${where} is not a valid transformer model manifest: ${problems.join('; ')}`);
  return value as TransformerManifest;
}
