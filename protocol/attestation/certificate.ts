/**
 * X.509 certificates (RFC 5280) read with der.ts and checked with WebCrypto, so that the
 * same code verifies attestation chains in Node and in the browser (the console's bundle).
 *
 * Why our own reader rather than @peculiar/x509 (which the simulated NSM uses to *make*
 * certificates): a verifier needs a handful of fields (names, validity, key,
 * basicConstraints, keyUsage, key identifiers), and @peculiar/x509 would bring tsyringe,
 * a global Reflect polyfill and an ASN.1 schema library into the browser bundle; ~150
 * lines that refuse what they do not expect are easier to audit than that.
 *
 * Only ECDSA signatures (P-256/384/521 with SHA-256/384/512) are supported: every
 * certificate of an AWS Nitro or simulated chain is ECDSA P-384.
 */
import { children, DerError, expectTag, oid, readOne, smallInteger, TAG, time, type Tlv } from './der.js';
import { bytesEqual, fromBase64 } from '../bytes.js';

export interface Certificate {
  der: Uint8Array;
  /** The signed part (tbsCertificate) and its signature by the issuer. */
  tbs: Uint8Array;
  signatureAlgorithm: string;
  signature: Uint8Array;
  /** Names as DER, compared byte for byte; `subject` and `issuer` are for people. */
  subjectName: Uint8Array;
  issuerName: Uint8Array;
  subject: string;
  issuer: string;
  notBefore: Date;
  notAfter: Date;
  /** SubjectPublicKeyInfo, DER; `curve` when it is an EC key on a named curve WebCrypto knows. */
  spki: Uint8Array;
  curve?: Curve;
  /** basicConstraints: cA, and pathLenConstraint when present. */
  ca: boolean;
  pathLenConstraint?: number;
  /** keyUsage's keyCertSign bit; undefined when the certificate has no keyUsage extension (any use allowed). */
  keyCertSign?: boolean;
  subjectKeyId?: Uint8Array;
  authorityKeyId?: Uint8Array;
}

/** WebCrypto's key type, named without the DOM library (tsconfig has none) or node:crypto's types. */
type CryptoKey = Awaited<ReturnType<typeof crypto.subtle.importKey>>;

interface Curve {
  name: 'P-256' | 'P-384' | 'P-521';
  /** Bytes of r and of s in a raw (IEEE P1363) signature. */
  size: number;
}

const CURVES: Record<string, Curve> = {
  '1.2.840.10045.3.1.7': { name: 'P-256', size: 32 },
  '1.3.132.0.34': { name: 'P-384', size: 48 },
  '1.3.132.0.35': { name: 'P-521', size: 66 },
};
const EC_PUBLIC_KEY = '1.2.840.10045.2.1';
const ECDSA_HASHES: Record<string, string> = {
  '1.2.840.10045.4.3.2': 'SHA-256',
  '1.2.840.10045.4.3.3': 'SHA-384',
  '1.2.840.10045.4.3.4': 'SHA-512',
};
const ATTRIBUTES: Record<string, string> = { '2.5.4.3': 'CN', '2.5.4.6': 'C', '2.5.4.7': 'L', '2.5.4.8': 'ST', '2.5.4.10': 'O', '2.5.4.11': 'OU' };
const EXTENSIONS = { basicConstraints: '2.5.29.19', keyUsage: '2.5.29.15', subjectKeyId: '2.5.29.14', authorityKeyId: '2.5.29.35' };

/** The first certificate of a PEM text, as DER. */
export function pemToDer(pem: string): Uint8Array {
  const match = /-----BEGIN CERTIFICATE-----([\s\S]+?)-----END CERTIFICATE-----/.exec(pem);
  const der = match ? fromBase64(match[1].replace(/\s+/g, '')) : undefined;
  if (!der) throw new DerError('not a PEM certificate');
  return der;
}

