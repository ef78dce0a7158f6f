/**
 * Just enough DER (X.690) to read the certificates of an attestation chain: elements,
 * their children, object identifiers, times. Definite lengths only, as DER requires, and
 * every element must lie inside its parent; anything else is refused, not guessed at.
 */

export interface Tlv {
  tag: number;
  /** The content octets. */
  content: Uint8Array;
  /** Tag, length and content: what a signature covers when this is a tbsCertificate. */
  whole: Uint8Array;
}

export class DerError extends Error {
  override name = 'DerError';
}

/** One element at `offset` of `bytes`, and where the next one starts. */
function readAt(bytes: Uint8Array, offset: number): { tlv: Tlv; end: number } {
  if (offset + 2 > bytes.length) throw new DerError('truncated DER');
  const tag = bytes[offset];
  if ((tag & 0x1f) === 0x1f) throw new DerError('multi-byte DER tags are not used in certificates');
  let length = bytes[offset + 1];
  let start = offset + 2;
  if (length & 0x80) {
    const count = length & 0x7f;
    if (count === 0 || count > 4 || start + count > bytes.length) throw new DerError('bad DER length');
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + bytes[start + i];
    start += count;
  }
  const end = start + length;
  if (end > bytes.length) throw new DerError('truncated DER');
  return { tlv: { tag, content: bytes.subarray(start, end), whole: bytes.subarray(offset, end) }, end };
}

/** The single element `bytes` holds, refusing trailing bytes. */
export function readOne(bytes: Uint8Array, tag: number, what: string): Tlv {
  const { tlv, end } = readAt(bytes, 0);
  if (end !== bytes.length) throw new DerError(`${what} has trailing bytes`);
  return expectTag(tlv, tag, what);
}

export function children(parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let at = 0; at < parent.content.length;) {
    const next = readAt(parent.content, at);
    out.push(next.tlv);
    at = next.end;
  }
  return out;
}

export function expectTag(tlv: Tlv | undefined, tag: number, what: string): Tlv {
  if (!tlv || tlv.tag !== tag) throw new DerError(`${what}: expected DER tag 0x${tag.toString(16)}, got ${tlv ? `0x${tlv.tag.toString(16)}` : 'nothing'}`);
  return tlv;
}

export const TAG = {
  boolean: 0x01,
  integer: 0x02,
  bitString: 0x03,
  octetString: 0x04,
  oid: 0x06,
  utcTime: 0x17,
  generalizedTime: 0x18,
  sequence: 0x30,
  set: 0x31,
} as const;

/** Dotted form of an OBJECT IDENTIFIER's content, e.g. "2.5.29.19". */
export function oid(tlv: Tlv): string {
  const bytes = expectTag(tlv, TAG.oid, 'object identifier').content;
  if (bytes.length === 0 || bytes[bytes.length - 1] & 0x80) throw new DerError('bad object identifier');
  const first = Math.min(Math.floor(bytes[0] / 40), 2);
  const parts = [first, bytes[0] - 40 * first];
  let value = 0;
  for (const byte of bytes.subarray(1)) {
    value = value * 128 + (byte & 0x7f);
    if (!(byte & 0x80)) {
      parts.push(value);
      value = 0;
    }
  }
  return parts.join('.');
}

/** UTCTime (YYMMDDHHMMSSZ) or GeneralizedTime (YYYYMMDDHHMMSSZ), the forms RFC 5280 allows. */
export function time(tlv: Tlv): Date {
  const text = String.fromCharCode(...tlv.content);
  const match = tlv.tag === TAG.utcTime ? /^(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/.exec(text)
    : tlv.tag === TAG.generalizedTime ? /^(\d{4})(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/.exec(text) : null;
  if (!match) throw new DerError(`unreadable certificate time "${text}"`);
  const [year, month, day, hour, minute, second] = match.slice(1).map(Number);
  // RFC 5280 §4.1.2.5.1: two-digit years 50–99 are 19xx.
  const fullYear = tlv.tag === TAG.utcTime ? year + (year < 50 ? 2000 : 1900) : year;
  const date = new Date(Date.UTC(fullYear, month - 1, day, hour, minute, second));
  if (date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) throw new DerError(`unreadable certificate time "${text}"`);
  return date;
}

/** A non-negative INTEGER that fits in a safe number. */
export function smallInteger(tlv: Tlv, what: string): number {
  const bytes = expectTag(tlv, TAG.integer, what).content;
  if (bytes.length === 0 || bytes.length > 6 || bytes[0] & 0x80) throw new DerError(`bad ${what}`);
  return bytes.reduce((n, b) => n * 256 + b, 0);
}
