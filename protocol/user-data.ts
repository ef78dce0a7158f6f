/**
 * The attestation document's `user_data`: the keys the enclave binds besides its
 * Ed25519 `public_key`. UTF-8 JSON, keys in this order, no whitespace:
 *
 *   {"v":1,"operator_pubkey":"<base64, 32 bytes>","tee_box_public_key":"<base64, 32 bytes>"}
 *
 * operator_pubkey is the operator's Ed25519 key; tee_box_public_key the enclave's X25519
 * key (nacl.box) that sealed requests are encrypted to. The enclave encodes it here and
 * clients parse it here.
 */
import { fromBase64, toBase64, utf8 } from './bytes.js';

export interface BoundKeys {
  operatorKey: Uint8Array;
  boxPublicKey: Uint8Array;
}

/** Nitro caps user_data at 512 bytes; ours is about 130. */
const MAX_USER_DATA_BYTES = 512;

export function encodeUserData(keys: BoundKeys): Uint8Array {
  const json = JSON.stringify({
    v: 1,
    operator_pubkey: toBase64(keys.operatorKey),
    tee_box_public_key: toBase64(keys.boxPublicKey),
  });
  return utf8(json);
}

/** Throws an Error saying what is wrong when the bytes are not our user_data. */
export function parseUserData(bytes: Uint8Array | null): BoundKeys {
  if (!bytes || bytes.length === 0) throw new Error('the document has no user_data');
  if (bytes.length > MAX_USER_DATA_BYTES) throw new Error(`user_data is ${bytes.length} bytes, more than ${MAX_USER_DATA_BYTES}`);
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    throw new Error('user_data is not UTF-8 JSON');
  }
  const record = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
  if (record.v !== 1) throw new Error('user_data is not version 1 ({"v":1,…})');
  return {
    operatorKey: key32(record.operator_pubkey, 'operator_pubkey'),
    boxPublicKey: key32(record.tee_box_public_key, 'tee_box_public_key'),
  };
}

function key32(value: unknown, name: string): Uint8Array {
  if (typeof value !== 'string') throw new Error(`user_data has no ${name}`);
  const bytes = fromBase64(value);
  if (bytes?.length !== 32) throw new Error(`user_data ${name} is not 32 bytes of base64`);
  return bytes;
}
