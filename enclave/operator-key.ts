import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import nacl from 'tweetnacl';

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
 * generated once and kept in DATA_DIR/operator-key.json (mode 0600), so a local run has
 * a stable operator identity without any set-up.
 */
export function resolveOperatorKey(configured: string | undefined, dataDir: string): Uint8Array {
  if (configured) {
    const key = parsePublicKey(configured);
    if (!key) throw new Error('OPERATOR_PUBKEY must be a 32-byte Ed25519 public key in base64 or hex');
    return key;
  }
  const file = join(dataDir, 'operator-key.json');
  if (existsSync(file)) {
    const stored = JSON.parse(readFileSync(file, 'utf8')) as { public_key: string };
    return new Uint8Array(Buffer.from(stored.public_key, 'base64'));
  }
  mkdirSync(dataDir, { recursive: true });
  const pair = nacl.sign.keyPair();
  const record = {
    note: 'Local operator key pair, generated because OPERATOR_PUBKEY was not set.',
    public_key: Buffer.from(pair.publicKey).toString('base64'),
    secret_key: Buffer.from(pair.secretKey).toString('base64'),
  };
  writeFileSync(file, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  return pair.publicKey;
}
