/**
 * NaCl box (X25519, HSalsa20, XSalsa20-Poly1305) for sealed requests on both ends
 * (sealed.ts), with libsodium doing the costly parts. The wire format is tweetnacl's
 * nacl.box: `before` is nacl.box.before (libsodium's X25519, then HSalsa20, which
 * sodium-native does not expose, from tweetnacl: microseconds), a box is MAC ‖ ciphertext
 * under that key (nacl.box.after = secretbox), and either library opens what the other
 * sealed (test/unit/sealed-requests.test.ts checks it).
 *
 * Why not tweetnacl: its JavaScript X25519 was most of what sealing added to a query
 * (docs/performance-log.md#what-sealing-costs-a-query-2026-11-27-issue-34). The sdk's
 * sealing already needs Node (node:crypto, Buffer, and sodium-native for sealed streams);
 * the console's browser bundle does not include it.
 */
import sodium from 'sodium-native';
import nacl from 'tweetnacl';

/** tweetnacl's low-level HSalsa20 (untyped in its .d.ts). */
const hsalsa20 = (nacl as unknown as { lowlevel: { crypto_core_hsalsa20(out: Uint8Array, input: Uint8Array, key: Uint8Array, constant: Uint8Array): void } })
  .lowlevel.crypto_core_hsalsa20;
const SIGMA = new Uint8Array(Buffer.from('expand 32-byte k', 'latin1'));
const ZERO16 = new Uint8Array(16);

export const PUBLIC_KEY_BYTES = sodium.crypto_box_PUBLICKEYBYTES;
export const NONCE_BYTES = sodium.crypto_box_NONCEBYTES;
export const MAC_BYTES = sodium.crypto_secretbox_MACBYTES;

export interface BoxKeyPair {
  publicKey: Uint8Array;
  secretKey: Uint8Array;
}

/** A fresh key pair; with `guarded`, the secret key is in libsodium's guarded memory (a long-lived key). */
export function boxKeyPair(guarded = false): BoxKeyPair {
  const publicKey = new Uint8Array(sodium.crypto_box_PUBLICKEYBYTES);
  const secretKey = guarded ? sodium.sodium_malloc(sodium.crypto_box_SECRETKEYBYTES) : new Uint8Array(sodium.crypto_box_SECRETKEYBYTES);
  sodium.crypto_box_keypair(publicKey, secretKey);
  return { publicKey, secretKey };
}

/** The key `theirPublic` and `mySecret` share: nacl.box.before. Throws on a small-order public key. */
export function boxBefore(theirPublic: Uint8Array, mySecret: Uint8Array): Uint8Array {
  const point = new Uint8Array(sodium.crypto_scalarmult_BYTES);
  sodium.crypto_scalarmult(point, mySecret, theirPublic);
  const shared = new Uint8Array(32);
  hsalsa20(shared, ZERO16, point, SIGMA);
  point.fill(0);
  return shared;
}

/** The random part of every nonce this process makes (drawn at its first nonce), and how many it made. */
let noncePrefix: Uint8Array | undefined;
let noncesMade = 0;

/**
 * A nonce never used before: 16 bytes drawn at random once a process, then a 64-bit count.
 * XSalsa20-Poly1305 asks only that a nonce never repeat under one key: the count never repeats
 * in a process, and two processes that share a key (enclaves holding the service's box key, a
 * client started again) differ in the random part but with a chance of 2^-128. A fresh random
 * nonce a call was a `getrandom` system call in every sealed call's client and enclave, 20–30 µs
 * each on a busy machine (docs/performance-log.md#sealings-added-p50-measured-in-pairs-2026-11-28-1900-issue-34).
 */
export function uniqueNonce(): Uint8Array {
  if (!noncePrefix) {
    noncePrefix = new Uint8Array(NONCE_BYTES - 8);
    sodium.randombytes_buf(noncePrefix);
  }
  const nonce = new Uint8Array(NONCE_BYTES);
  nonce.set(noncePrefix);
  // Under 2^53 nonces a process: the count fits a double, written as two 32-bit halves.
  const count = new DataView(nonce.buffer, NONCE_BYTES - 8);
  count.setUint32(0, Math.floor(noncesMade / 2 ** 32));
  count.setUint32(4, noncesMade % 2 ** 32);
  noncesMade++;
  return nonce;
}

/** nacl.box.after (= secretbox under the shared key): MAC ‖ ciphertext. */
export function boxAfter(message: Uint8Array, nonce: Uint8Array, shared: Uint8Array): Uint8Array {
  const box = new Uint8Array(message.length + MAC_BYTES);
  sodium.crypto_secretbox_easy(box, message, nonce, shared);
  return box;
}

/**
 * boxAfter in place, for an envelope made in one buffer: the message at
 * `buffer.subarray(at + MAC_BYTES)` becomes the box (MAC ‖ ciphertext) at `buffer.subarray(at)`
 * (libsodium moves overlapping input first), so no second copy of the message is made.
 */
export function boxInPlace(buffer: Uint8Array, at: number, nonce: Uint8Array, shared: Uint8Array): void {
  sodium.crypto_secretbox_easy(buffer.subarray(at), buffer.subarray(at + MAC_BYTES), nonce, shared);
}

/** nacl.box.open.after: the message, or undefined when the box does not authenticate. */
export function boxOpenAfter(box: Uint8Array, nonce: Uint8Array, shared: Uint8Array): Uint8Array | undefined {
  if (box.length < MAC_BYTES) return undefined;
  const message = new Uint8Array(box.length - MAC_BYTES);
  return sodium.crypto_secretbox_open_easy(message, box, nonce, shared) ? message : undefined;
}

/**
 * The keys `mySecret` shares with recent peers, by the peer's public key: a client keeps its
 * key pair for a while (sealed.ts ClientSealingKey), so the enclave's X25519 multiplication,
 * most of what opening a sealed request costs, is made once per client and window instead of
 * once per request. Bounded; the least recently used peer goes first. Keys handed out are
 * never overwritten here (an evicted one may still seal an answer in flight).
 */
export class SharedKeyCache {
  private readonly keys = new Map<string, Uint8Array>();

  constructor(private readonly mySecret: Uint8Array, private readonly capacity = 1024) {}

  /** boxBefore(theirPublic, mySecret), from the cache when this peer was seen recently. */
  get(theirPublic: Uint8Array): Uint8Array {
    const id = Buffer.from(theirPublic.buffer, theirPublic.byteOffset, theirPublic.byteLength).toString('base64');
    let shared = this.keys.get(id);
    if (shared) {
      this.keys.delete(id);
    } else {
      shared = boxBefore(theirPublic, this.mySecret);
      if (this.keys.size >= this.capacity) this.keys.delete(this.keys.keys().next().value as string);
    }
    this.keys.set(id, shared);
    return shared;
  }

  get size(): number {
    return this.keys.size;
  }
}
