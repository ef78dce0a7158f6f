/** The part of sodium-native (libsodium's binding; it ships no types) that the enclave uses: NaCl secretbox. */
declare module 'sodium-native' {
  const sodium: {
    crypto_secretbox_KEYBYTES: number;
    crypto_secretbox_NONCEBYTES: number;
    crypto_secretbox_MACBYTES: number;
    /** Writes the box (MACBYTES + message length) into `box`. */
    crypto_secretbox_easy(box: Uint8Array, message: Uint8Array, nonce: Uint8Array, key: Uint8Array): void;
    /** Writes the message into `message` (box length - MACBYTES); false when the box does not authenticate. */
    crypto_secretbox_open_easy(message: Uint8Array, box: Uint8Array, nonce: Uint8Array, key: Uint8Array): boolean;
  };
  export default sodium;
}
