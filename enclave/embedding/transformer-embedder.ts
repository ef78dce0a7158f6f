/**
 * BERT-family sentence models (all-MiniLM-L6-v2, bge-small-en-v1.5, ...) run by onnxruntime:
 * tokenizer -> input_ids / attention_mask / token_type_ids (int64) -> token vectors ->
 * pooling over the attention mask -> L2 normalisation.
 *
 * A model lives in models/<name>/ as model.onnx, tokenizer.json (or vocab.txt) and model.json
 * (transformer-manifest.ts), which lists both files' SHA-256. Loading checks the bytes read
 * against those hashes and builds the session and the tokenizer from the very bytes hashed.
 *
 * Attestation: `sha256` is the SHA-256 of model.json as loaded. As model.json names the hashes
 * of model.onnx and of the tokenizer file (checked against the loaded bytes) together with
 * the dimension, maximum length, pooling and output, that one hash pins everything that
 * decides the vectors. Anyone can recompute it: `sha256sum models/<name>/model.json`.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ort } from './onnxruntime.js';
import type { Embedder } from './types.js';
import { clsPool, l2Normalise, meanPool, rows } from './pooling.js';
import { MANIFEST_FILE, MODEL_FILE, parseManifest, type TransformerManifest } from './transformer-manifest.js';
import type { ModelPin } from './transformer-pins.js';
import { SentenceTokenizer, type EncodedText } from './transformer-tokenizer.js';

/** The inputs a BERT-family graph may declare; each is fed only if declared. */
const INPUT_IDS = 'input_ids';
const ATTENTION_MASK = 'attention_mask';
const TOKEN_TYPE_IDS = 'token_type_ids';
const KNOWN_INPUTS = new Set([INPUT_IDS, ATTENTION_MASK, TOKEN_TYPE_IDS]);

/**
 * Bounds on one ONNX run. Attention costs grow with the square of the padded length, so
 * texts are run in groups of similar length (sorted by length) of at most this many texts
 * and padded tokens. 4096 tokens are 8 texts of 512, whose attention scores in a 12-head
 * model take 8 x 12 x 512 x 512 floats = 100 MB per layer while the run lasts.
 */
export const MAX_TEXTS_PER_RUN = 32;
export const MAX_TOKENS_PER_RUN = 4096;

const FETCH_HINT = (name: string) => `run \`npm run model:fetch -- ${name}\` (or \`-- ${name} --from <dir>\` for a local copy)`;

/**
 * Loads models/<name>/. With a pin (the model is one `model:fetch` knows), the installed
 * hashes must also be the pinned ones, so a hand-edited model.json cannot pass as the pin.
 */
export async function loadTransformerEmbedder(modelsDir: string, name: string, pin?: ModelPin): Promise<Embedder> {
  const dir = join(modelsDir, name);
  const read = (file: string) =>
    readFile(join(dir, file)).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
      throw new Error(`embedding model ${name} is not installed (no ${file} in ${dir}): ${FETCH_HINT(name)}`);
    });

  const manifestBytes = await read(MANIFEST_FILE);
  const manifest = parseManifest(manifestBytes.toString('utf8'), join(dir, MANIFEST_FILE));
  if (manifest.name !== name) throw new Error(`${join(dir, MANIFEST_FILE)} describes model "${manifest.name}", not "${name}"`);
  const [model, tokenizerBytes] = await Promise.all([read(MODEL_FILE), read(manifest.files.tokenizer.path)]);
  for (const [file, bytes] of [[manifest.files.model, model], [manifest.files.tokenizer, tokenizerBytes]] as const) {
    if (sha256(bytes) !== file.sha256) {
      throw new Error(`${join(dir, file.path)} does not match the SHA-256 in its model.json; reinstall it: ${FETCH_HINT(name)}`);
    }
  }
  if (pin) {
    for (const key of ['model', 'tokenizer'] as const) {
      const pinned = pin.files[key].sha256;
      if (pinned !== null && pinned !== manifest.files[key].sha256) {
        throw new Error(`models/${name}/${manifest.files[key].path} is not the pinned file; reinstall it: ${FETCH_HINT(name)}`);
      }
    }
  }

  const tokenizer = SentenceTokenizer.load(manifest.files.tokenizer.path, tokenizerBytes.toString('utf8'), manifest);
  const session = await ort.InferenceSession.create(model, { executionProviders: ['cpu'] });
  try {
    const embedder = new TransformerEmbedder(session, tokenizer, manifest, sha256(manifestBytes));
    // One text through the whole path, so a wrong dimension or output is found now.
    const [probe] = await embedder.embed(['dimension check']);
    if (probe.length !== manifest.dimension) {
      throw new Error(`model.json of ${name} says dimension ${manifest.dimension}, the model gives ${probe.length}`);
    }
    return embedder;
  } catch (error) {
    await session.release();
    throw error;
  }
}

