/**
 * Release manifests: the PCRs of a build, signed by the operator's Ed25519 key, so that a
 * client can learn which measurements to pin from a file anyone may host (a web page, the
 * release's assets) instead of trusting whoever hands it values.
 *
 *   { "manifest": { "type": "agent-service/release-manifest/v1", "version", "tee_name",
 *                   "pcrs": { "0": <96 hex>, "1": …, "2": …, ["8": …] },
 *                   "operator_pubkey": <base64>, "created_at": <ISO 8601>, "image"?: {…}, "source"?: {…} },
 *     "signature": <base64 Ed25519 over MANIFEST_SIGNING_TAG ‖ canonicalJson(manifest)> }
 *
 * The signature is checked against an operator key the client pins itself: the key the
 * manifest names, or the one a service advertises, would prove nothing, since whoever
 * builds an image of their own can sign a manifest for it with a key of their own. The
 * same key is bound into every attestation document (user_data), so a client checks both.
 *
 * This module only reads manifests; they are made by scripts/release-manifest.ts, on the
 * operator's machine, which is where the private key is.
 */
import nacl from 'tweetnacl';
import { bytesEqual, fromBase64, fromHex, toBase64, utf8 } from '../../protocol/bytes.js';

export const MANIFEST_TYPE = 'agent-service/release-manifest/v1';
/** Domain separation: an operator signature over a manifest can never pass for one over anything else. */
export const MANIFEST_SIGNING_TAG = 'agent-service/release-manifest/v1\0';
/** Nitro's hypervisor fills PCR0 (image), 1 (kernel, boot ramfs) and 2 (application); all three are needed to pin a build. */
export const REQUIRED_PCRS = [0, 1, 2] as const;
const MAX_MANIFEST_BYTES = 64 * 1024;

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export interface ReleaseManifest {
  type: typeof MANIFEST_TYPE;
  /** The release's name, e.g. a git tag. */
  version: string;
  /** `aws-nitro-enclaves`, or `simulated` for a local build's measurements. */
  tee_name: string;
  /** PCR index → lowercase hex SHA-384 (96 digits). */
  pcrs: Record<string, string>;
  operator_pubkey: string;
  created_at: string;
  /** What was built: image digests, the .eif's hash, nitro-cli's version… (informational, but signed). */
  image?: Record<string, JsonValue>;
  /** Where it was built from: commit, lockfiles' hashes… (informational, but signed). */
  source?: Record<string, JsonValue>;
}

export interface SignedManifest {
  manifest: ReleaseManifest;
  signature: string;
}

export interface VerifiedManifest {
  manifest: ReleaseManifest;
  /** The PCRs to pin, by index. */
  pcrs: Record<number, Uint8Array>;
}

export class ManifestError extends Error {
  override name = 'ManifestError';
}

/**
 * Keys sorted by UTF-16 code unit, no whitespace, recursively: the bytes the signature
 * covers do not depend on how the file was pretty-printed or which tool rewrote it.
 */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') {
    // Floats have more than one spelling; manifests need none.
    if (!Number.isSafeInteger(value)) throw new ManifestError(`manifest numbers must be safe integers, got ${value}`);
    return String(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(',')}}`;
}

/** The exact bytes the operator signs. */
export function manifestSigningBytes(manifest: ReleaseManifest): Uint8Array {
  return utf8(MANIFEST_SIGNING_TAG + canonicalJson(manifest as unknown as JsonValue));
}

/**
 * Checks a signed manifest (its JSON text, or already parsed) against the operator key the
 * caller pins, and returns the PCRs it vouches for. Throws ManifestError saying why not.
 */
export function verifyManifest(input: string | unknown, operatorKey: Uint8Array): VerifiedManifest {
  if (operatorKey.length !== nacl.sign.publicKeyLength) throw new ManifestError('the pinned operator key must be a 32-byte Ed25519 key');
  const signed = parseSigned(input);
  const manifest = checkShape(signed.manifest);
  const signature = base64(signed.signature, 'signature');
  if (signature.length !== nacl.sign.signatureLength) throw new ManifestError('signature must be 64 bytes');
  const named = base64(manifest.operator_pubkey, 'operator_pubkey');
  if (!bytesEqual(named, operatorKey)) {
    throw new ManifestError(`the manifest names operator key ${manifest.operator_pubkey}, not the pinned ${toBase64(operatorKey)}`);
  }
  if (!nacl.sign.detached.verify(manifestSigningBytes(manifest), signature, operatorKey)) {
    throw new ManifestError(`the signature does not verify with the operator key ${toBase64(operatorKey)}`);
  }
  const pcrs: Record<number, Uint8Array> = {};
  // checkShape made each value 96 hex digits.
  for (const [index, value] of Object.entries(manifest.pcrs)) pcrs[Number(index)] = fromHex(value) as Uint8Array;
  return { manifest, pcrs };
}

function parseSigned(input: unknown): { manifest: unknown; signature: unknown } {
  let value = input;
  if (typeof input === 'string') {
    if (utf8(input).length > MAX_MANIFEST_BYTES) throw new ManifestError(`a manifest is at most ${MAX_MANIFEST_BYTES} bytes`);
    try {
      value = JSON.parse(input);
    } catch {
      throw new ManifestError('the manifest is not JSON');
    }
  }
  if (!isObject(value)) throw new ManifestError('the manifest must be a JSON object {manifest, signature}');
  const extra = Object.keys(value).filter((key) => key !== 'manifest' && key !== 'signature');
  if (extra.length > 0) throw new ManifestError(`unexpected field(s) beside manifest and signature: ${extra.join(', ')}`);
  return { manifest: value.manifest, signature: value.signature };
}

/** Every field the checks rely on, strictly; anything else inside `manifest` is covered by the signature. */
function checkShape(value: unknown): ReleaseManifest {
  if (!isObject(value)) throw new ManifestError('manifest must be an object');
  if (value.type !== MANIFEST_TYPE) throw new ManifestError(`manifest.type must be "${MANIFEST_TYPE}"`);
  for (const field of ['version', 'tee_name', 'operator_pubkey', 'created_at']) {
    if (typeof value[field] !== 'string' || value[field] === '') throw new ManifestError(`manifest.${field} must be a non-empty string`);
  }
  if (Number.isNaN(Date.parse(value.created_at as string))) throw new ManifestError('manifest.created_at must be an ISO 8601 time');
  for (const field of ['image', 'source']) {
    if (value[field] !== undefined && !isObject(value[field])) throw new ManifestError(`manifest.${field} must be an object`);
  }
  const pcrs = value.pcrs;
  if (!isObject(pcrs)) throw new ManifestError('manifest.pcrs must be an object');
  for (const [index, hex] of Object.entries(pcrs)) {
    if (!/^(\d|[12]\d|3[01])$/.test(index)) throw new ManifestError(`manifest.pcrs key "${index}" is not a PCR index 0..31`);
    if (typeof hex !== 'string' || !/^[0-9a-f]{96}$/.test(hex)) throw new ManifestError(`manifest PCR${index} must be 96 lowercase hex digits (SHA-384)`);
  }
  const missing = REQUIRED_PCRS.filter((index) => !(String(index) in pcrs));
  if (missing.length > 0) throw new ManifestError(`the manifest must pin PCR0, PCR1 and PCR2; it lacks ${missing.map((i) => `PCR${i}`).join(', ')}`);
  return value as unknown as ReleaseManifest;
}

function base64(value: unknown, field: string): Uint8Array {
  const bytes = typeof value === 'string' && value.length > 0 ? fromBase64(value) : undefined;
  if (!bytes) throw new ManifestError(`${field} must be base64`);
  return bytes;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
