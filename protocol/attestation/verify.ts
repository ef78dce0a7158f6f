/**
 * Verifies AWS Nitro attestation documents (and the simulated TEE's, which use the same
 * format under a different root) following AWS attestation_process.md §3: structure, the
 * COSE signature with the leaf certificate's key, the chain leaf ← cabundle (reversed) ←
 * pinned root, validity at a given time, then whatever PCRs, nonce and public key the
 * caller expects.
 *
 * One verifier for Node and the browser: the sdk and `agent-verify` run this file, and
 * the web console runs it too, bundled at build time (scripts/build-console.ts). So it uses
 * only WebCrypto (`globalThis.crypto.subtle`) and Uint8Array, never node:crypto or Buffer;
 * certificates are read by certificate.ts, which makes the checks Node's checkIssued made
 * (issuer name, key identifiers, keyCertSign) and reads basicConstraints.
 *
 * Two checks go beyond AWS's list. A document whose PCR0, PCR1 and PCR2 are all zero comes
 * from an enclave started in debug mode, whose memory the host can read: it is refused
 * unless `allowDebug`. And the document's timestamp must be recent (`maxAgeSeconds`,
 * default the leaf certificate's lifetime), so a document without a nonce cannot be
 * replayed for ever.
 */
import { AWS_NITRO_ROOT_G1_PEM, AWS_NITRO_ROOT_G1_SHA256 } from './aws-root.js';
import { ecdsaKey, fingerprint256, mayHaveIssued, parseCertificate, pemToDer, signedBy, type Certificate } from './certificate.js';
import { decodeCoseSign1, decodeNitroDocument, sigStructure, type CoseSign1, type NitroDocument } from '../cose.js';
import { bytesEqual, toHex } from '../bytes.js';
import { ed25519KeyFromSpki, publicKeyMatches } from '../public-key.js';
import { parseUserData } from '../user-data.js';

export interface VerifyOptions {
  /** PEM of the root to pin; defaults to the AWS Nitro Enclaves Root G1. */
  rootPem?: string;
  /** Time at which certificates must be valid; defaults to now. */
  at?: Date;
  nonce?: Uint8Array;
  /** Expected PCR values by index; PCRs not listed are not compared. */
  pcrs?: Record<number, Uint8Array>;
  publicKey?: Uint8Array;
  /** Expected operator key in user_data (this service's format, protocol/user-data.ts). */
  operatorKey?: Uint8Array;
  /** Expected X25519 sealing key in user_data. */
  boxPublicKey?: Uint8Array;
  /** Accept a debug-mode enclave (PCR0, PCR1 and PCR2 all zero), whose memory the host can read. Development only. */
  allowDebug?: boolean;
  /** Oldest accepted document, by its timestamp against `at`; default the leaf certificate's lifetime. */
  maxAgeSeconds?: number;
}

/** A document may be this far ahead of the verifier's clock (the NSM's clock is not ours). */
const FUTURE_SKEW_MS = 5 * 60 * 1000;

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

export interface CertificateSummary {
  subject: string;
  issuer: string;
  notBefore: Date;
  notAfter: Date;
  sha256: string;
}

export interface DecodedDocument {
  moduleId: string;
  digest: string;
  timestamp: Date;
  /** PCR values as lowercase hex, by index. */
  pcrs: Record<number, string>;
  publicKey: Uint8Array | null;
  userData: Uint8Array | null;
  nonce: Uint8Array | null;
  /** The leaf (signing) certificate. */
  certificate: CertificateSummary;
}

export interface VerificationResult {
  /** True only if every check passed. */
  ok: boolean;
  checkedAt: Date;
  checks: Check[];
  /** Present whenever the document is well-formed, even if other checks failed. */
  document?: DecodedDocument;
}

/** A parsed certificate with the fields the checks need, dates already validated. */
interface Cert {
  x509: Certificate;
  summary: CertificateSummary;
}

interface ParsedDocument {
  sign1: CoseSign1;
  payload: NitroDocument;
  leaf: Cert;
  /** The document's cabundle, root first. */
  bundle: Cert[];
}

