/**
 * Where the 32-byte sealing key comes from. Everything the enclave writes to the host's
 * disk is sealed under it (enclave/storage/sealed-file.ts).
 *
 *   simulated (TEE_MODE=simulated)  a random key kept in the host store. SIMULATED SEALING:
 *                                   the blobs are still encrypted and authenticated, but the
 *                                   local host can read the key, so this protects nothing
 *                                   from that host.
 *   kms (TEE_MODE=nitro)            a data key that AWS KMS releases only to an enclave whose
 *                                   attestation shows the expected PCRs (kms-sealing-key.ts,
 *                                   deploy/sealing.md); the host store keeps only its KMS
 *                                   ciphertext.
 */
import { randomBytes } from 'node:crypto';
import { readWhole, type BlobStore } from '../../common/blob-store.js';

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
  readonly description = `simulated: a key in the host store (${SIMULATED_KEY_FILE}) that this host can read`;
  readonly simulated = true;

  /** `sealedPrefix`: where sealed blobs live; a key is never generated for existing ones. */
  constructor(private readonly blobs: BlobStore, private readonly sealedPrefix: string) {}

  async load(): Promise<Uint8Array> {
    const stored = await readWhole(this.blobs, SIMULATED_KEY_FILE);
    if (stored) {
      let key: Buffer | undefined;
      try {
        key = Buffer.from((JSON.parse(stored.toString('utf8')) as { key: string }).key, 'base64');
      } catch {
        key = undefined;
      }
      if (key?.length !== SEALING_KEY_BYTES) throw new Error(`${SIMULATED_KEY_FILE} does not hold a ${SEALING_KEY_BYTES}-byte key`);
      return new Uint8Array(key);
    }
    await refuseNewKeyForSealedBlobs(this.blobs, this.sealedPrefix, SIMULATED_KEY_FILE);
    const key = randomBytes(SEALING_KEY_BYTES);
    const record = {
      note: 'SIMULATED SEALING KEY. It seals the enclave\'s blobs in this folder, but anyone who can read this file can '
        + 'unseal them. On AWS Nitro the key is released by KMS to an attested enclave only (deploy/sealing.md).',
      key: key.toString('base64'),
    };
    await this.blobs.put(SIMULATED_KEY_FILE, Buffer.from(`${JSON.stringify(record, null, 2)}\n`));
    return new Uint8Array(key);
  }
}

/** A new key could not open blobs sealed under the lost one; say so instead of failing later. */
export async function refuseNewKeyForSealedBlobs(blobs: BlobStore, sealedPrefix: string, keyName: string): Promise<void> {
  if ((await blobs.list(sealedPrefix)).some(({ name }) => name.endsWith('.sealed'))) {
    throw new Error(`the host store holds sealed blobs (${sealedPrefix}) but not their key (${keyName}); restore it, or move the sealed blobs away to start empty`);
  }
}
