// Verifies GET /v1/attestation in the browser, the way AWS documents it (and as
// sdk/attestation/verify.ts does in Node): the COSE_Sign1 ES384 signature over the
// Sig_structure with the leaf certificate's key; the chain leaf ← cabundle ← the pinned
// root; validity now; the nonce this page chose; and that the document binds the keys the
// answer names. Only the pinned root makes this mean anything: a root taken from the
// service being checked proves nothing against a hostile host.

import { decodeCbor, sigStructure } from './cbor.js';
import { ecdsaRaw, parseCertificate, pemToDer } from './der.js';

const ES384 = -35;
/** DER of an Ed25519 SubjectPublicKeyInfo up to its 32-byte key (RFC 8410), as sdk/protocol/public-key.ts writes public_key. */
const ED25519_SPKI_PREFIX = Uint8Array.from([0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00]);

export const fromBase64 = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
export const toHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
const toBase64 = (bytes) => btoa(String.fromCharCode(...bytes));
const equal = (a, b) => a instanceof Uint8Array && b instanceof Uint8Array && a.length === b.length && a.every((x, i) => x === b[i]);

/** The document's public_key names `key`: as a DER Ed25519 SubjectPublicKeyInfo, or raw (enclaves before the DER change). Either is unambiguous. */
function bindsKey(documentKey, key) {
  if (equal(documentKey, key)) return true;
  return documentKey instanceof Uint8Array && documentKey.length === ED25519_SPKI_PREFIX.length + 32
    && equal(documentKey.subarray(0, ED25519_SPKI_PREFIX.length), ED25519_SPKI_PREFIX) && equal(documentKey.subarray(ED25519_SPKI_PREFIX.length), key);
}

/** A fresh random nonce, hex (the document must echo it: proof it was made for this request). */
export function freshNonce(bytes = 32) {
  return toHex(crypto.getRandomValues(new Uint8Array(bytes)));
}

async function verifiedBy(issuer, subjectBytes, hash, derSignature) {
  if (!issuer.curve) throw new Error(`${issuer.subject}: not an EC P-256/384/521 key`);
  if (!hash) throw new Error('unsupported signature algorithm (ECDSA with SHA-256/384/512 only)');
  const key = await crypto.subtle.importKey('spki', issuer.spki, { name: 'ECDSA', namedCurve: issuer.curve }, false, ['verify']);
  return crypto.subtle.verify({ name: 'ECDSA', hash }, key, ecdsaRaw(derSignature, issuer.curveSize), subjectBytes);
}

async function check(name, run) {
  try {
    const detail = await run();
    return { name, ok: true, detail };
  } catch (err) {
    return { name, ok: false, detail: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * @param answer the JSON of GET /v1/attestation
 * @param nonceHex the nonce this page sent
 * @param rootPem the pinned root certificate (PEM)
 */
export async function verifyAttestation(answer, nonceHex, rootPem, now = new Date()) {
  let sign1;
  let doc;
  let leaf;
  let bundle;
  try {
    const [protectedHeader, , payload, signature] = decodeCbor(fromBase64(answer.code_attestation));
    const header = decodeCbor(protectedHeader);
    if (!(header instanceof Map) || header.get(1) !== ES384) throw new Error('the protected header does not say ES384');
    sign1 = { protectedHeader, payload, signature };
    doc = decodeCbor(payload);
    if (!(doc instanceof Map)) throw new Error('the payload is not a map');
    leaf = parseCertificate(doc.get('certificate'));
    bundle = doc.get('cabundle').map((der) => parseCertificate(der));
  } catch (err) {
    return { ok: false, checks: [{ name: 'structure', ok: false, detail: `not a COSE_Sign1 attestation document: ${err.message}` }] };
  }
  const checks = [{ name: 'structure', ok: true, detail: `COSE_Sign1/ES384, module ${doc.get('module_id')}, ${doc.get('pcrs').size} PCRs, ${bundle.length} CA certificate(s)` }];

  checks.push(await check('signature', async () => {
    if (leaf.curve !== 'P-384') throw new Error(`the leaf key is ${leaf.curve ?? 'not EC'}; ES384 needs P-384`);
    const key = await crypto.subtle.importKey('spki', leaf.spki, { name: 'ECDSA', namedCurve: 'P-384' }, false, ['verify']);
    const ok = await crypto.subtle.verify({ name: 'ECDSA', hash: 'SHA-384' }, key, sign1.signature, sigStructure(sign1.protectedHeader, sign1.payload));
    if (!ok) throw new Error('the signature does not verify with the leaf certificate\'s key');
    return `ES384 signature verifies with the key of ${leaf.subject}`;
  }));

  checks.push(await check('certificate chain', async () => {
    if (!rootPem) throw new Error('no root pinned: paste the root certificate you trust');
    const root = parseCertificate(pemToDer(rootPem));
    if (bundle.length === 0 || !equal(bundle[0].der, root.der)) throw new Error('the document\'s chain does not start at the pinned root');
    if (!(await verifiedBy(root, root.tbs, root.hash, root.signature))) throw new Error('the pinned root is not self-signed');
    // Root first: each certificate is issued (names match) and signed by the one before it, the leaf last.
    const chain = [...bundle, leaf];
    for (let i = 1; i < chain.length; i++) {
      const issuer = chain[i - 1];
      const subject = chain[i];
      if (!issuer.ca) throw new Error(`${issuer.subject} is not a CA certificate`);
      if (!equal(subject.issuerDer, issuer.subjectDer)) throw new Error(`${subject.subject} was not issued by ${issuer.subject}`);
      if (!(await verifiedBy(issuer, subject.tbs, subject.hash, subject.signature))) throw new Error(`the signature on ${subject.subject} does not verify`);
    }
    return `${chain.length} certificates, from the pinned root ${root.subject} to ${leaf.subject}`;
  }));

  checks.push(await check('certificate validity', async () => {
    for (const c of [leaf, ...bundle]) {
      if (now < c.notBefore || now > c.notAfter) throw new Error(`${c.subject} is valid ${c.notBefore.toISOString()} – ${c.notAfter.toISOString()}, not now`);
    }
    return `all valid at ${now.toISOString()}`;
  }));

  checks.push(await check('nonce', async () => {
    const echoed = doc.get('nonce');
    if (!(echoed instanceof Uint8Array) || toHex(echoed) !== nonceHex.toLowerCase()) throw new Error('the document does not echo this page\'s nonce: it may be a replay');
    return `echoes the fresh nonce ${nonceHex.slice(0, 16)}…`;
  }));

  checks.push(await check('key binding', async () => {
    if (!bindsKey(doc.get('public_key'), fromBase64(answer.tee_public_key))) throw new Error('tee_public_key is not the document\'s public_key');
    const bound = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(doc.get('user_data')));
    if (bound.operator_pubkey !== answer.operator_pubkey) throw new Error('operator_pubkey is not the one in user_data');
    if (bound.tee_box_public_key !== answer.tee_box_public_key) throw new Error('tee_box_public_key is not the one in user_data');
    return 'the document binds tee_public_key, operator_pubkey and tee_box_public_key';
  }));

  return {
    ok: checks.every((c) => c.ok),
    checks,
    document: {
      moduleId: doc.get('module_id'),
      digest: doc.get('digest'),
      timestamp: new Date(doc.get('timestamp')),
      pcrs: [...doc.get('pcrs')].sort(([a], [b]) => a - b).map(([index, value]) => ({ index, hex: toHex(value) })),
      publicKey: toBase64(doc.get('public_key')),
      leaf: leaf.subject,
    },
  };
}