/** Never throws: malformed input becomes a failed "structure" check. */
export async function verifyAttestation(document: Uint8Array, options: VerifyOptions = {}): Promise<VerificationResult> {
  const at = options.at ?? new Date();
  let parsed: ParsedDocument;
  try {
    parsed = await parseDocument(document);
  } catch (error) {
    return { ok: false, checkedAt: at, checks: [fail('structure', errorMessage(error))] };
  }
  const { sign1, payload, leaf, bundle } = parsed;
  const root = await attemptAsync(() => pinnedRoot(options.rootPem));

  const checks: Check[] = [
    pass(
      'structure',
      `COSE_Sign1/ES384, module ${payload.moduleId}, ${payload.pcrs.size} PCRs, ${bundle.length} CA certificate(s)`,
    ),
    await checkAsync('signature', () => checkSignature(sign1, leaf)),
    await checkAsync('certificate chain', () => {
      if (root instanceof Error) throw root;
      return checkChain(leaf, bundle, root);
    }),
    // The pinned root's validity counts too (AWS §3.2.3.1); without one, check what we have.
    check('certificate validity', () =>
      checkValidity([leaf, ...bundle.slice(1).reverse(), root instanceof Error ? bundle[0] : root], at),
    ),
    check('document age', () => checkAge(payload.timestamp, at, options.maxAgeSeconds, leaf)),
    check('debug mode', () => checkDebugMode(payload.pcrs, options.allowDebug === true)),
  ];
  if (options.nonce) {
    const expected = options.nonce;
    checks.push(check('nonce', () => compareBytes('nonce', expected, payload.nonce)));
  }
  for (const [key, expected] of Object.entries(options.pcrs ?? {})) {
    const index = Number(key);
    checks.push(check(`PCR${index}`, () => compareBytes(`PCR${index}`, expected, payload.pcrs.get(index) ?? null)));
  }
  if (options.publicKey) {
    const expected = options.publicKey;
    checks.push(check('public key', () => comparePublicKey(expected, payload.publicKey)));
  }
  const bound = attempt(() => parseUserData(payload.userData));
  const userDataKey = (name: string, expected: Uint8Array, pick: (keys: Exclude<typeof bound, Error>) => Uint8Array) =>
    check(name, () => {
      if (bound instanceof Error) throw bound;
      return { ...compareBytes(`${name} in user_data`, expected, pick(bound)), name };
    });
  if (options.operatorKey) checks.push(userDataKey('operator key', options.operatorKey, (keys) => keys.operatorKey));
  if (options.boxPublicKey) checks.push(userDataKey('box key', options.boxPublicKey, (keys) => keys.boxPublicKey));

  return {
    ok: checks.every((c) => c.ok),
    checkedAt: at,
    checks,
    document: {
      moduleId: payload.moduleId,
      digest: payload.digest,
      timestamp: new Date(payload.timestamp),
      pcrs: Object.fromEntries([...payload.pcrs].map(([index, value]) => [index, hex(value)])),
      publicKey: payload.publicKey,
      userData: payload.userData,
      nonce: payload.nonce,
      certificate: leaf.summary,
    },
  };
}

async function parseDocument(document: Uint8Array): Promise<ParsedDocument> {
  const sign1 = decodeCoseSign1(document);
  const payload = decodeNitroDocument(sign1.payload);
  return {
    sign1,
    payload,
    leaf: await parseCert(payload.certificate, 'certificate'),
    bundle: await Promise.all(payload.cabundle.map((der, i) => parseCert(der, `cabundle[${i}]`))),
  };
}

/** The root to pin; the embedded AWS root must still be the one AWS publishes (a guard against editing it by mistake). */
async function pinnedRoot(rootPem: string | undefined): Promise<Cert> {
  const root = await parseCert(rootPem ?? AWS_NITRO_ROOT_G1_PEM, 'pinned root');
  if (rootPem === undefined && root.summary.sha256 !== AWS_NITRO_ROOT_G1_SHA256) {
    throw new Error(`the embedded AWS Nitro root has fingerprint ${root.summary.sha256}, not AWS's ${AWS_NITRO_ROOT_G1_SHA256}`);
  }
  return root;
}

