/**
 * The registry of text embedders: models are looked up by name in EMBEDDERS (the built-in
 * static model, and the transformer models `npm run model:fetch` knows, transformer-pins.ts);
 * any other folder models/<name>/ holding a transformer model.json loads as a transformer too.
 * The interface they all implement is in types.ts, which imports none of them.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadStaticSif } from './static-embedder.js';
import { STATIC_MODEL } from './static-model.js';
import { loadTransformerEmbedder } from './transformer-embedder.js';
import { MANIFEST_FILE, TRANSFORMER_FORMAT, isValidModelName } from './transformer-manifest.js';
import { PINNED_MODELS } from './transformer-pins.js';
import type { Embedder } from './types.js';

export type { Embedder } from './types.js';
export { MAX_TOKENS_PER_TEXT, planRuns } from './static-embedder.js';

export interface LoadEmbedderOptions {
  /** "static" (the default model), "static-sif-100d", or a transformer model's name. */
  name: string;
  /** The models/ folder the install-time build wrote to. */
  modelsDir: string;
}

const EMBEDDERS: Readonly<Record<string, (modelsDir: string) => Promise<Embedder>>> = {
  static: loadStaticSif,
  [STATIC_MODEL.id]: loadStaticSif,
  ...Object.fromEntries(PINNED_MODELS.map((pin) => [pin.name, (dir: string) => loadTransformerEmbedder(dir, pin.name, pin)])),
};

export async function loadEmbedder({ name, modelsDir }: LoadEmbedderOptions): Promise<Embedder> {
  const load = Object.hasOwn(EMBEDDERS, name) ? EMBEDDERS[name] : undefined;
  if (load) return load(modelsDir);
  if (await isInstalledTransformer(modelsDir, name)) return loadTransformerEmbedder(modelsDir, name);
  throw new Error(
    `unknown embedder "${name}"; known: ${Object.keys(EMBEDDERS).join(', ')} ` +
      `(transformer models install with \`npm run model:fetch -- <name>\`), or a folder ${join(modelsDir, '<name>')} with a transformer ${MANIFEST_FILE}`,
  );
}

/** Whether models/<name>/model.json is there and claims to be a transformer model (loading checks the rest). */
async function isInstalledTransformer(modelsDir: string, name: string): Promise<boolean> {
  if (!isValidModelName(name)) return false; // never a path outside models/
  try {
    const manifest = JSON.parse(await readFile(join(modelsDir, name, MANIFEST_FILE), 'utf8')) as { format?: unknown };
    return manifest.format === TRANSFORMER_FORMAT;
  } catch {
    return false;
  }
}
