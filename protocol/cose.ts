/**
 * AWS Nitro attestation documents: COSE_Sign1 (RFC 8152) around a CBOR payload.
 *
 *   COSE_Sign1 = [protected: bstr .cbor {1: -35}, unprotected: {}, payload: bstr, signature: bstr]
 *
 * optionally wrapped in CBOR tag 18. The payload is the map described in AWS's
 * attestation_process.md (module_id, digest, timestamp, pcrs, certificate, cabundle,
 * public_key, user_data, nonce).
 *
 * The CBOR codec here deliberately handles only what these documents use: unsigned and
 * negative integers, byte and text strings, definite-length arrays and maps, and
 * false/true/null. A general-purpose decoder (cbor-x) also accepts floats, indefinite
 * lengths, shared references, packed tables and tags that construct objects, and silently
 * keeps the last of duplicate map keys; a verifier reading documents from the network
 * should reject all of that rather than interpret it.
 */

import { concatBytes, utf8 as utf8Bytes } from './bytes.js';

/** Thrown for any document that is not well-formed CBOR / COSE_Sign1 / Nitro payload. */
export class AttestationFormatError extends Error {
  override name = 'AttestationFormatError';
}

export type CborMapKey = number | string;
export type CborValue = number | string | boolean | null | Uint8Array | CborValue[] | CborMap;
export type CborMap = Map<CborMapKey, CborValue>;

/** COSE algorithm identifier for ECDSA with SHA-384 on P-384. */
export const COSE_ALG_ES384 = -35;
const COSE_HEADER_ALG = 1;
/** CBOR tag marking a COSE_Sign1 structure; as a one-byte tag it encodes as 0xd2. */
const COSE_SIGN1_TAG_BYTE = 0xc0 | 18;
/** ES384 signatures are the raw r || s concatenation, 48 bytes each. */
const ES384_SIGNATURE_LENGTH = 96;
/** Our documents nest at most three levels (payload map → pcrs map → bstr). */
const MAX_DEPTH = 8;

// ---------------------------------------------------------------------------------------
// CBOR decoding

const utf8 = new TextDecoder('utf-8', { fatal: true });

class CborReader {
  private offset = 0;

  constructor(private readonly bytes: Uint8Array) {}

  /** Decodes exactly one data item spanning the whole input. */
  readOnly(what: string): CborValue {
    if (this.bytes.length === 0) throw new AttestationFormatError(`${what} is empty`);
    const value = this.read(0);
    if (this.offset !== this.bytes.length) {
      throw new AttestationFormatError(
        `${what} has ${this.bytes.length - this.offset} trailing byte(s) after the CBOR item`,
      );
    }
    return value;
  }

  private read(depth: number): CborValue {
    if (depth > MAX_DEPTH) throw this.error('nesting is deeper than any Nitro document');
    const at = this.offset;
    const initial = this.take(1)[0];
    const major = initial >> 5;
    const info = initial & 0x1f;
    if (major === 7) return this.simple(info, at);
    const argument = this.argument(info, at);
    switch (major) {
      case 0:
        return argument;
      case 1:
        return this.safeInteger(-1 - argument, at);
      case 2:
        return this.take(argument).slice();
      case 3:
        return this.text(argument, at);
      case 4: {
        this.ensureItems(argument, at);
        const items: CborValue[] = [];
        for (let i = 0; i < argument; i++) items.push(this.read(depth + 1));
        return items;
      }
      case 5:
        return this.map(argument, depth, at);
      default:
        throw this.error(`unexpected tag (major type 6)`, at);
    }
  }

  private map(entries: number, depth: number, at: number): CborMap {
    this.ensureItems(entries * 2, at);
    const map: CborMap = new Map();
    for (let i = 0; i < entries; i++) {
      const keyAt = this.offset;
      const key = this.read(depth + 1);
      if (typeof key !== 'number' && typeof key !== 'string') {
        throw this.error('map key is neither an integer nor a text string', keyAt);
      }
      if (map.has(key)) throw this.error(`duplicate map key ${JSON.stringify(key)}`, keyAt);
      map.set(key, this.read(depth + 1));
    }
    return map;
  }

  private simple(info: number, at: number): CborValue {
    if (info === 20) return false;
    if (info === 21) return true;
    if (info === 22) return null;
    if (info >= 25 && info <= 27) throw this.error('floating-point numbers are not allowed', at);
    if (info === 31) throw this.error('unexpected "break" byte', at);
    throw this.error(`unsupported simple value ${info}`, at);
  }