async function parseCert(encoded: Uint8Array | string, what: string): Promise<Cert> {
  let x509: Certificate;
  try {
    x509 = parseCertificate(typeof encoded === 'string' ? pemToDer(encoded) : encoded);
  } catch (error) {
    throw new Error(`${what} is not a valid X.509 certificate: ${errorMessage(error)}`);
  }
  return {
    x509,
    summary: {
      subject: x509.subject,
      issuer: x509.issuer,
      notBefore: x509.notBefore,
      notAfter: x509.notAfter,
      sha256: await fingerprint256(x509.der),
    },
  };
}

async function checkSignature(sign1: CoseSign1, leaf: Cert): Promise<Check> {
  if (leaf.x509.curve?.name !== 'P-384') {
    const has = leaf.x509.curve ? `an EC ${leaf.x509.curve.name}` : 'a non-EC (or unknown curve)';
    return fail('signature', `${leaf.summary.subject} has ${has} key; ES384 needs EC P-384`);
  }
  const { key } = await ecdsaKey(leaf.x509);
  // WebCrypto's ECDSA signatures are raw r || s (IEEE P1363), as COSE's are.
  const valid = await crypto.subtle.verify({ name: 'ECDSA', hash: 'SHA-384' }, key, sign1.signature, sigStructure(sign1.protectedHeader, sign1.payload));
  return valid
    ? pass('signature', `ES384 signature verifies with the key of ${leaf.summary.subject}`)
    : fail('signature', `signature does not verify with the key of ${leaf.summary.subject}`);
}

async function checkChain(leaf: Cert, bundle: Cert[], root: Cert): Promise<Check> {
  const bundleRoot = bundle[0];
  if (bundleRoot.summary.sha256 !== root.summary.sha256) {
    return fail(
      'certificate chain',
      `chain does not end at the pinned root (fingerprint ${root.summary.sha256}, ${root.summary.subject}); ` +
        `the document's root is ${bundleRoot.summary.subject} (fingerprint ${bundleRoot.summary.sha256})`,
    );
  }
  // Leaf first, each certificate followed by its issuer, ending at the pinned root.
  const path = [leaf, ...bundle.slice(1).reverse(), root];
  const problems: string[] = [];
  for (let i = 0; i < path.length - 1; i++) {
    const subject = path[i];
    const issuer = path[i + 1];
    if (!issuer.x509.ca) {
      problems.push(`${issuer.summary.subject} is not a CA (basicConstraints cA is not set)`);
    }
    // RFC 5280 §4.2.1.9: at most pathLenConstraint CA certificates below this one (the leaf is not one).
    const limit = issuer.x509.pathLenConstraint;
    if (limit !== undefined && i > limit) {
      problems.push(`${issuer.summary.subject} allows ${limit} CA certificate(s) below it (pathLenConstraint), the chain has ${i}`);
    }
    if (!mayHaveIssued(subject.x509, issuer.x509)) {
      problems.push(
        `${subject.summary.subject} was not issued by ${issuer.summary.subject} ` +
          '(issuer name, key identifier or key usage differ)',
      );
    } else if (!(await signedBy(subject.x509, issuer.x509))) {
      problems.push(`signature on ${subject.summary.subject} does not verify with the key of ${issuer.summary.subject}`);
    }
  }
  if (problems.length > 0) return fail('certificate chain', problems.join('; '));
  return pass(
    'certificate chain',
    `${path.map((c) => c.summary.subject).join(' ← ')} (pinned root fingerprint ${root.summary.sha256})`,
  );
}

function checkValidity(certs: Cert[], at: Date): Check {
  if (Number.isNaN(at.getTime())) return fail('certificate validity', 'the verification time is not a valid date');
  const problems = certs.flatMap(({ summary }) => {
    if (at > summary.notAfter) {
      return [`certificate ${summary.subject} expired at ${isoSeconds(summary.notAfter)} (checked at ${isoSeconds(at)})`];
    }
    if (at < summary.notBefore) {
      const notBefore = isoSeconds(summary.notBefore);
      return [`certificate ${summary.subject} is not valid before ${notBefore} (checked at ${isoSeconds(at)})`];
    }
    return [];
  });
  if (problems.length > 0) return fail('certificate validity', problems.join('; '));
  const leafExpiry = isoSeconds(certs[0].summary.notAfter);
  return pass('certificate validity', `all ${certs.length} certificates valid at ${isoSeconds(at)} (leaf expires ${leafExpiry})`);
}

