import { createPrivateKey, sign as signEd25519 } from 'node:crypto';
import nacl from 'tweetnacl';
import { openRequest, type OpenedRequest, type RequestEnvelope } from '../sdk/protocol/sealed.js';

/**
 * The enclave's identity: an Ed25519 key pair generated at start-up, inside the
 * enclave. The secret key never leaves this process: it is not logged, persisted or
 * sent over the channel; only the public key is published (and bound into attestation).
 */
export interface EnclaveIdentity {
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}

/** DER prefix of a PKCS#8 Ed25519 private key; the 32-byte seed follows. */
const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

export function generateIdentity(): EnclaveIdentity {
  const { publicKey, secretKey } = nacl.sign.keyPair();
  // Every reply is signed: sign with OpenSSL, about 50 times faster than tweetnacl's
  // JavaScript. Same key, and Ed25519 is deterministic, so the same signatures.
  const der = Buffer.concat([PKCS8_ED25519_PREFIX, secretKey.subarray(0, 32)]);
  const key = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
  der.fill(0);
  secretKey.fill(0);
  return {
    publicKey,
    sign: (message) => signEd25519(null, message, key),
  };
}

/**
 * The enclave's X25519 key pair for sealed requests (nacl.box), generated at start-up
 * like the identity and bound into attestation (user_data). The secret key stays in this
 * closure: callers can only open requests with it (and seal each reply with the key
 * shared with that request's sender, sdk/protocol/sealed.ts sealReply).
 */
export interface SealedRequestKey {
  readonly publicKey: Uint8Array;
  open(envelope: RequestEnvelope): OpenedRequest | undefined;
}

export function generateSealedRequestKey(): SealedRequestKey {
  const { publicKey, secretKey } = nacl.box.keyPair();
  return {
    publicKey,
    open: (envelope) => openRequest(envelope, secretKey),
  };
}
