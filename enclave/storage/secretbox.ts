import sodium from 'sodium-native';

/**
 * NaCl's secretbox (XSalsa20-Poly1305) for the sealed files, by libsodium. The bytes are
 * exactly tweetnacl's (test/unit/storage-sealed-file.test.ts checks both ways), so files
 * sealed either way open either way; libsodium opens every frame of a recovery about five
 * times faster (docs/performance-log.md#ranking-in-the-worker-2026-11-25-evening).
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