function checkAge(timestamp: number, at: Date, maxAgeSeconds: number | undefined, leaf: Cert): Check {
  const made = new Date(timestamp);
  const lifetimeSeconds = (leaf.summary.notAfter.getTime() - leaf.summary.notBefore.getTime()) / 1000;
  const limit = maxAgeSeconds ?? lifetimeSeconds;
  const source = maxAgeSeconds === undefined ? "the leaf certificate's lifetime" : '--max-age';
  const ageSeconds = Math.round((at.getTime() - timestamp) / 1000);
  if (at.getTime() - timestamp > limit * 1000) {
    return fail('document age', `the document was made at ${isoSeconds(made)}, ${ageSeconds} s before ${isoSeconds(at)}; at most ${limit} s (${source}) is accepted`);
  }
  if (timestamp - at.getTime() > FUTURE_SKEW_MS) {
    return fail('document age', `the document claims ${isoSeconds(made)}, later than ${isoSeconds(at)} by more than ${FUTURE_SKEW_MS / 1000} s`);
  }
  return pass('document age', `made at ${isoSeconds(made)}, ${Math.max(ageSeconds, 0)} s old (at most ${limit} s, ${source})`);
}

const DEBUG_PCRS = [0, 1, 2];

/** PCR0–2 measure the image; a debug-mode enclave reports them as zeros (or a document lacks them). */
function checkDebugMode(pcrs: Map<number, Uint8Array>, allowDebug: boolean): Check {
  const measured = DEBUG_PCRS.some((index) => pcrs.get(index)?.some((byte) => byte !== 0));
  if (measured) return pass('debug mode', 'not a debug-mode enclave: PCR0, PCR1 and PCR2 are measured');
  const why = 'PCR0, PCR1 and PCR2 are all zero: the enclave runs in debug mode, where the host can read its memory and its PCRs prove nothing about its code';
  return allowDebug ? pass('debug mode', `${why} (accepted: --allow-debug)`) : fail('debug mode', `${why}; refused (--allow-debug, sdk allowDebug: true, accepts it for development)`);
}

function compareBytes(name: string, expected: Uint8Array, actual: Uint8Array | null): Check {
  if (actual === null) return fail(name, `the document has no ${name} (expected ${hex(expected)})`);
  if (!bytesEqual(expected, actual)) {
    return fail(name, `${name} mismatch: expected ${hex(expected)}, got ${hex(actual)}`);
  }
  return pass(name, `matches ${hex(expected)}`);
}

/** The document's public_key is a DER SubjectPublicKeyInfo (protocol/public-key.ts) or, from older enclaves, the raw key. */
function comparePublicKey(expected: Uint8Array, actual: Uint8Array | null): Check {
  if (actual === null) return fail('public key', `the document has no public key (expected ${hex(expected)})`);
  if (!publicKeyMatches(expected, actual)) {
    return fail('public key', `public key mismatch: expected ${hex(expected)}, got ${hex(actual)}`);
  }
  const form = ed25519KeyFromSpki(actual) ? ' (as an Ed25519 SubjectPublicKeyInfo)' : '';
  return pass('public key', `matches ${hex(expected)}${form}`);
}

/** Runs a check, turning an unexpected exception into a failure of that check. */
function check(name: string, run: () => Check): Check {
  try {
    return run();
  } catch (error) {
    return fail(name, errorMessage(error));
  }
}

async function checkAsync(name: string, run: () => Promise<Check>): Promise<Check> {
  try {
    return await run();
  } catch (error) {
    return fail(name, errorMessage(error));
  }
}

async function attemptAsync<T>(run: () => Promise<T>): Promise<T | Error> {
  try {
    return await run();
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

function attempt<T>(run: () => T): T | Error {
  try {
    return run();
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

function pass(name: string, detail: string): Check {
  return { name, ok: true, detail };
}

function fail(name: string, detail: string): Check {
  return { name, ok: false, detail };
}

function isoSeconds(date: Date): string {
  return date.toISOString().replace('.000Z', 'Z');
}

const hex = toHex;

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
