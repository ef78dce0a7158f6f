/**
 * The API keys file as the host store keeps it for an enclave with an operator key
 * (deploy/README.md, "API keys"): the keys map of keys-file.ts, a version, and the
 * operator's Ed25519 signature over both. The host keeps the file but cannot write one:
 * only the holder of the private half of OPERATOR_PUBKEY, which every attestation document
 * binds, can. Shared by the enclave (which verifies) and `agent-keys sign` (which signs).
 *
 *   { "type": "agent-service/api-keys/v1", "version": <integer>, "keys": { "sha256:<hex>": ["<tenant>", …] or {"tenants": […], "user_id": …} },
 *     "signature": "<base64 Ed25519 over 'agent-service/api-keys/v1\0' + canonical JSON of type, version, keys>" }
 */
import nacl from 'tweetnacl';
import { KeysFileError, parseKeysFile, type KeyEntry, type KeyGrant } from './keys-file.js';

export const SIGNED_KEYS_TYPE = 'agent-service/api-keys/v1';

export interface SignedKeysPayload {
  type: typeof SIGNED_KEYS_TYPE;
  /** Only goes up: the enclave refuses a file older than the one it holds. */
  version: number;
  /** As the keys file (keys-file.ts): tenants, or tenants with the scopes a key is limited to. */
  keys: Record<string, KeyGrant>;
}

export interface VerifiedKeys {
  version: number;
  entries: KeyEntry[];
}

export class SignedKeysError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SignedKeysError';
  }
}

/** JSON with every object's keys sorted: one byte string per payload, however the file is laid out. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record).sort().map((k) => `${JSON.stringify(k)}:${canonical(record[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export function signingBytes(payload: SignedKeysPayload): Uint8Array {
  return Buffer.from(`${SIGNED_KEYS_TYPE}\0${canonical({ type: payload.type, version: payload.version, keys: payload.keys })}`, 'utf8');
}

/** The file's text, signed with `sign` (the operator's Ed25519 secret key, outside the enclave). */
export function formatSignedKeys(payload: SignedKeysPayload, sign: (message: Uint8Array) => Uint8Array): string {
  const signature = Buffer.from(sign(signingBytes(payload))).toString('base64');
  return `${JSON.stringify({ ...payload, signature }, null, 2)}\n`;
}

/**
 * Checks the signature against the operator key before reading anything else of the file,
 * so nothing the host wrote is interpreted unless the operator signed it.
 */
export function verifySignedKeys(text: string, operatorKey: Uint8Array): VerifiedKeys {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new SignedKeysError('not JSON');
  }
  const file = raw as Partial<SignedKeysPayload> & { signature?: unknown };
  if (typeof raw !== 'object' || raw === null || file.type !== SIGNED_KEYS_TYPE) throw new SignedKeysError(`not a signed keys file (type is not "${SIGNED_KEYS_TYPE}")`);
  if (typeof file.signature !== 'string') throw new SignedKeysError('no signature');
  if (!Number.isSafeInteger(file.version) || (file.version as number) < 1) throw new SignedKeysError('version must be a positive integer');
  if (typeof file.keys !== 'object' || file.keys === null || Array.isArray(file.keys)) throw new SignedKeysError('keys must be an object');
  const signature = Buffer.from(file.signature, 'base64');
  const payload: SignedKeysPayload = { type: SIGNED_KEYS_TYPE, version: file.version as number, keys: file.keys };
  if (signature.length !== nacl.sign.signatureLength || !nacl.sign.detached.verify(signingBytes(payload), signature, operatorKey)) {
    throw new SignedKeysError('the signature does not verify with OPERATOR_PUBKEY');
  }
  let entries: KeyEntry[];
  try {
    entries = parseKeysFile(JSON.stringify(payload.keys));
  } catch (err) {
    throw new SignedKeysError(err instanceof KeysFileError ? err.message : String(err));
  }
  // The host keeps this file: a key in it, rather than its hash, would be the host's to use.
  if (entries.some((e) => e.plaintext)) throw new SignedKeysError('holds a key in plaintext; a signed file holds only sha256: hashes (agent-keys writes them)');
  return { version: payload.version, entries };
}
