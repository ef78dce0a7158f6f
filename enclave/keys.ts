import sodium from 'sodium-native';
import { boxAfter, boxBefore, boxKeyPair, boxOpenAfter, NONCE_BYTES, PUBLIC_KEY_BYTES, uniqueNonce, SharedKeyCache, type BoxKeyPair } from '../protocol/box.js';
import { openRequest, type OpenedRequest } from '../protocol/sealed.js';

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
  const secretKey = sodium.sodium_malloc(sodium.crypto_sign_SECRETKEYBYTES);
  const publicKey = new Uint8Array(sodium.crypto_sign_PUBLICKEYBYTES);
  sodium.crypto_sign_keypair(publicKey, secretKey);
  return identityFrom(secretKey, publicKey);
}

function identityFrom(secretKey: Buffer, publicKey: Uint8Array): EnclaveIdentity {
  // Every reply is signed, so libsodium: about twice as fast as node:crypto (docs/performance-log.md#ranking-in-the-worker-2026-11-25-evening).
  // Ed25519 is deterministic: the same key gives the same signatures by any of them.
  // The secret key lives in libsodium's guarded memory (locked, fenced by guard pages,
  // wiped when freed) and never in a JavaScript string or ordinary buffer.
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
  open(envelope: Uint8Array): OpenedRequest | undefined;
}

export function generateSealedRequestKey(): SealedRequestKey {
  // libsodium, like the signing key: its secret in guarded memory (protocol/box.ts says why not tweetnacl).
  return requestKeyFrom(boxKeyPair(true));
}

function requestKeyFrom({ publicKey, secretKey }: BoxKeyPair): SealedRequestKey {
  // Clients keep a key pair for minutes (protocol/sealed.ts ClientSealingKey): the X25519
  // multiplication is made once per client and window.
  const shared = new SharedKeyCache(secretKey);
  return {
    publicKey,
    open: (envelope) => openRequest(envelope, shared),
  };
}

/**
 * The service's two keys, the signing identity and the sealed-request key, with the one way
 * their secret halves ever leave this module: sealed to another enclave's X25519 key, which
 * enclave/cluster/key-sharing.ts hands over only after that enclave's attestation verified.
 */
export interface ServiceKeys {
  identity: EnclaveIdentity;
  requestKey: SealedRequestKey;
  /** The secret keys in a NaCl box to `recipient`: a one-time public key (32) ‖ nonce (24) ‖ box. */
  sealFor(recipient: Uint8Array): Uint8Array;
}

const SIGN_SECRET_BYTES = sodium.crypto_sign_SECRETKEYBYTES;
const BOX_SECRET_BYTES = sodium.crypto_box_SECRETKEYBYTES;

export function generateServiceKeys(): ServiceKeys {
  const signPublic = new Uint8Array(sodium.crypto_sign_PUBLICKEYBYTES);
  const signSecret = sodium.sodium_malloc(SIGN_SECRET_BYTES);
  sodium.crypto_sign_keypair(signPublic, signSecret);
  return serviceKeys(signSecret, signPublic, boxKeyPair(true));
}

function serviceKeys(signSecret: Buffer, signPublic: Uint8Array, box: BoxKeyPair): ServiceKeys {
  return {
    identity: identityFrom(signSecret, signPublic),
    requestKey: requestKeyFrom(box),
    sealFor(recipient) {
      const once = boxKeyPair();
      const shared = boxBefore(recipient, once.secretKey);
      const nonce = uniqueNonce();
      const plain = sodium.sodium_malloc(SIGN_SECRET_BYTES + BOX_SECRET_BYTES);
      plain.set(signSecret, 0);
      plain.set(box.secretKey, SIGN_SECRET_BYTES);
      const sealed = Buffer.concat([once.publicKey, nonce, boxAfter(plain, nonce, shared)]);
      sodium.sodium_memzero(plain);
      once.secretKey.fill(0);
      shared.fill(0);
      return sealed;
    },
  };
}

/** A sealed pair of keys that cannot be taken: not for this recipient, altered, or not a signing and box key. */
export class SealedKeysError extends Error {
  override name = 'SealedKeysError';
}

/**
 * Opens keys another enclave sealed to `recipient` (sealFor), and checks they are the
 * secret halves of the public keys that enclave attested (`expected`): keys that open
 * but belong to other public keys are refused.
 */
export function openServiceKeys(sealed: Uint8Array, recipient: BoxKeyPair, expected: { signingPublicKey: Uint8Array; boxPublicKey: Uint8Array }): ServiceKeys {
  if (sealed.length !== PUBLIC_KEY_BYTES + NONCE_BYTES + sodium.crypto_box_MACBYTES + SIGN_SECRET_BYTES + BOX_SECRET_BYTES) {
    throw new SealedKeysError(`the sealed keys are ${sealed.length} bytes, not a signing and a box key`);
  }
  const shared = boxBefore(sealed.subarray(0, PUBLIC_KEY_BYTES), recipient.secretKey);
  const plain = boxOpenAfter(sealed.subarray(PUBLIC_KEY_BYTES + NONCE_BYTES), sealed.subarray(PUBLIC_KEY_BYTES, PUBLIC_KEY_BYTES + NONCE_BYTES), shared);
  shared.fill(0);
  if (!plain) throw new SealedKeysError('the sealed keys do not open with this enclave\'s key: altered, or sealed to another');
  const signSecret = sodium.sodium_malloc(SIGN_SECRET_BYTES);
  signSecret.set(plain.subarray(0, SIGN_SECRET_BYTES));
  const boxSecret = sodium.sodium_malloc(BOX_SECRET_BYTES);
  boxSecret.set(plain.subarray(SIGN_SECRET_BYTES));
  plain.fill(0);
  const signPublic = new Uint8Array(sodium.crypto_sign_PUBLICKEYBYTES);
  sodium.crypto_sign_ed25519_sk_to_pk(signPublic, signSecret);
  const boxPublic = new Uint8Array(PUBLIC_KEY_BYTES);
  sodium.crypto_scalarmult_base(boxPublic, boxSecret);
  if (!Buffer.from(signPublic).equals(Buffer.from(expected.signingPublicKey)) || !Buffer.from(boxPublic).equals(Buffer.from(expected.boxPublicKey))) {
    throw new SealedKeysError('the sealed keys are not the keys the member attested');
  }
  return serviceKeys(signSecret, signPublic, { publicKey: boxPublic, secretKey: boxSecret });
}
