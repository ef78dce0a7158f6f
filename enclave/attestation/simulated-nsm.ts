/**
 * A stand-in for the Nitro Secure Module when running outside Nitro: it signs attestation
 * documents in exactly the AWS format, under a local P-384 CA instead of AWS's.
 *
 *   simulated root CA → simulated intermediate CA → short-lived leaf (signs documents)
 *
 * The CA is kept in the host store (it stands in for AWS's hardware, which the host runs
 * too) and reused across restarts, so clients can pin `$DATA_DIR/simulated-root.pem` of
 * the host store once. Only the intermediate's private key is stored; the root's key
 * signs the intermediate once and is then discarded, as an offline root would be. Every
 * certificate subject says it is simulated.
 */
import { randomBytes, webcrypto } from 'node:crypto';
import { join } from 'node:path';
// @peculiar/x509 2.x resolves its classes through tsyringe, which needs the Reflect
// metadata polyfill loaded first.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { signNitroDocument } from '../../protocol/cose.js';
import { ed25519SpkiDer } from '../../protocol/public-key.js';
import { readWhole, type BlobStore } from '../../common/blob-store.js';
import type { AttestationProvider, AttestationRequest } from './provider.js';

const SIMULATED_ROOT_FILE = 'simulated-root.pem';
const INTERMEDIATE_CERT_FILE = 'simulated-intermediate.pem';
const INTERMEDIATE_KEY_FILE = 'simulated-intermediate-key.pem';

const SUBJECT_SUFFIX = 'OU=SIMULATED - not an AWS Nitro Enclave, O=private-agent-service';
const HOUR_MS = 60 * 60 * 1000;
const CA_LIFETIME_MS = 20 * 365 * 24 * HOUR_MS;
/** Like the NSM's own leaf certificates: a few hours. */
const LEAF_LIFETIME_MS = 3 * HOUR_MS;
/** Renew early enough that a document stays verifiable for a while after it is issued. */
const LEAF_RENEW_BEFORE_MS = 1 * HOUR_MS;
/** Backdate notBefore so a verifier whose clock lags slightly still accepts new certificates. */
const CLOCK_SKEW_MS = 5 * 60 * 1000;
const KEY_ALGORITHM = { name: 'ECDSA', namedCurve: 'P-384' };
/**
 * A real NSM reports PCR0 to PCR15 in every document, unused ones as zeros; strict
 * verifiers (Evervault's requires 0, 1, 2 and 8) reject documents with fewer.
 */
export const NSM_PCR_COUNT = 16;
const PCR_LENGTH = 48;
const SIGNING_ALGORITHM = { name: 'ECDSA', hash: 'SHA-384' };

export type PcrValues = Map<number, Uint8Array> | Record<number, Uint8Array>;

export interface SimulatedAttestationRequest extends AttestationRequest {
  pcrs: PcrValues;
}

export interface SimulatedNsmOptions {
  /** Where the CA is kept: the host store. */
  blobs: BlobStore;
  /** Clock, for tests of certificate renewal. */
  now?: () => Date;
}

interface Issuer {
  certificate: x509.X509Certificate;
  privateKey: webcrypto.CryptoKey;
}

interface CertificateAuthority {
  rootDer: Uint8Array;
  rootPem: string;
  intermediate: Issuer;
}

interface Leaf {
  notAfter: number;
  issued: Promise<Issuer>;
}

/** Path of the root certificate clients should pin, in the host store's folder (DATA_DIR). */
export function simulatedRootPath(dataDir: string): string {
  return join(dataDir, SIMULATED_ROOT_FILE);
}

export class SimulatedNsm {
  /** Like the NSM's module id, unique per running instance. */
  readonly moduleId = `simulated-${randomBytes(8).toString('hex')}`;
  private ca?: Promise<CertificateAuthority>;
  private leaf?: Leaf;
  private readonly now: () => Date;

  constructor(private readonly options: SimulatedNsmOptions) {
    this.now = options.now ?? (() => new Date());
  }

  /** The root clients must pin (also at `simulatedRootPath(DATA_DIR)` of the host store); creates the CA if needed. */
  async rootCertificatePem(): Promise<string> {
    const ca = await this.certificateAuthority(this.now().getTime());
    return ca.rootPem;
  }

