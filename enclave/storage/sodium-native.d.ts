/** The part of sodium-native (libsodium's binding; it ships no types) that the enclave uses: NaCl secretbox and Ed25519 signatures. */
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
    /** A fresh Ed25519 key pair from the system's randomness, written into the two buffers. */
    crypto_sign_keypair(publicKey: Uint8Array, secretKey: Uint8Array): void;
    /** Writes the 64-byte signature of `message` into `signature`. */
    crypto_sign_detached(signature: Uint8Array, message: Uint8Array, secretKey: Uint8Array): void;
    /** A buffer in guarded memory: locked (never swapped), between guard pages, wiped when freed. */
    sodium_malloc(size: number): Buffer;
  };
  export default sodium;
}