/** Throws DerError when `der` is not one well-formed certificate with the fields above. */
export function parseCertificate(der: Uint8Array): Certificate {
  const [tbs, algorithm, signature, ...extra] = children(readOne(der, TAG.sequence, 'certificate'));
  if (extra.length > 0) throw new DerError('certificate has extra fields');
  const fields = children(expectTag(tbs, TAG.sequence, 'tbsCertificate'));
  const [, innerAlgorithm, issuer, validity, subject, spki, ...optional] = fields[0]?.tag === 0xa0 ? fields.slice(1) : fields;
  const signatureAlgorithm = algorithmOid(algorithm);
  // RFC 5280 §4.1.1.2: the algorithm named inside what is signed must be the one used.
  if (algorithmOid(innerAlgorithm) !== signatureAlgorithm) throw new DerError('the signed and the outer signature algorithms differ');
  const [notBefore, notAfter] = children(expectTag(validity, TAG.sequence, 'validity'));
  const bits = expectTag(signature, TAG.bitString, 'signatureValue').content;
  if (bits[0] !== 0) throw new DerError('signatureValue has unused bits');
  const extensions = readExtensions(optional.find((field) => field.tag === 0xa3));
  return {
    der,
    tbs: tbs.whole,
    signatureAlgorithm,
    signature: bits.subarray(1),
    subjectName: expectTag(subject, TAG.sequence, 'subject').whole,
    issuerName: expectTag(issuer, TAG.sequence, 'issuer').whole,
    subject: displayName(subject),
    issuer: displayName(issuer),
    notBefore: time(notBefore),
    notAfter: time(notAfter),
    spki: expectTag(spki, TAG.sequence, 'subjectPublicKeyInfo').whole,
    curve: ecCurve(spki),
    ...extensions,
  };
}

/** The SHA-256 fingerprint as Node and OpenSSL print it (AB:CD:…), which is how AWS publishes its root's. */
export async function fingerprint256(der: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', der));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0').toUpperCase()).join(':');
}

/**
 * Whether `issuer` may have issued `subject`: the checks OpenSSL's X509_check_issued makes
 * (the sdk used them through Node's checkIssued before it ran in browsers too): the
 * subject's issuer name is the issuer's subject name, the subject's authority key
 * identifier names the issuer's subject key identifier when both are present, and the
 * issuer's keyUsage, when it has one, allows keyCertSign.
 */
export function mayHaveIssued(subject: Certificate, issuer: Certificate): boolean {
  if (!bytesEqual(subject.issuerName, issuer.subjectName)) return false;
  if (subject.authorityKeyId && issuer.subjectKeyId && !bytesEqual(subject.authorityKeyId, issuer.subjectKeyId)) return false;
  return issuer.keyCertSign !== false;
}

/** Whether `issuer`'s key verifies the signature on `subject`. */
export async function signedBy(subject: Certificate, issuer: Certificate): Promise<boolean> {
  const hash = ECDSA_HASHES[subject.signatureAlgorithm];
  if (!hash) throw new DerError(`${subject.subject} is signed with ${subject.signatureAlgorithm}; only ECDSA with SHA-256/384/512 is supported`);
  const { key, curve } = await ecdsaKey(issuer);
  return crypto.subtle.verify({ name: 'ECDSA', hash }, key, rawSignature(subject.signature, curve.size), subject.tbs);
}

/** The certificate's key, for ECDSA verification; throws for any key that is not EC on a known curve. */
export async function ecdsaKey(certificate: Certificate): Promise<{ key: CryptoKey; curve: Curve }> {
  const curve = certificate.curve;
  if (!curve) throw new DerError(`${certificate.subject} has no EC P-256/384/521 key`);
  const key = await crypto.subtle.importKey('spki', certificate.spki, { name: 'ECDSA', namedCurve: curve.name }, false, ['verify']);
  return { key, curve };
}

function algorithmOid(tlv: Tlv | undefined): string {
  return oid(children(expectTag(tlv, TAG.sequence, 'algorithm'))[0]);
}