  async attest(request: SimulatedAttestationRequest): Promise<Uint8Array> {
    const now = this.now().getTime();
    const ca = await this.certificateAuthority(now);
    if (!this.leaf || this.leaf.notAfter - now < LEAF_RENEW_BEFORE_MS) {
      const renewal: Leaf = { notAfter: now + LEAF_LIFETIME_MS, issued: issueLeaf(ca, this.moduleId, now) };
      // A failed issuance must not stay cached until the renewal window.
      renewal.issued.catch(() => {
        if (this.leaf === renewal) this.leaf = undefined;
      });
      this.leaf = renewal;
    }
    const leaf = await this.leaf.issued;
    return signNitroDocument(
      {
        moduleId: this.moduleId,
        digest: 'SHA384',
        timestamp: now,
        pcrs: request.pcrs instanceof Map ? request.pcrs : pcrMap(request.pcrs),
        certificate: new Uint8Array(leaf.certificate.rawData),
        cabundle: [ca.rootDer, new Uint8Array(ca.intermediate.certificate.rawData)],
        publicKey: request.publicKey,
        userData: request.userData ?? null,
        nonce: request.nonce ?? null,
      },
      async (toBeSigned) =>
        new Uint8Array(await webcrypto.subtle.sign(SIGNING_ALGORITHM, leaf.privateKey, toBeSigned)),
    );
  }

  private certificateAuthority(now: number): Promise<CertificateAuthority> {
    this.ca ??= loadOrCreateCa(this.options.blobs, now).catch((error: unknown) => {
      this.ca = undefined; // let the next call retry instead of caching the failure
      throw error;
    });
    return this.ca;
  }
}

/**
 * The `TEE_MODE=simulated` provider: a SimulatedNsm attesting fixed PCR values, shaped like
 * a real NSM's documents: PCR0 to PCR15 (those not measured here are zeros) and the key
 * as a DER SubjectPublicKeyInfo.
 */
export class SimulatedNitroProvider implements AttestationProvider {
  readonly teeName = 'simulated';
  private readonly nsm: SimulatedNsm;
  private readonly pcrs: Map<number, Uint8Array>;

  constructor(options: SimulatedNsmOptions & { pcrs: PcrValues }) {
    this.nsm = new SimulatedNsm(options);
    const given = options.pcrs instanceof Map ? new Map(options.pcrs) : pcrMap(options.pcrs);
    if (given.size === 0) throw new Error('at least one PCR is required');
    for (const [index, value] of given) {
      if (!Number.isInteger(index) || index < 0 || index > 31 || value.length !== PCR_LENGTH) {
        throw new Error(`PCR${index} must have an index in 0..31 and a 48-byte SHA-384 value`);
      }
    }
    this.pcrs = new Map();
    const highest = Math.max(NSM_PCR_COUNT - 1, ...given.keys());
    for (let index = 0; index <= highest; index++) this.pcrs.set(index, given.get(index) ?? new Uint8Array(PCR_LENGTH));
  }

  attest(request: AttestationRequest): Promise<Uint8Array> {
    return this.nsm.attest({ ...request, publicKey: ed25519SpkiDer(request.publicKey), pcrs: this.pcrs });
  }

  rootCertificatePem(): Promise<string> {
    return this.nsm.rootCertificatePem();
  }
}

function pcrMap(record: Record<number, Uint8Array>): Map<number, Uint8Array> {
  return new Map(Object.entries(record).map(([index, value]) => [Number(index), value]));
}

async function loadOrCreateCa(blobs: BlobStore, now: number): Promise<CertificateAuthority> {
  const rootPem = (await readWhole(blobs, SIMULATED_ROOT_FILE))?.toString('utf8');
  if (rootPem === undefined) return createCa(blobs, now);

  const [certificatePem, keyPem] = await Promise.all(
    [INTERMEDIATE_CERT_FILE, INTERMEDIATE_KEY_FILE].map(async (file) => {
      const content = (await readWhole(blobs, file))?.toString('utf8');
      if (content === undefined) {
        throw new Error(`the host store has ${SIMULATED_ROOT_FILE} but no ${file}; remove the simulated-* files to start a new CA`);
      }
      return content;
    }),
  );
  const certificate = new x509.X509Certificate(certificatePem);
  if (certificate.notAfter.getTime() < now + LEAF_LIFETIME_MS) {
    throw new Error(
      `the simulated intermediate CA in the host store expires at ${certificate.notAfter.toISOString()}; ` +
        'remove the simulated-* files to start a new CA (clients must then pin the new root)',
    );
  }
  const privateKey = await webcrypto.subtle.importKey(
    'pkcs8',
    x509.PemConverter.decodeFirst(keyPem),
    KEY_ALGORITHM,
    false,
    ['sign'],
  );
  const rootDer = new Uint8Array(new x509.X509Certificate(rootPem).rawData);
  return { rootDer, rootPem, intermediate: { certificate, privateKey } };
}

