// Just enough DER (X.690) and X.509 (RFC 5280) to check an attestation document's
// certificate chain with WebCrypto: the signed part, its signature, names, validity, the
// subject's key and basicConstraints. Signatures are checked by WebCrypto, not here.

const OIDS = {
  '1.2.840.10045.4.3.2': { hash: 'SHA-256' },
  '1.2.840.10045.4.3.3': { hash: 'SHA-384' },
  '1.2.840.10045.4.3.4': { hash: 'SHA-512' },
  '1.2.840.10045.3.1.7': { curve: 'P-256', size: 32 },
  '1.3.132.0.34': { curve: 'P-384', size: 48 },
  '1.3.132.0.35': { curve: 'P-521', size: 66 },
  '2.5.4.3': { attr: 'CN' },
  '2.5.4.10': { attr: 'O' },
  '2.5.4.11': { attr: 'OU' },
  '2.5.4.6': { attr: 'C' },
  '2.5.29.19': { ext: 'basicConstraints' },
};

/** One TLV: tag byte, its content, and the whole encoding (what a signature covers). */
function read(bytes, at) {
  if (at + 2 > bytes.length) throw new Error('DER: truncated');
  const tag = bytes[at];
  let length = bytes[at + 1];
  let start = at + 2;
  if (length & 0x80) {
    const n = length & 0x7f;
    if (n < 1 || n > 4) throw new Error('DER: bad length');
    length = 0;
    for (let i = 0; i < n; i++) length = length * 256 + bytes[start + i];
    start += n;
  }
  const end = start + length;
  if (end > bytes.length) throw new Error('DER: truncated');
  return { tag, content: bytes.subarray(start, end), whole: bytes.subarray(at, end), end };
}

function children(content) {
  const out = [];
  for (let at = 0; at < content.length;) {
    const tlv = read(content, at);
    out.push(tlv);
    at = tlv.end;
  }
  return out;
}

function oid(content) {
  const parts = [Math.floor(content[0] / 40), content[0] % 40];
  let value = 0;
  for (let i = 1; i < content.length; i++) {
    value = value * 128 + (content[i] & 0x7f);
    if (!(content[i] & 0x80)) { parts.push(value); value = 0; }
  }
  return parts.join('.');
}

function time(tlv) {
  const text = new TextDecoder().decode(tlv.content);
  const m = tlv.tag === 0x17 ? /^(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/.exec(text) : /^(\d{4})(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/.exec(text);
  if (!m) throw new Error(`X.509: unreadable time ${text}`);
  let year = Number(m[1]);
  if (tlv.tag === 0x17) year += year < 50 ? 2000 : 1900;
  return new Date(Date.UTC(year, Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])));
}

function name(tlv) {
  return children(tlv.content).flatMap((set) => children(set.content)).map((pair) => {
    const [type, value] = children(pair.content);
    const label = OIDS[oid(type.content)]?.attr ?? oid(type.content);
    return `${label}=${new TextDecoder().decode(value.content)}`;
  }).join(', ');
}

function isCa(extensions) {
  if (!extensions) return false;
  for (const ext of children(children(extensions.content)[0].content)) {
    const parts = children(ext.content);
    if (OIDS[oid(parts[0].content)]?.ext !== 'basicConstraints') continue;
    const value = children(parts[parts.length - 1].content)[0];
    const fields = children(value.content);
    return fields.length > 0 && fields[0].tag === 0x01 && fields[0].content[0] !== 0;
  }
  return false;
}

export function parseCertificate(der) {
  const certificate = read(der, 0);
  if (certificate.tag !== 0x30 || certificate.end !== der.length) throw new Error('X.509: not one DER certificate');
  const [tbs, algorithm, signature] = children(certificate.content);
  const fields = children(tbs.content);
  const rest = fields[0].tag === 0xa0 ? fields.slice(1) : fields; // [0] version
  const [, , issuer, validity, subject, spki, ...more] = rest;
  const [notBefore, notAfter] = children(validity.content);
  const [keyAlgorithm] = children(spki.content);
  const [, curveOid] = children(keyAlgorithm.content);
  const curve = curveOid && OIDS[oid(curveOid.content)];
  return {
    der,
    tbs: tbs.whole,
    hash: OIDS[oid(children(algorithm.content)[0].content)]?.hash,
    // A BIT STRING: its first byte counts unused bits (0 here).
    signature: signature.content.subarray(1),
    issuerDer: issuer.whole,
    subjectDer: subject.whole,
    issuer: name(issuer),
    subject: name(subject),
    notBefore: time(notBefore),
    notAfter: time(notAfter),
    spki: spki.whole,
    curve: curve?.curve,
    curveSize: curve?.size,
    ca: isCa(more.find((t) => t.tag === 0xa3)),
  };
}

/** An ECDSA signature in DER (SEQUENCE of r, s) as WebCrypto wants it: r ‖ s, each `size` bytes. */
export function ecdsaRaw(der, size) {
  const [r, s] = children(read(der, 0).content);
  const out = new Uint8Array(size * 2);
  for (const [i, part] of [r, s].entries()) {
    let bytes = part.content;
    while (bytes.length > size && bytes[0] === 0) bytes = bytes.subarray(1);
    if (bytes.length > size) throw new Error('ECDSA: integer too long');
    out.set(bytes, (i + 1) * size - bytes.length);
  }
  return out;
}

export function pemToDer(pem) {
  const m = /-----BEGIN CERTIFICATE-----([\s\S]+?)-----END CERTIFICATE-----/.exec(pem);
  if (!m) throw new Error('not a PEM certificate');
  return Uint8Array.from(atob(m[1].replace(/\s+/g, '')), (c) => c.charCodeAt(0));
}