function ecCurve(spki: Tlv): Curve | undefined {
  const [algorithm] = children(spki);
  const [keyType, parameters] = children(expectTag(algorithm, TAG.sequence, 'key algorithm'));
  if (oid(keyType) !== EC_PUBLIC_KEY || parameters?.tag !== TAG.oid) return undefined;
  return CURVES[oid(parameters)];
}

/** "CN=…" when the name has a common name, else every attribute, as the sdk showed names with Node before. */
function displayName(name: Tlv): string {
  const attributes = children(name).flatMap((set) => children(expectTag(set, TAG.set, 'name'))).map((pair) => {
    const [type, value] = children(expectTag(pair, TAG.sequence, 'name attribute'));
    const label = ATTRIBUTES[oid(type)] ?? oid(type);
    const text = value.tag === 0x0c ? new TextDecoder('utf-8', { fatal: true }).decode(value.content) : String.fromCharCode(...value.content);
    return `${label}=${text}`;
  });
  return attributes.find((part) => part.startsWith('CN=')) ?? attributes.join(', ');
}

type Extensions = Pick<Certificate, 'ca' | 'pathLenConstraint' | 'keyCertSign' | 'subjectKeyId' | 'authorityKeyId'>;

function readExtensions(wrapper: Tlv | undefined): Extensions {
  const found: Extensions = { ca: false };
  if (!wrapper) return found;
  const seen = new Set<string>();
  for (const extension of children(expectTag(children(wrapper)[0], TAG.sequence, 'extensions'))) {
    const parts = children(expectTag(extension, TAG.sequence, 'extension'));
    const id = oid(parts[0]);
    // RFC 5280 §4.2: one instance of an extension; two could say different things to different readers.
    if (seen.has(id)) throw new DerError(`extension ${id} appears twice`);
    seen.add(id);
    const value = expectTag(parts[parts.length - 1], TAG.octetString, `extension ${id}`).content;
    if (id === EXTENSIONS.basicConstraints) {
      const [first, second] = children(readOne(value, TAG.sequence, 'basicConstraints'));
      found.ca = first?.tag === TAG.boolean && first.content.length === 1 && first.content[0] !== 0;
      const limit = first?.tag === TAG.integer ? first : second;
      if (limit) found.pathLenConstraint = smallInteger(limit, 'pathLenConstraint');
    } else if (id === EXTENSIONS.keyUsage) {
      const bits = readOne(value, TAG.bitString, 'keyUsage').content;
      found.keyCertSign = bits.length > 1 && (bits[1] & 0x04) !== 0; // bit 5, counted from the first byte's top bit
    } else if (id === EXTENSIONS.subjectKeyId) {
      found.subjectKeyId = readOne(value, TAG.octetString, 'subjectKeyIdentifier').content;
    } else if (id === EXTENSIONS.authorityKeyId) {
      found.authorityKeyId = children(readOne(value, TAG.sequence, 'authorityKeyIdentifier')).find((field) => field.tag === 0x80)?.content;
    }
  }
  return found;
}

/** An ECDSA signature in DER (SEQUENCE { r, s }) as WebCrypto wants it: r ‖ s, each `size` bytes. */
function rawSignature(der: Uint8Array, size: number): Uint8Array {
  const [r, s, ...extra] = children(readOne(der, TAG.sequence, 'ECDSA signature'));
  if (extra.length > 0 || !r || !s) throw new DerError('an ECDSA signature has two integers');
  const out = new Uint8Array(size * 2);
  [r, s].forEach((part, i) => {
    let bytes = expectTag(part, TAG.integer, 'ECDSA signature').content;
    while (bytes.length > size && bytes[0] === 0) bytes = bytes.subarray(1);
    if (bytes.length > size) throw new DerError('an ECDSA signature integer is longer than the curve');
    out.set(bytes, (i + 1) * size - bytes.length);
  });
  return out;
}
