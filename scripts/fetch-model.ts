/**
 * `npm run model:fetch -- <name> [--from <dir>]`: installs a pinned transformer model
 * (enclave/embedding/transformer-pins.ts) into models/<name>/.
 *
 * Without --from, each file is downloaded from its `resolve` URL at the pinned commit
 * (https://huggingface.co, or the mirror in HF_ENDPOINT); with --from, it is copied from a
 * local folder (a Hugging Face snapshot, or a models/<name>/ copied from another machine).
 * Either way every file must hash to its pinned SHA-256, or nothing is installed; a model
 * with a file whose hash is not pinned yet is refused before anything is read.
 *
 * Files are written into a staging folder inside models/, loaded once as the enclave would,
 * and only then renamed into place, so models/<name>/ is either the old model or the new one.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { pathToFileURL } from 'node:url';
import { modelsDir as defaultModelsDir } from '../common/paths.js';
import { loadTransformerEmbedder } from '../enclave/embedding/transformer-embedder.js';
import {
  MANIFEST_FILE,
  MODEL_FILE,
  TRANSFORMER_FORMAT,
  formatManifest,
  type TokenizerFile,
  type TransformerManifest,
} from '../enclave/embedding/transformer-manifest.js';
import { HUGGING_FACE, PINNED_MODELS, findPin, pinnedFileUrl, type ModelPin, type PinnedFile } from '../enclave/embedding/transformer-pins.js';

export interface InstallOptions {
  modelsDir?: string;
  /** The pin table; tests pass their own. */
  pins?: readonly ModelPin[];
  /** Progress lines. */
  log?: (line: string) => void;
}

export interface InstallResult {
  dir: string;
  manifest: TransformerManifest;
}

/** Downloads a pinned model from `baseUrl` (Hugging Face by default). */
export async function fetchModel(name: string, options: InstallOptions & { baseUrl?: string } = {}): Promise<InstallResult> {
  const base = options.baseUrl ?? HUGGING_FACE;
  return install(name, options, async (pin, file, destination) => {
    const url = pinnedFileUrl(pin, file, base);
    options.log?.(`downloading ${url}`);
    const response = await fetch(url, { redirect: 'follow' });
    if (!response.ok || !response.body) throw new Error(`GET ${url} answered HTTP ${response.status}; nothing was installed`);
    return copyHashing(Readable.fromWeb(response.body as WebReadableStream<Uint8Array>), destination);
  });
}

/** Copies a pinned model from a local folder holding its files under their repository paths or plain names. */
export async function importModel(name: string, fromDir: string, options: InstallOptions = {}): Promise<InstallResult> {
  return install(name, options, async (_pin, file, destination) => {
    const candidates = [...new Set([join(fromDir, file.path), join(fromDir, basename(file.path))])];
    for (const candidate of candidates) {
      if (!(await isFile(candidate))) continue;
      options.log?.(`importing ${candidate}`);
      return copyHashing(createReadStream(candidate), destination);
    }
    throw new Error(`no ${candidates.map((c) => c.slice(fromDir.length + 1)).join(' or ')} in ${fromDir}; nothing was installed`);
  });
}

type Obtain = (pin: ModelPin, file: PinnedFile, destination: string) => Promise<string>;

