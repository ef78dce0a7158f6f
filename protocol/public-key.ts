/**
 * How the enclave's Ed25519 key sits in an attestation document's `public_key`.
 *
 * AWS documents `public_key` as a DER-encoded key (attestation_process.md §3.2.2), and
 * strict verifiers expect one; so both providers put a SubjectPublicKeyInfo there (RFC 8410:
 * SEQUENCE { SEQUENCE { OID 1.3.101.112 }, BIT STRING <32-byte key> }). For Ed25519 that
 * DER is always the same 12-byte prefix followed by the key, so it is built and read by
 * hand rather than through an ASN.1 parser.
 */
import { bytesEqual } from './bytes.js';

export const ED25519_SPKI_PREFIX = Uint8Array.from([0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00]);
export const ED25519_KEY_LENGTH = 32;

/** The DER SubjectPublicKeyInfo of a raw 32-byte Ed25519 public key. */
export function ed25519SpkiDer(rawKey: Uint8Array): Uint8Array {
  if (rawKey.length !== ED25519_KEY_LENGTH) throw new Error(`an Ed25519 public key is ${ED25519_KEY_LENGTH} bytes, got ${rawKey.length}`);
  const der = new Uint8Array(ED25519_SPKI_PREFIX.length + ED25519_KEY_LENGTH);
  der.set(ED25519_SPKI_PREFIX);
  der.set(rawKey, ED25519_SPKI_PREFIX.length);
  return der;
}

/** The raw key inside an Ed25519 SubjectPublicKeyInfo, or undefined when `bytes` is not exactly one. */
export function ed25519KeyFromSpki(bytes: Uint8Array): Uint8Array | undefined {
  if (bytes.length !== ED25519_SPKI_PREFIX.length + ED25519_KEY_LENGTH) return undefined;
  if (!ED25519_SPKI_PREFIX.every((byte, i) => bytes[i] === byte)) return undefined;
  return bytes.slice(ED25519_SPKI_PREFIX.length);
}

/**
 * Whether a document's `public_key` names `expected`: the same bytes (a raw key, as enclaves
 * before the DER change wrote it, or whatever opaque bytes a caller pins, e.g. AWS's sample
 * document's "dummy"), or an Ed25519 SubjectPublicKeyInfo holding exactly `expected`. Both
 * encodings are unambiguous, so accepting either lets no other key through.
 */
export function publicKeyMatches(expected: Uint8Array, documentKey: Uint8Array): boolean {
  if (bytesEqual(expected, documentKey)) return true;
  const inner = ed25519KeyFromSpki(documentKey);
  return inner !== undefined && bytesEqual(expected, inner);
}
