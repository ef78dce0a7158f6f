/**
 * Where the 32-byte sealing key comes from. Everything the enclave writes to the host's
 * disk is sealed under it (enclave/storage/sealed-file.ts).
 *
 *   simulated (TEE_MODE=simulated)  a random key kept in DATA_DIR. SIMULATED SEALING: the
 *                                   files are still encrypted and authenticated, but the
 *                                   local host can read the key file, so this protects
 *                                   nothing from that host.
 *   kms (TEE_MODE=nitro)            a data key that AWS KMS releases only to an enclave whose
 *                                   attestation shows the expected PCRs (kms-sealing-key.ts,
 *                                   deploy/sealing.md); the host keeps only its KMS ciphertext.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileDurably } from './fs-utils.js';

export const SEALING_KEY_BYTES = 32;

export interface SealingKeySource {
  /** Where the key comes from, for the start-up log. */
  readonly description: string;
  /** True when the host can read the key (local development only). */
  readonly simulated: boolean;
  load(): Promise<Uint8Array>;
}

export const SIMULATED_KEY_FILE = 'sealing-key.simulated.json';

export class SimulatedSealingKey implements SealingKeySource {
  readonly description: string;
  readonly simulated = true;
  private readonly path: string;

  /** `storeDir`: where sealed files live; a key is never generated for existing ones. */
  constructor(dataDir: string, private readonly storeDir: string) {
    this.path = join(dataDir, SIMULATED_KEY_FILE);
    this.description = `simulated: a key file in DATA_DIR (${this.path}) that this host can read`;
  }

  async load(): Promise<Uint8Array> {
    if (existsSync(this.path)) {
      let key: Buffer | undefined;
      try {
        key = Buffer.from((JSON.parse(await readFile(this.path, 'utf8')) as { key: string }).key, 'base64');
      } catch {
        key = undefined;
      }
      if (key?.length !== SEALING_KEY_BYTES) throw new Error(`${this.path} does not hold a ${SEALING_KEY_BYTES}-byte key`);
      return new Uint8Array(key);
    }
    refuseNewKeyForSealedFiles(this.storeDir, this.path);
    const key = randomBytes(SEALING_KEY_BYTES);
    const record = {
      note: 'SIMULATED SEALING KEY. It seals the enclave\'s files in this folder, but anyone who can read this file can '
        + 'unseal them. On AWS Nitro the key is released by KMS to an attested enclave only (deploy/sealing.md).',
      key: key.toString('base64'),
    };
    await writeFileDurably(this.path, Buffer.from(`${JSON.stringify(record, null, 2)}\n`));
    return new Uint8Array(key);
  }
}

/** A new key could not open files sealed under the lost one; say so instead of failing later. */
export function refuseNewKeyForSealedFiles(storeDir: string, keyPath: string): void {
  if (existsSync(storeDir) && readdirSync(storeDir).some((name) => name.endsWith('.sealed'))) {
    throw new Error(`${storeDir} holds sealed files but their key (${keyPath}) is missing; restore it, or move the sealed files away to start empty`);
  }
}
