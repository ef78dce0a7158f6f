/**
 * The part of sodium-native (libsodium's binding; it ships no types) that this package uses:
 * NaCl secretbox and Ed25519 signatures (the enclave, and its keys sealed to another enclave: enclave/keys.ts), NaCl box (sealed requests, both ends: box.ts), and secretstream (sealed streams, both
 * ends: protocol/sealed-stream.ts). Here, beside the protocol, since the sdk uses it too.
 */
declare module 'sodium-native' {
  const sodium: {
    crypto_secretbox_KEYBYTES: number;
    crypto_secretbox_NONCEBYTES: number;
    crypto_secretbox_MACBYTES: number;
    /** Writes the box (MACBYTES + message length) into `box`. */
    crypto_secretbox_easy(box: Uint8Array, message: Uint8Array, nonce: Uint8Array, key: Uint8Array): void;
    /** Writes the message into `message` (box length - MACBYTES); false when the box does not authenticate. */
    crypto_secretbox_open_easy(message: Uint8Array, box: Uint8Array, nonce: Uint8Array, key: Uint8Array): boolean;
    crypto_sign_PUBLICKEYBYTES: number;
    crypto_sign_SECRETKEYBYTES: number;
    crypto_sign_BYTES: number;
    /** The Ed25519 key pair of a 32-byte seed (test/helpers/key-scan.ts searches bytes with it). */
    crypto_sign_seed_keypair(publicKey: Uint8Array, secretKey: Uint8Array, seed: Uint8Array): void;
    /** A fresh Ed25519 key pair from the system's randomness, written into the two buffers. */
    crypto_sign_keypair(publicKey: Uint8Array, secretKey: Uint8Array): void;
    /** Writes the 64-byte signature of `message` into `signature`. */
    crypto_sign_detached(signature: Uint8Array, message: Uint8Array, secretKey: Uint8Array): void;
    /** True when `signature` is `publicKey`'s over `message` (throws on wrong lengths). */
    crypto_sign_verify_detached(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean;
    crypto_secretstream_xchacha20poly1305_STATEBYTES: number;
    crypto_secretstream_xchacha20poly1305_HEADERBYTES: number;
    crypto_secretstream_xchacha20poly1305_KEYBYTES: number;
    crypto_secretstream_xchacha20poly1305_ABYTES: number;
    crypto_secretstream_xchacha20poly1305_TAG_MESSAGE: number;
    crypto_secretstream_xchacha20poly1305_TAG_FINAL: number;
    /** Starts a stream under `key`: writes its state and the header the receiver needs. */
    crypto_secretstream_xchacha20poly1305_init_push(state: Uint8Array, header: Uint8Array, key: Uint8Array): void;
    /** Encrypts the next message into `ciphertext` (message length + ABYTES); returns the bytes written. */
    crypto_secretstream_xchacha20poly1305_push(state: Uint8Array, ciphertext: Uint8Array, message: Uint8Array, ad: Uint8Array | null, tag: number): number;
    crypto_secretstream_xchacha20poly1305_init_pull(state: Uint8Array, header: Uint8Array, key: Uint8Array): void;
    /** Decrypts the next message and its tag (1 byte); throws when it does not authenticate in this place of the stream. */
    crypto_secretstream_xchacha20poly1305_pull(state: Uint8Array, message: Uint8Array, tag: Uint8Array, ciphertext: Uint8Array, ad: Uint8Array | null): number;
    crypto_box_PUBLICKEYBYTES: number;
    crypto_box_SECRETKEYBYTES: number;
    crypto_box_NONCEBYTES: number;
    /** A fresh X25519 key pair (nacl.box.keyPair). */
    crypto_box_keypair(publicKey: Uint8Array, secretKey: Uint8Array): void;
    crypto_scalarmult_BYTES: number;
    /** X25519: writes secretKey · publicKey into `shared`; throws when the result is all zeros (a small-order key). */
    crypto_scalarmult(shared: Uint8Array, secretKey: Uint8Array, publicKey: Uint8Array): void;
    /** X25519: writes secretKey · base point (the public key of `secretKey`) into `publicKey`. */
    crypto_scalarmult_base(publicKey: Uint8Array, secretKey: Uint8Array): void;
    crypto_box_MACBYTES: number;
    /** The Ed25519 public key inside a 64-byte secret key. */
    crypto_sign_ed25519_sk_to_pk(publicKey: Uint8Array, secretKey: Uint8Array): void;
    randombytes_buf(buffer: Uint8Array): void;
    /** Overwrites the buffer with zeros (not optimised away). */
    sodium_memzero(buffer: Uint8Array): void;
    /** A buffer in guarded memory: locked (never swapped), between guard pages, wiped when freed. */
    sodium_malloc(size: number): Buffer;
  };
  export default sodium;
}
