import sodium from 'sodium-native';

/**
 * NaCl's secretbox (XSalsa20-Poly1305) for the sealed files, by libsodium. The bytes are
 * exactly tweetnacl's (test/unit/storage-sealed-file.test.ts checks both ways), so files
 * sealed either way open either way; libsodium does it natively, which is what a restart
 * spends much of its time on: opening every frame of the snapshot and the log. With
 * tweetnacl, opening was 30% of the recovery of 1M memories (a --cpu-prof of the enclave);
 * one 700-byte frame, a memory, opens in about 2.4 µs against 13.
 */
export const SECRETBOX = {
  keyLength: sodium.crypto_secretbox_KEYBYTES,
  nonceLength: sodium.crypto_secretbox_NONCEBYTES,
  overheadLength: sodium.crypto_secretbox_MACBYTES,
} as const;

export function secretbox(message: Uint8Array, nonce: Uint8Array, key: Uint8Array): Buffer {
  const box = Buffer.allocUnsafe(message.length + SECRETBOX.overheadLength);
  sodium.crypto_secretbox_easy(box, message, nonce, key);
  return box;
}

/** The message, or undefined when the box does not authenticate under the key and nonce. */
export function secretboxOpen(box: Uint8Array, nonce: Uint8Array, key: Uint8Array): Buffer | undefined {
  if (box.length < SECRETBOX.overheadLength) return undefined;
  const message = Buffer.allocUnsafe(box.length - SECRETBOX.overheadLength);
  return sodium.crypto_secretbox_open_easy(message, box, nonce, key) ? message : undefined;
}
