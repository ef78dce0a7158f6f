import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { signNitroDocument } from '../../protocol/cose.js';

/**
 * A document signed by a chain built here (root → middle → leaf), with its pieces chosen by
 * name: whether the middle is a CA and its key usage, the root's pathLenConstraint, key
 * identifiers (middle's subject, leaf's authority; hex), the leaf's validity, the
 * document's timestamp and PCRs (by default measured, i.e. not a debug enclave), and the
 * leaf's key (by default EC P-384, the only one ES384 allows; the document is then not
 * signed, as no verifier should get as far as checking it).
 */
export async function handBuilt(options: {
  middleIsCa?: boolean;
  middleKeyUsage?: number;
  keyIdentifiers?: { middle: string; leafAuthority: string };
  rootPathLength?: number;
  timestamp?: number;
  leafFrom?: number;
  leafLifetimeMs?: number;
  pcrs?: Map<number, Uint8Array>;
  leafKey?: 'P-384' | 'P-256' | 'RSA';
  /** The leaf names the middle as its issuer but is signed by another key. */
  leafSignedByStranger?: boolean;
}): Promise<{ document: Uint8Array; rootPem: string }> {
  const signing = { name: 'ECDSA', hash: 'SHA-384' };
  const newKeys = () => webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-384' }, false, ['sign', 'verify']);
  const certSign = new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true);
  const now = Date.now();
  const [rootKeys, middleKeys] = [await newKeys(), await newKeys()];
  const leafKeys = options.leafKey === 'RSA'
    ? await webcrypto.subtle.generateKey({ name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }, false, ['sign', 'verify'])
    : await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: options.leafKey ?? 'P-384' }, false, ['sign', 'verify']);
  const root = await x509.X509CertificateGenerator.createSelfSigned(
    {
      name: 'CN=test root', keys: rootKeys, signingAlgorithm: signing,
      notBefore: new Date(now - 86_400_000), notAfter: new Date(now + 86_400_000),
      extensions: [new x509.BasicConstraintsExtension(true, options.rootPathLength ?? 1, true), certSign],
    },
    webcrypto,
  );
  const middle = await x509.X509CertificateGenerator.create(
    {
      subject: 'CN=middle', issuer: root.subjectName, publicKey: middleKeys.publicKey, signingKey: rootKeys.privateKey, signingAlgorithm: signing,
      notBefore: new Date(now - 86_400_000), notAfter: new Date(now + 86_400_000),
      extensions: [
        new x509.BasicConstraintsExtension(options.middleIsCa ?? true, undefined, true),
        options.middleKeyUsage === undefined ? certSign : new x509.KeyUsagesExtension(options.middleKeyUsage, true),
        ...(options.keyIdentifiers ? [new x509.SubjectKeyIdentifierExtension(options.keyIdentifiers.middle)] : []),
      ],
    },
    webcrypto,
  );
  const leafFrom = options.leafFrom ?? now - 60_000;
  const leaf = await x509.X509CertificateGenerator.create(
    {
      subject: 'CN=test leaf', issuer: middle.subjectName, publicKey: leafKeys.publicKey, signingAlgorithm: signing,
      signingKey: options.leafSignedByStranger ? (await newKeys()).privateKey : middleKeys.privateKey,
      notBefore: new Date(leafFrom), notAfter: new Date(leafFrom + (options.leafLifetimeMs ?? 3 * 3600_000)),
      extensions: options.keyIdentifiers ? [new x509.AuthorityKeyIdentifierExtension(options.keyIdentifiers.leafAuthority)] : [],
    },
    webcrypto,
  );
  const document = await signNitroDocument(
    {
      moduleId: 'test',
      digest: 'SHA384',
      timestamp: options.timestamp ?? now,
      pcrs: options.pcrs ?? new Map([0, 1, 2].map((i) => [i, new Uint8Array(48).fill(0xa0 + i)])),
      certificate: new Uint8Array(leaf.rawData),
      cabundle: [new Uint8Array(root.rawData), new Uint8Array(middle.rawData)],
      publicKey: null,
      userData: null,
      nonce: null,
    },
    async (data) => (options.leafKey === undefined || options.leafKey === 'P-384'
      ? new Uint8Array(await webcrypto.subtle.sign(signing, leafKeys.privateKey, data))
      : new Uint8Array(96)),
  );
  return { document, rootPem: root.toString('pem') };
}