  /** The length or value following the initial byte (RFC 8949 §3). */
  private argument(info: number, at: number): number {
    if (info < 24) return info;
    if (info === 31) throw this.error('indefinite-length items are not allowed', at);
    if (info > 27) throw this.error(`reserved additional information ${info}`, at);
    const width = 1 << (info - 24);
    const raw = this.take(width);
    const data = new DataView(raw.buffer, raw.byteOffset, width);
    if (width === 1) return data.getUint8(0);
    if (width === 2) return data.getUint16(0);
    if (width === 4) return data.getUint32(0);
    const big = data.getBigUint64(0);
    if (big > BigInt(Number.MAX_SAFE_INTEGER)) throw this.error('integer larger than 2^53 - 1', at);
    return Number(big);
  }

  private text(length: number, at: number): string {
    try {
      return utf8.decode(this.take(length));
    } catch (error) {
      if (error instanceof AttestationFormatError) throw error;
      throw this.error('text string is not valid UTF-8', at);
    }
  }

  private safeInteger(value: number, at: number): number {
    if (!Number.isSafeInteger(value)) throw this.error('integer smaller than -(2^53 - 1)', at);
    return value;
  }

  /** Every item takes at least one byte, so a count beyond the remaining bytes is truncated. */
  private ensureItems(count: number, at: number): void {
    if (count > this.bytes.length - this.offset) {
      throw this.error(`truncated CBOR: ${count} items announced, ${this.bytes.length - this.offset} bytes left`, at);
    }
  }

  private take(length: number): Uint8Array {
    const remaining = this.bytes.length - this.offset;
    if (length > remaining) {
      throw this.error(`truncated CBOR: needs ${length} byte(s), only ${remaining} left`);
    }
    const chunk = this.bytes.subarray(this.offset, this.offset + length);
    this.offset += length;
    return chunk;
  }

  private error(message: string, at = this.offset): AttestationFormatError {
    return new AttestationFormatError(`${message} (at byte ${at})`);
  }
}

function decodeCbor(bytes: Uint8Array, what: string): CborValue {
  // View as a plain Uint8Array so that `slice()` copies (a Node caller's Buffer#slice would not).
  return new CborReader(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)).readOnly(what);
}

// ---------------------------------------------------------------------------------------
// CBOR encoding

function encodeCbor(value: CborValue): Uint8Array {
  const chunks: Uint8Array[] = [];
  write(value, chunks);
  return concatBytes(chunks);
}

function write(value: CborValue, out: Uint8Array[]): void {
  if (value === null) out.push(Uint8Array.of(0xf6));
  else if (value === false) out.push(Uint8Array.of(0xf4));
  else if (value === true) out.push(Uint8Array.of(0xf5));
  else if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new TypeError(`cannot encode ${value}: only safe integers are supported`);
    out.push(value >= 0 ? head(0, value) : head(1, -1 - value));
  } else if (typeof value === 'string') {
    const bytes = utf8Bytes(value);
    out.push(head(3, bytes.length), bytes);
  } else if (value instanceof Uint8Array) {
    out.push(head(2, value.length), value);
  } else if (Array.isArray(value)) {
    out.push(head(4, value.length));
    for (const item of value) write(item, out);
  } else {
    out.push(head(5, value.size));
    for (const [key, item] of value) {
      write(key, out);
      write(item, out);
    }
  }
}

/** Initial byte plus the shortest argument encoding, as deterministic CBOR requires. */
function head(major: number, argument: number): Uint8Array {
  const type = major << 5;
  if (argument < 24) return Uint8Array.of(type | argument);
  if (argument < 0x100) return Uint8Array.of(type | 24, argument);
  const bytes = new Uint8Array(9);
  const view = new DataView(bytes.buffer);
  if (argument < 0x10000) {
    view.setUint16(1, argument);
    bytes[0] = type | 25;
    return bytes.subarray(0, 3);
  }
  if (argument < 0x100000000) {
    view.setUint32(1, argument);
    bytes[0] = type | 26;
    return bytes.subarray(0, 5);
  }
  view.setBigUint64(1, BigInt(argument));
  bytes[0] = type | 27;
  return bytes;
}

// ---------------------------------------------------------------------------------------
// COSE_Sign1

export interface CoseSign1 {
  /** The serialized protected header (a bstr in the structure; signed). */
  protectedHeader: Uint8Array;
  unprotectedHeader: CborMap;
  payload: Uint8Array;
  /** Raw r || s. */
  signature: Uint8Array;
}