async function createCa(blobs: BlobStore, now: number): Promise<CertificateAuthority> {
  const validity = { notBefore: new Date(now - CLOCK_SKEW_MS), notAfter: new Date(now + CA_LIFETIME_MS) };
  const rootKeys = await generateKeys(false);
  const root = await x509.X509CertificateGenerator.createSelfSigned(
    {
      name: `CN=Simulated TEE Root CA, ${SUBJECT_SUFFIX}`,
      keys: rootKeys,
      ...validity,
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [...caExtensions(1), await x509.SubjectKeyIdentifierExtension.create(rootKeys.publicKey, false, webcrypto)],
    },
    webcrypto,
  );
  const intermediateKeys = await generateKeys(true);
  const intermediate = await x509.X509CertificateGenerator.create(
    {
      subject: `CN=Simulated TEE Intermediate CA, ${SUBJECT_SUFFIX}`,
      issuer: root.subjectName,
      publicKey: intermediateKeys.publicKey,
      signingKey: rootKeys.privateKey,
      ...validity,
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [...caExtensions(0), ...(await keyIdentifiers(intermediateKeys.publicKey, rootKeys.publicKey))],
    },
    webcrypto,
  );

  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', intermediateKeys.privateKey);
  await blobs.put(INTERMEDIATE_KEY_FILE, Buffer.from(x509.PemConverter.encode(pkcs8, 'PRIVATE KEY')));
  await blobs.put(INTERMEDIATE_CERT_FILE, Buffer.from(intermediate.toString('pem')));
  // Written last: its presence is what marks the CA as complete.
  await blobs.put(SIMULATED_ROOT_FILE, Buffer.from(root.toString('pem')));

  return {
    rootDer: new Uint8Array(root.rawData),
    rootPem: root.toString('pem'),
    intermediate: { certificate: intermediate, privateKey: intermediateKeys.privateKey },
  };
}

async function issueLeaf(ca: CertificateAuthority, moduleId: string, now: number): Promise<Issuer> {
  const keys = await generateKeys(false);
  const certificate = await x509.X509CertificateGenerator.create(
    {
      subject: `CN=${moduleId}, ${SUBJECT_SUFFIX}`,
      issuer: ca.intermediate.certificate.subjectName,
      publicKey: keys.publicKey,
      signingKey: ca.intermediate.privateKey,
      notBefore: new Date(now - CLOCK_SKEW_MS),
      notAfter: new Date(now + LEAF_LIFETIME_MS),
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        ...(await keyIdentifiers(keys.publicKey, ca.intermediate.certificate.publicKey)),
      ],
    },
    webcrypto,
  );
  return { certificate, privateKey: keys.privateKey };
}

function caExtensions(pathLength: number): x509.Extension[] {
  return [
    new x509.BasicConstraintsExtension(true, pathLength, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
  ];
}

/**
 * Subject and authority key identifiers, as AWS's own chain carries them: OpenSSL's
 * `-x509_strict` refuses a CA without SKI and any non-self-signed certificate without AKI.
 * (A CA created before they were added is reused as it is; delete its simulated-* files in
 * the host store for a new one.)
 */
async function keyIdentifiers(subjectKey: webcrypto.CryptoKey, issuerKey: webcrypto.CryptoKey | x509.PublicKey): Promise<x509.Extension[]> {
  return [
    await x509.SubjectKeyIdentifierExtension.create(subjectKey, false, webcrypto),
    await x509.AuthorityKeyIdentifierExtension.create(issuerKey, false, webcrypto),
  ];
}

function generateKeys(extractable: boolean): Promise<webcrypto.CryptoKeyPair> {
  return webcrypto.subtle.generateKey(KEY_ALGORITHM, extractable, ['sign', 'verify']);
}