async function install(name: string, options: InstallOptions, obtain: Obtain): Promise<InstallResult> {
  const pins = options.pins ?? PINNED_MODELS;
  const pin = findPin(name, pins);
  if (!pin) throw new Error(`no pinned model "${name}"; pinned: ${pins.map((p) => p.name).join(', ')}`);
  requireVerifiedHashes(pin);

  const modelsDir = resolve(options.modelsDir ?? defaultModelsDir);
  await mkdir(modelsDir, { recursive: true });
  // The staging folder holds models/<name>/ as it will be, so it can be loaded under its own name.
  const staging = await mkdtemp(join(modelsDir, `.${name}.staging-`));
  const target = join(modelsDir, name);
  try {
    const dir = join(staging, name);
    await mkdir(dir);
    const tokenizerFile = basename(pin.files.tokenizer.path) as TokenizerFile;
    for (const [file, installedAs] of [[pin.files.model, MODEL_FILE], [pin.files.tokenizer, tokenizerFile]] as const) {
      const got = await obtain(pin, file, join(dir, installedAs));
      if (got !== file.sha256) {
        throw new Error(`refusing ${file.path} of ${name}: its SHA-256 is ${got}, the pin requires ${file.sha256}; nothing was installed`);
      }
    }
    const manifest = manifestFor(pin, tokenizerFile);
    await writeFile(join(dir, MANIFEST_FILE), formatManifest(manifest));
    const embedder = await loadTransformerEmbedder(staging, name, pin);
    await embedder.close();

    // Swap in: the old folder (if any) is moved aside first, as rename cannot replace a folder.
    const old = join(staging, 'previous');
    const replacing = await exists(target);
    if (replacing) await rename(target, old);
    try {
      await rename(dir, target);
    } catch (error) {
      if (replacing) await rename(old, target);
      throw error;
    }
    options.log?.(`installed ${name} (${pin.repo}@${pin.revision.slice(0, 12)}) -> ${target}`);
    return { dir: target, manifest };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** Throws, saying how to pin them, when any file of the pin has no verified SHA-256. */
export function requireVerifiedHashes(pin: ModelPin): void {
  const unpinned = Object.values(pin.files).filter((file) => file.sha256 === null);
  if (unpinned.length === 0) return;
  const lines = unpinned.map((file) => {
    const reported = file.reportedSha256 ? `; reported elsewhere, unverified: ${file.reportedSha256}` : '';
    return `  ${file.path}: check it at https://huggingface.co/${pin.repo}/blob/${pin.revision}/${file.path}${reported}`;
  });
  throw new Error(
    [
      `${pin.name} has no verified SHA-256 pinned for ${unpinned.map((f) => f.path).join(', ')}, so it is not installed.`,
      'To pin it, get each file\'s SHA-256 from its Hugging Face page (shown for LFS files) or by downloading it',
      'and running sha256sum, and set it as `sha256` in enclave/embedding/transformer-pins.ts:',
      ...lines,
    ].join('\n'),
  );
}

function manifestFor(pin: ModelPin, tokenizerFile: TokenizerFile): TransformerManifest {
  return {
    format: TRANSFORMER_FORMAT,
    name: pin.name,
    dimension: pin.dimension,
    max_length: pin.max_length,
    pooling: pin.pooling,
    output: pin.output,
    lowercase: pin.lowercase,
    files: {
      model: { path: MODEL_FILE, sha256: pin.files.model.sha256! },
      tokenizer: { path: tokenizerFile, sha256: pin.files.tokenizer.sha256! },
    },
    source: { repo: pin.repo, revision: pin.revision },
  };
}

/** Streams `source` into a new file, returning the SHA-256 of what was written. */
async function copyHashing(source: Readable, destination: string): Promise<string> {
  const hash = createHash('sha256');
  const hashing = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      done(null, chunk);
    },
  });
  await pipeline(source, hashing, createWriteStream(destination, { flags: 'wx' }));
  return hash.digest('hex');
}

async function isFile(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined))?.isFile() ?? false;
}

async function exists(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined)) !== undefined;
}

const USAGE = `usage: npm run model:fetch -- <name> [--from <dir>]
  Installs a pinned transformer embedding model into models/<name>/ (MODELS_DIR to change),
  downloading it from Hugging Face (HF_ENDPOINT to use a mirror) or, with --from, copying it
  from a local folder. Every file must match its pinned SHA-256. Then start the enclave
  with EMBEDDING_MODEL=<name>.`;

function listPins(): string {
  return PINNED_MODELS.map((pin) => {
    const verified = Object.values(pin.files).every((file) => file.sha256 !== null);
    return `  ${pin.name.padEnd(20)} ${pin.repo}@${pin.revision.slice(0, 12)}  ${pin.dimension}-d  ${verified ? 'hashes pinned' : 'hashes NOT verified yet: refused until pinned'}`;
  }).join('\n');
}

async function main(argv: string[]): Promise<void> {
  const args = [...argv];
  if (args.length === 0 || args.includes('--help') || args.includes('-h')) {
    console.log(`${USAGE}\n\npinned models:\n${listPins()}`);
    return;
  }
  const fromAt = args.indexOf('--from');
  let fromDir: string | undefined;
  if (fromAt >= 0) {
    fromDir = args[fromAt + 1];
    if (!fromDir) throw new Error('--from needs a folder');
    args.splice(fromAt, 2);
  }
  if (args.length !== 1 || args[0].startsWith('-')) throw new Error(`unexpected arguments: ${argv.join(' ')}\n${USAGE}`);
  const options = { modelsDir: process.env.MODELS_DIR || undefined, log: (line: string) => console.log(line) };
  const { dir } = fromDir
    ? await importModel(args[0], resolve(fromDir), options)
    : await fetchModel(args[0], { ...options, baseUrl: process.env.HF_ENDPOINT || undefined });
  console.log(`use it with EMBEDDING_MODEL=${args[0]} (${dir})`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    console.error(`model:fetch: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  });
}