class TransformerEmbedder implements Embedder {
  readonly id: string;
  readonly dimension: number;
  private readonly feedsTokenTypes: boolean;

  constructor(
    private readonly session: ort.InferenceSession,
    private readonly tokenizer: SentenceTokenizer,
    private readonly manifest: TransformerManifest,
    readonly sha256: string,
  ) {
    this.id = manifest.name;
    this.dimension = manifest.dimension;
    checkSignature(session, manifest);
    this.feedsTokenTypes = session.inputNames.includes(TOKEN_TYPE_IDS);
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    const encoded = texts.map((text) => this.tokenizer.encode(text, this.manifest.max_length));
    const vectors = new Array<Float32Array>(texts.length);
    for (const run of runs(encoded)) {
      const pooled = await this.run(run.map((i) => encoded[i]));
      run.forEach((i, n) => (vectors[i] = l2Normalise(pooled[n])));
    }
    return vectors;
  }

  /** One ONNX run over texts right-padded to the longest; one pooled vector per text. */
  private async run(batch: EncodedText[]): Promise<Float32Array[]> {
    const length = Math.max(...batch.map((text) => text.ids.length));
    const size = batch.length * length;
    const ids = new BigInt64Array(size).fill(BigInt(this.tokenizer.padId));
    const mask = new BigInt64Array(size);
    const types = new BigInt64Array(size);
    const maskNumbers = new Uint8Array(size);
    batch.forEach((text, row) => {
      text.ids.forEach((id, col) => {
        const at = row * length + col;
        ids[at] = BigInt(id);
        mask[at] = 1n;
        maskNumbers[at] = 1;
        types[at] = BigInt(text.typeIds[col]);
      });
    });
    const dims = [batch.length, length];
    const feeds: Record<string, ort.Tensor> = {
      [INPUT_IDS]: new ort.Tensor('int64', ids, dims),
      [ATTENTION_MASK]: new ort.Tensor('int64', mask, dims),
    };
    if (this.feedsTokenTypes) feeds[TOKEN_TYPE_IDS] = new ort.Tensor('int64', types, dims);

    const output = (await this.session.run(feeds, [this.manifest.output]))[this.manifest.output];
    const data = output.data as Float32Array;
    const { pooling } = this.manifest;
    const shapeOk = pooling === 'none' ? output.dims.length === 2 : output.dims.length === 3 && Number(output.dims[1]) === length;
    if (output.type !== 'float32' || !shapeOk) {
      throw new Error(`output ${this.manifest.output} is ${output.type} [${output.dims.join(', ')}]; pooling "${pooling}" needs float32 ${pooling === 'none' ? '[batch, dim]' : '[batch, sequence, hidden]'}`);
    }
    if (pooling === 'none') return rows(data, batch.length, Number(output.dims[1]));
    const tensor = { data, batch: batch.length, sequence: length, hidden: Number(output.dims[2]) };
    return pooling === 'mean' ? meanPool(tensor, maskNumbers) : clsPool(tensor);
  }

  async close(): Promise<void> {
    await this.session.release();
  }
}

/** The graph must take input_ids and attention_mask (int64), nothing it would not be fed, and have the output. */
function checkSignature(session: ort.InferenceSession, manifest: TransformerManifest): void {
  const problems: string[] = [];
  for (const required of [INPUT_IDS, ATTENTION_MASK]) {
    if (!session.inputNames.includes(required)) problems.push(`it has no input ${required}`);
  }
  for (const input of session.inputMetadata) {
    if (!KNOWN_INPUTS.has(input.name)) problems.push(`it wants input ${input.name}, which BERT-family models do not have`);
    else if (input.isTensor && input.type !== 'int64') problems.push(`input ${input.name} is ${input.type}, not int64`);
  }
  if (!session.outputNames.includes(manifest.output)) {
    problems.push(`it has no output ${manifest.output} (outputs: ${session.outputNames.join(', ')})`);
  }
  if (problems.length > 0) throw new Error(`model.onnx of ${manifest.name} is not a BERT-family sentence model: ${problems.join('; ')}`);
}

/**
 * Groups text indexes into runs: by length, so texts padded together are of similar length,
 * and within MAX_TEXTS_PER_RUN texts and MAX_TOKENS_PER_RUN padded tokens.
 */
export function* runs(texts: readonly EncodedText[]): Generator<number[]> {
  const order = texts.map((_, i) => i).sort((a, b) => texts[a].ids.length - texts[b].ids.length);
  let run: number[] = [];
  for (const i of order) {
    // Sorted ascending, so this text is the longest of the run if it joins.
    const padded = (run.length + 1) * texts[i].ids.length;
    if (run.length > 0 && (run.length >= MAX_TEXTS_PER_RUN || padded > MAX_TOKENS_PER_RUN)) {
      yield run;
      run = [];
    }
    run.push(i);
  }
  if (run.length > 0) yield run;
}

function sha256(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}
