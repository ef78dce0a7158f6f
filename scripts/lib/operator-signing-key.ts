/**
 * The operator's Ed25519 signing key, for release manifests. Two forms:
 *
 *   - a PKCS#8 PEM, as `openssl genpkey -algorithm ed25519 -out operator.pem` writes it
 *     (deploy/README.md: the key whose public half is the image's OPERATOR_PUBKEY);
 *   - the JSON a local enclave writes to the host store when OPERATOR_PUBKEY is not set
 *     (`$DATA_DIR/operator-key.json`, enclave/operator-key.ts), for simulated releases.
 *
 * Either way the result signs through tweetnacl, the same Ed25519 the sdk verifies with.
 */
import { createPrivateKey } from 'node:crypto';
import nacl from 'tweetnacl';

export interface OperatorSigningKey {
  publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}

export function parseOperatorSigningKey(text: string, source: string): OperatorSigningKey {
  const trimmed = text.trim();
  let secretKey: Uint8Array;
  if (trimmed.startsWith('{')) {
    const record = JSON.parse(trimmed) as { secret_key?: unknown };
    if (typeof record.secret_key !== 'string') throw new Error(`${source} has no secret_key`);
    secretKey = new Uint8Array(Buffer.from(record.secret_key, 'base64'));
    if (secretKey.length !== nacl.sign.secretKeyLength) throw new Error(`${source}: secret_key is not a 64-byte Ed25519 secret key`);
  } else if (trimmed.startsWith('-----BEGIN')) {
    const key = createPrivateKey(trimmed);
    if (key.asymmetricKeyType !== 'ed25519') throw new Error(`${source} holds a ${key.asymmetricKeyType} key, not Ed25519`);
    const seed = Buffer.from(key.export({ format: 'jwk' }).d ?? '', 'base64url');
    secretKey = nacl.sign.keyPair.fromSeed(seed).secretKey;
  } else {
    throw new Error(`${source} is neither a PEM private key nor an operator-key.json`);
  }
  const pair = nacl.sign.keyPair.fromSecretKey(secretKey);
  // A tweetnacl secret key carries its public half; make sure the two belong together.
  if (!Buffer.from(nacl.sign.keyPair.fromSeed(secretKey.subarray(0, 32)).publicKey).equals(pair.publicKey)) {
    throw new Error(`${source}: the public half of secret_key does not match its seed`);
  }
  return { publicKey: pair.publicKey, sign: (message) => nacl.sign.detached(message, pair.secretKey) };
}
