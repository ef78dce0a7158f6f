/**
 * PCR values for the simulated TEE: SHA-384 measurements of what the enclave runs.
 *
 *   PCR0  code     the enclave's compiled JavaScript (measureCode)
 *   PCR1  config   trust-relevant configuration as canonical JSON (measureConfig)
 *   PCR2  model    the embedding model: its id and the SHA-256 of the bytes loaded (measureModel)
 *
 * On real Nitro hardware the Nitro hypervisor fills PCR0–2 itself from the enclave image
 * (PCR0 whole image, PCR1 kernel and bootstrap, PCR2 application), and code, config and
 * model are all inside that image. The simulated TEE reuses the same indexes with the
 * meanings above so that a client pins "PCR0" either way.
 *
 * Only files under the given directories are measured: dependencies in node_modules
 * are not part of PCR0.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';

export const PCR_CODE = 0;
export const PCR_CONFIG = 1;
export const PCR_MODEL = 2;

/** Extensions Node will execute as JavaScript. */
const CODE_EXTENSIONS = ['.js', '.mjs', '.cjs'];
/** Domain separation, so a PCR0 can never equal the hash of some other encoding. */
const CODE_MEASUREMENT_TAG = 'private-agent-service/pcr0/v1\0';

/**
 * PCR0: SHA-384 over the JavaScript files under `dirs`, in order of their relative path
 * `<basename of dir>/<path inside it>` (forward slashes, compared by UTF-16 code unit so
 * the order does not depend on locale). After a tag, each file contributes
 * `path, 0x00, uint64 big-endian byte length, bytes`, which cannot be confused with a
 * different split of files.
 */
export async function measureCode(dirs: string[]): Promise<Uint8Array> {
  const files = new Map<string, string>(); // relative path → absolute path
  for (const dir of dirs) {
    const prefix = basename(dir);
    for (const relative of await listCodeFiles(dir)) {
      const key = `${prefix}/${relative}`;
      if (files.has(key)) throw new Error(`two code directories are both named ${prefix}; their files would collide`);
      files.set(key, join(dir, ...relative.split('/')));
    }
  }
  if (files.size === 0) throw new Error(`no JavaScript files under ${dirs.join(', ')}`);

  const hash = createHash('sha384').update(CODE_MEASUREMENT_TAG);
  for (const key of [...files.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
    const content = await readFile(files.get(key) as string);
    const length = Buffer.alloc(8);
    length.writeBigUInt64BE(BigInt(content.length));
    hash.update(key).update('\0').update(length).update(content);
  }
  return new Uint8Array(hash.digest());
}

/** Relative paths (forward slashes) of the JavaScript files under `dir`, recursively. */
async function listCodeFiles(dir: string, prefix = ''): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const relative = prefix + entry.name;
    if (entry.isDirectory()) {
      found.push(...(await listCodeFiles(join(dir, entry.name), `${relative}/`)));
    } else if (entry.isSymbolicLink()) {
      // A link could point at code outside the measured tree (or loop); refuse it.
      throw new Error(`symbolic link in measured code: ${join(dir, entry.name)}`);
    } else if (entry.isFile() && CODE_EXTENSIONS.some((ext) => entry.name.endsWith(ext))) {
      found.push(relative);
    }
  }
  return found;
}

export type ConfigValue = string | number | boolean | null;

/** Keys sorted, no whitespace: the same settings always give the same string. */
export function canonicalConfigJson(config: Record<string, ConfigValue>): string {
  const entries = Object.keys(config)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .map((key) => {
      const value = config[key];
      if (typeof value === 'number' && !Number.isFinite(value)) throw new Error(`config ${key} is not a finite number`);
      if (value !== null && !['string', 'number', 'boolean'].includes(typeof value)) {
        throw new Error(`config ${key} must be a string, number, boolean or null`);
      }
      return `${JSON.stringify(key)}:${JSON.stringify(value)}`;
    });
  return `{${entries.join(',')}}`;
}

/** PCR1: SHA-384 of canonicalConfigJson(config) as UTF-8. */
export function measureConfig(config: Record<string, ConfigValue>): Uint8Array {
  return new Uint8Array(createHash('sha384').update(canonicalConfigJson(config)).digest());
}

/**
 * PCR2: SHA-384 of canonicalConfigJson({model, sha256}), where sha256 is the hash of the
 * exact model bytes the embedder loaded (re-reading the file could measure other bytes).
 * Anyone can recompute it: `sha256sum model.onnx` for the static model; for a transformer
 * model `sha256sum models/<name>/model.json`, the manifest that lists the SHA-256 of its
 * model.onnx and tokenizer file, both checked against the bytes loaded.
 */
export function measureModel(model: { id: string; sha256: string }): Uint8Array {
  return measureConfig({ model: model.id, sha256: model.sha256 });
}

/** All three measurements, ready for SimulatedNitroProvider. */
export async function measureEnclave(inputs: {
  codeDirs: string[];
  config: Record<string, ConfigValue>;
  model: { id: string; sha256: string };
}): Promise<Map<number, Uint8Array>> {
  return new Map([
    [PCR_CODE, await measureCode(inputs.codeDirs)],
    [PCR_CONFIG, measureConfig(inputs.config)],
    [PCR_MODEL, measureModel(inputs.model)],
  ]);
}