/** Decodes a COSE_Sign1 (tagged or untagged) and checks it declares ES384. */
export function decodeCoseSign1(bytes: Uint8Array): CoseSign1 {
  const untagged = bytes[0] === COSE_SIGN1_TAG_BYTE ? bytes.subarray(1) : bytes;
  const structure = decodeCbor(untagged, 'COSE_Sign1');
  if (!Array.isArray(structure) || structure.length !== 4) {
    throw new AttestationFormatError('COSE_Sign1 must be an array of 4 items');
  }
  const [protectedHeader, unprotectedHeader, payload, signature] = structure;
  if (!(protectedHeader instanceof Uint8Array)) throw new AttestationFormatError('COSE protected header must be a byte string');
  if (!(unprotectedHeader instanceof Map)) throw new AttestationFormatError('COSE unprotected header must be a map');
  if (!(payload instanceof Uint8Array)) throw new AttestationFormatError('COSE payload must be a byte string');
  if (!(signature instanceof Uint8Array)) throw new AttestationFormatError('COSE signature must be a byte string');

  const header = decodeCbor(protectedHeader, 'COSE protected header');
  if (!(header instanceof Map)) throw new AttestationFormatError('COSE protected header must encode a map');
  const alg = header.get(COSE_HEADER_ALG);
  if (alg !== COSE_ALG_ES384) {
    throw new AttestationFormatError(`COSE algorithm must be ES384 (${COSE_ALG_ES384}), got ${JSON.stringify(alg ?? null)}`);
  }
  if (signature.length !== ES384_SIGNATURE_LENGTH) {
    throw new AttestationFormatError(`ES384 signature must be ${ES384_SIGNATURE_LENGTH} bytes, got ${signature.length}`);
  }
  return { protectedHeader, unprotectedHeader, payload, signature };
}

/** Encodes untagged, as the Nitro Secure Module does. */
export function encodeCoseSign1(sign1: CoseSign1): Uint8Array {
  return encodeCbor([sign1.protectedHeader, sign1.unprotectedHeader, sign1.payload, sign1.signature]);
}

/** The bytes an ES384 COSE_Sign1 signature covers (RFC 8152 §4.4), with empty external_aad. */
export function sigStructure(protectedHeader: Uint8Array, payload: Uint8Array): Uint8Array {
  return encodeCbor(['Signature1', protectedHeader, new Uint8Array(0), payload]);
}

/** Builds a complete signed document; `sign` must return a raw r || s ES384 signature. */
export async function signNitroDocument(
  document: NitroDocument,
  sign: (toBeSigned: Uint8Array) => Promise<Uint8Array>,
): Promise<Uint8Array> {
  const protectedHeader = encodeCbor(new Map([[COSE_HEADER_ALG, COSE_ALG_ES384]]));
  const payload = encodeNitroDocument(document);
  const signature = await sign(sigStructure(protectedHeader, payload));
  return encodeCoseSign1({ protectedHeader, unprotectedHeader: new Map(), payload, signature });
}

// ---------------------------------------------------------------------------------------
// Nitro payload

export interface NitroDocument {
  moduleId: string;
  digest: 'SHA384';
  /** Milliseconds since the Unix epoch. */
  timestamp: number;
  pcrs: Map<number, Uint8Array>;
  /** DER leaf certificate whose key signed the document. */
  certificate: Uint8Array;
  /** DER certificates, root first. */
  cabundle: Uint8Array[];
  publicKey: Uint8Array | null;
  userData: Uint8Array | null;
  nonce: Uint8Array | null;
}

const PAYLOAD_KEYS = ['module_id', 'digest', 'timestamp', 'pcrs', 'certificate', 'cabundle', 'public_key', 'user_data', 'nonce'];

/** Parses and validates the payload per AWS attestation_process.md §3.2.2. */
export function decodeNitroDocument(payload: Uint8Array): NitroDocument {
  const map = decodeCbor(payload, 'attestation payload');
  if (!(map instanceof Map)) throw new AttestationFormatError('attestation payload must be a map');
  // Unknown fields are signed content a caller would never see, so refuse them.
  for (const key of map.keys()) {
    if (typeof key !== 'string' || !PAYLOAD_KEYS.includes(key)) {
      throw new AttestationFormatError(`attestation payload has unknown field ${JSON.stringify(key)}`);
    }
  }
  const document: NitroDocument = {
    moduleId: requireText(map, 'module_id'),
    digest: requireText(map, 'digest') as 'SHA384', // checked by checkNitroConstraints below
    timestamp: requireInteger(map, 'timestamp'),
    pcrs: requirePcrs(map),
    certificate: requireBytes(map, 'certificate'),
    cabundle: requireCabundle(map),
    publicKey: optionalBytes(map, 'public_key'),
    userData: optionalBytes(map, 'user_data'),
    nonce: optionalBytes(map, 'nonce'),
  };
  checkNitroConstraints(document);
  return document;
}

