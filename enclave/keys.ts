import sodium from 'sodium-native';
import { boxKeyPair } from '../protocol/box.js';
import { openRequest, type OpenedRequest, type RequestEnvelope } from '../protocol/sealed.js';

/**
 * The enclave's identity: an Ed25519 key pair generated at start-up, inside the
 * enclave. The secret key never leaves this process: it is not logged, persisted or
 * sent over the channel; only the public key is published (and bound into attestation).
 */
export interface EnclaveIdentity {
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}

export function generateIdentity(): EnclaveIdentity {
  // Every reply is signed, so libsodium: about twice as fast as node:crypto (docs/performance-log.md#ranking-in-the-worker-2026-11-25-evening).
  // Ed25519 is deterministic: the same key gives the same signatures by any of them.
  // The secret key lives in libsodium's guarded memory (locked, fenced by guard pages,
  // wiped when freed) and never in a JavaScript string or ordinary buffer.
  const publicKey = new Uint8Array(sodium.crypto_sign_PUBLICKEYBYTES);
  const secretKey = sodium.sodium_malloc(sodium.crypto_sign_SECRETKEYBYTES);
  sodium.crypto_sign_keypair(publicKey, secretKey);
  return {
    publicKey,
    sign: (message) => {
      const signature = Buffer.allocUnsafe(sodium.crypto_sign_BYTES);
      sodium.crypto_sign_detached(signature, message, secretKey);
      return signature;
    },
  };
}

/**
 * The enclave's X25519 key pair for sealed requests (nacl.box), generated at start-up
 * like the identity and bound into attestation (user_data). The secret key stays in this
 * closure: callers can only open requests with it (and seal each reply with the key
 * shared with that request's sender, protocol/sealed.ts sealReply).
 */
export interface SealedRequestKey {
  readonly publicKey: Uint8Array;
  open(envelope: RequestEnvelope): OpenedRequest | undefined;
}

export function generateSealedRequestKey(): SealedRequestKey {
  // libsodium, like the signing key: its secret in guarded memory (protocol/box.ts says why not tweetnacl).
  const { publicKey, secretKey } = boxKeyPair(true);
  return {
    publicKey,
    open: (envelope) => openRequest(envelope, secretKey),
  };
}
