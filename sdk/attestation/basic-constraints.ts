/**
 * Reads a certificate's basicConstraints pathLenConstraint (RFC 5280 §4.2.1.9), which
 * Node's X509Certificate does not expose: how many CA certificates may sit below this one
 * in a chain. A minimal DER walk over the fields it needs, refusing anything malformed.
 */

interface Tlv { tag: number; start: number; end: number }

/** One DER element at `offset` of `der` (definite lengths only, as DER requires). */
function readTlv(der: Uint8Array, offset: number, limit: number): Tlv {
  if (offset + 2 > limit) throw new Error('truncated DER');
  const tag = der[offset];
  let length = der[offset + 1];
  let start = offset + 2;
  if (length & 0x80) {
    const bytes = length & 0x7f;
    if (bytes === 0 || bytes > 4 || start + bytes > limit) throw new Error('bad DER length');
    length = 0;
    for (let i = 0; i < bytes; i++) length = length * 256 + der[start + i];
    start += bytes;
  }
  const end = start + length;
  if (end > limit) throw new Error('truncated DER');
  return { tag, start, end };
}

function children(der: Uint8Array, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let at = parent.start; at < parent.end; at = out[out.length - 1].end) out.push(readTlv(der, at, parent.end));
  return out;
}

const BASIC_CONSTRAINTS_OID = Buffer.from('551d13', 'hex'); // 2.5.29.19

/** The pathLenConstraint of a DER certificate, or undefined when it has none. */
export function pathLenConstraint(certificate: Uint8Array): number | undefined {
  const cert = readTlv(certificate, 0, certificate.length);
  const tbs = children(certificate, cert)[0];
  // Extensions are the [3] EXPLICIT element of tbsCertificate.
  const wrapper = children(certificate, tbs).find((field) => field.tag === 0xa3);
  if (!wrapper) return undefined;
  for (const extension of children(certificate, children(certificate, wrapper)[0])) {
    const parts = children(certificate, extension);
    const oid = parts[0];
    if (oid.tag !== 0x06 || !Buffer.from(certificate.subarray(oid.start, oid.end)).equals(BASIC_CONSTRAINTS_OID)) continue;
    const value = parts[parts.length - 1]; // OCTET STRING holding BasicConstraints
    const constraints = readTlv(certificate, value.start, value.end);
    const integer = children(certificate, constraints).find((field) => field.tag === 0x02);
    if (!integer) return undefined;
    const bytes = certificate.subarray(integer.start, integer.end);
    if (bytes.length === 0 || bytes.length > 4 || bytes[0] & 0x80) throw new Error('bad pathLenConstraint');
    return bytes.reduce((n, b) => n * 256 + b, 0);
  }
  return undefined;
}