/** Encodes the payload with the field order and CBOR types the NSM uses. */
export function encodeNitroDocument(document: NitroDocument): Uint8Array {
  checkNitroConstraints(document);
  const pcrs: CborMap = new Map([...document.pcrs].sort(([a], [b]) => a - b));
  return encodeCbor(
    new Map<CborMapKey, CborValue>([
      ['module_id', document.moduleId],
      ['digest', document.digest],
      ['timestamp', document.timestamp],
      ['pcrs', pcrs],
      ['certificate', document.certificate],
      ['cabundle', document.cabundle],
      ['public_key', document.publicKey],
      ['user_data', document.userData],
      ['nonce', document.nonce],
    ]),
  );
}

/** The content rules of attestation_process.md §3.2.2.2, applied on both decode and encode. */
function checkNitroConstraints(document: NitroDocument): void {
  const fail = (message: string): never => {
    throw new AttestationFormatError(message);
  };
  if (document.moduleId.length === 0) fail('module_id is empty');
  if (document.digest !== 'SHA384') fail(`digest must be "SHA384", got ${JSON.stringify(document.digest)}`);
  if (!(document.timestamp > 0)) fail('timestamp must be greater than 0');
  if (document.pcrs.size < 1 || document.pcrs.size > 32) fail(`pcrs must have 1 to 32 entries, got ${document.pcrs.size}`);
  for (const [index, value] of document.pcrs) {
    if (!Number.isInteger(index) || index < 0 || index > 31) fail(`PCR index ${index} is outside 0..31`);
    if (![32, 48, 64].includes(value.length)) fail(`PCR${index} must be 32, 48 or 64 bytes, got ${value.length}`);
  }
  checkLength('certificate', document.certificate, 1, 1024);
  if (document.cabundle.length === 0) fail('cabundle is empty');
  document.cabundle.forEach((cert, i) => checkLength(`cabundle[${i}]`, cert, 1, 1024));
  if (document.publicKey) checkLength('public_key', document.publicKey, 1, 1024);
  if (document.userData) checkLength('user_data', document.userData, 0, 512);
  if (document.nonce) checkLength('nonce', document.nonce, 0, 512);
}

function checkLength(field: string, bytes: Uint8Array, min: number, max: number): void {
  if (bytes.length < min || bytes.length > max) {
    throw new AttestationFormatError(`${field} must be ${min} to ${max} bytes, got ${bytes.length}`);
  }
}

function fieldError(field: string, expected: string): AttestationFormatError {
  return new AttestationFormatError(`${field} must be ${expected}`);
}

function requireField(map: CborMap, field: string): CborValue {
  if (!map.has(field)) throw new AttestationFormatError(`attestation payload is missing ${field}`);
  return map.get(field) as CborValue;
}

function requireText(map: CborMap, field: string): string {
  const value = requireField(map, field);
  if (typeof value !== 'string') throw fieldError(field, 'a text string');
  return value;
}

function requireInteger(map: CborMap, field: string): number {
  const value = requireField(map, field);
  if (typeof value !== 'number') throw fieldError(field, 'an unsigned integer');
  return value;
}

function requireBytes(map: CborMap, field: string): Uint8Array {
  const value = requireField(map, field);
  if (!(value instanceof Uint8Array)) throw fieldError(field, 'a byte string');
  return value;
}

function requirePcrs(map: CborMap): Map<number, Uint8Array> {
  const pcrs = requireField(map, 'pcrs');
  if (!(pcrs instanceof Map)) throw fieldError('pcrs', 'a map');
  const result = new Map<number, Uint8Array>();
  for (const [index, value] of pcrs) {
    if (typeof index !== 'number') throw fieldError(`pcrs key ${JSON.stringify(index)}`, 'an integer');
    if (!(value instanceof Uint8Array)) throw fieldError(`PCR${index}`, 'a byte string');
    result.set(index, value);
  }
  return result;
}

function requireCabundle(map: CborMap): Uint8Array[] {
  const cabundle = requireField(map, 'cabundle');
  if (!Array.isArray(cabundle)) throw fieldError('cabundle', 'an array');
  return cabundle.map((cert, i) => {
    if (!(cert instanceof Uint8Array)) throw fieldError(`cabundle[${i}]`, 'a byte string');
    return cert;
  });
}

/** The NSM writes absent optional fields as null; older encoders may omit them. */
function optionalBytes(map: CborMap, field: string): Uint8Array | null {
  const value = map.get(field) ?? null;
  if (value !== null && !(value instanceof Uint8Array)) throw fieldError(field, 'a byte string or null');
  return value;
}
