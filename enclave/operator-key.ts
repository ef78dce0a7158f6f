import nacl from 'tweetnacl';
import { readWhole, type BlobStore } from '../common/blob-store.js';

export const OPERATOR_KEY_FILE = 'operator-key.json';

/** Parses a 32-byte Ed25519 public key given as base64 or hex. */
export function parsePublicKey(value: string): Uint8Array | undefined {
  const v = value.trim();
  const isHex = /^[0-9a-fA-F]{64}$/.test(v);
  const bytes = Buffer.from(v, isHex ? 'hex' : 'base64');
  // Buffer's base64 decoder skips junk; a round trip proves the text was real base64.
  const wellFormed = isHex || bytes.toString('base64') === v;
  return wellFormed && bytes.length === nacl.sign.publicKeyLength ? new Uint8Array(bytes) : undefined;
}

/**
 * The operator's Ed25519 public key: OPERATOR_PUBKEY when set; otherwise a key pair
 * generated once and kept in the host store (DATA_DIR/operator-key.json there), so a local
 * run has a stable operator identity without any set-up. It is the operator's key, not the
 * enclave's: the host holding it is expected.
 */
export async function resolveOperatorKey(configured: string | undefined, blobs: BlobStore): Promise<Uint8Array> {
  if (configured) {
    const key = parsePublicKey(configured);
    if (!key) throw new Error('OPERATOR_PUBKEY must be a 32-byte Ed25519 public key in base64 or hex');
    return key;
  }
  const stored = await readWhole(blobs, OPERATOR_KEY_FILE);
  if (stored) {
    const key = parsePublicKey((JSON.parse(stored.toString('utf8')) as { public_key: string }).public_key ?? '');
    if (!key) throw new Error(`${OPERATOR_KEY_FILE} in the host store holds no valid public key`);
    return key;
  }
  const pair = nacl.sign.keyPair();
  const record = {
    note: 'Local operator key pair, generated because OPERATOR_PUBKEY was not set.',
    public_key: Buffer.from(pair.publicKey).toString('base64'),
    secret_key: Buffer.from(pair.secretKey).toString('base64'),
  };
  await blobs.put(OPERATOR_KEY_FILE, Buffer.from(`${JSON.stringify(record, null, 2)}\n`));
  return pair.publicKey;
}
