import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedNitroProvider, simulatedRootPath } from '../../enclave/attestation/simulated-nsm.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { ed25519SpkiDer } from '../../protocol/public-key.js';
import { encodeUserData } from '../../protocol/user-data.js';
import { verifyAttestation, type VerificationResult } from '../../protocol/attestation/verify.js';
import { handBuilt } from '../helpers/attestation-chain.js';

/**
 * What verifyAttestation (protocol/attestation/verify.ts) tells its user, check by check:
 * `agent-verify` and the web console print these details, so a check that passes says what
 * it found, not only that it passed. attestation-verify.test.ts holds the refusals.
 */
const fixture = new Uint8Array(
  Buffer.from(readFileSync(new URL('../fixtures/aws-nitro-sample-2024-09-17.b64', import.meta.url), 'utf8').trim(), 'base64'),
);
const AT = new Date(1726606091 * 1000);
const NONCE = Buffer.from('0000000000000000000000000000000000000001', 'hex');
const PCR3 = Buffer.from('671ca1e328f75015b2aeee60639cc5252bc835d8bb690444d1f8e2bf4260f73dc1b71e07a14a770c7d0becac6eb3b53f', 'hex');
const LEAF = 'CN=i-0bbf1bfe232b8c2ce-enc019201afdaee4f17.us-east-1.aws';
const detail = (result: VerificationResult, name: string) => result.checks.find((c) => c.name === name)?.detail;
const failed = (result: VerificationResult) => result.checks.filter((c) => !c.ok).map((c) => c.name);
const ROOT_FINGERPRINT = '64:1A:03:21:A3:E2:44:EF:E4:56:46:31:95:D6:06:31:7E:D7:CD:CC:3C:17:56:E0:98:93:F3:C6:8F:79:BB:5B';

describe('the details of a document that passes', () => {
  it('name what each check found in the real AWS sample', async () => {
    const result = await verifyAttestation(fixture, { at: AT, nonce: NONCE, pcrs: { 3: PCR3 }, publicKey: Buffer.from('dummy'), allowDebug: true });
    expect(result.ok).toBe(true);
    expect(result.checkedAt).toBe(AT);
    expect(Object.fromEntries(result.checks.map((c) => [c.name, c.detail]))).toEqual({
      structure: 'COSE_Sign1/ES384, module i-0bbf1bfe232b8c2ce-enc019201afdaee4f17, 16 PCRs, 4 CA certificate(s)',
      signature: `ES384 signature verifies with the key of ${LEAF}`,
      'certificate chain': `${LEAF} ← CN=i-0bbf1bfe232b8c2ce.us-east-1.aws.nitro-enclaves ← CN=c71a34b77bd47e92.zonal.us-east-1.aws.nitro-enclaves ` +
        `← CN=651a12adde5982f3.us-east-1.aws.nitro-enclaves ← CN=aws.nitro-enclaves (pinned root fingerprint ${ROOT_FINGERPRINT})`,
      'certificate validity': 'all 5 certificates valid at 2024-09-17T20:48:11Z (leaf expires 2024-09-17T23:42:51Z)',
      'document age': "made at 2024-09-17T20:47:10.288Z, 61 s old (at most 10803 s, the leaf certificate's lifetime)",
      'debug mode': 'PCR0, PCR1 and PCR2 are all zero: the enclave runs in debug mode, where the host can read its memory and its PCRs prove nothing about its code (accepted: --allow-debug)',
      nonce: `matches ${NONCE.toString('hex')}`,
      PCR3: `matches ${PCR3.toString('hex')}`,
      'public key': 'matches 64756d6d79',
    });
    expect(result.checks.every((c) => c.ok)).toBe(true);
  });

  it('give the age limit from --max-age when one is given, and a document from slightly ahead of the clock as 0 s old', async () => {
    const result = await verifyAttestation(fixture, { at: AT, allowDebug: true, maxAgeSeconds: 120 });
    expect(result.checks.find((c) => c.name === 'document age')).toEqual({
      name: 'document age', ok: true, detail: 'made at 2024-09-17T20:47:10.288Z, 61 s old (at most 120 s, --max-age)',
    });
    // The NSM's clock is not ours: a document up to 5 minutes ahead is accepted, as made now.
    const ahead = await verifyAttestation(fixture, { at: new Date(MADE - 300_000), allowDebug: true });
    expect(detail(ahead, 'document age')).toBe("made at 2024-09-17T20:47:10.288Z, 0 s old (at most 10803 s, the leaf certificate's lifetime)");
  });
});

const MADE = Date.parse('2024-09-17T20:47:10.288Z');

describe('the limits of time', () => {
  it('accepts a document exactly --max-age old or exactly 5 minutes ahead, and not a millisecond more', async () => {
    const age = (at: number, maxAgeSeconds?: number) => verifyAttestation(fixture, { at: new Date(at), allowDebug: true, ...(maxAgeSeconds ? { maxAgeSeconds } : {}) });
    expect(failed(await age(MADE + 60_000, 60))).toEqual([]);
    expect(failed(await age(MADE + 60_001, 60))).toEqual(['document age']);
    expect(detail(await age(MADE + 60_001, 60), 'document age')).toBe(
      'the document was made at 2024-09-17T20:47:10.288Z, 60 s before 2024-09-17T20:48:10.289Z; at most 60 s (--max-age) is accepted',
    );
    expect(detail(await age(MADE - 300_000), 'document age')).toMatch(/^made at/);
    expect(detail(await age(MADE - 300_001), 'document age')).toBe(
      'the document claims 2024-09-17T20:47:10.288Z, later than 2024-09-17T20:42:10.287Z by more than 300 s',
    );
  });

  it('names every certificate out of its validity, and refuses a verification time that is no date', async () => {
    const late = await verifyAttestation(fixture, { at: new Date('2050-01-01T00:00:00Z'), allowDebug: true });
    const problems = detail(late, 'certificate validity')!.split('; ');
    expect(problems).toHaveLength(5);
    expect(problems[0]).toBe(`certificate ${LEAF} expired at 2024-09-17T23:42:51Z (checked at 2050-01-01T00:00:00Z)`);
    expect(problems[4]).toMatch(/^certificate CN=aws\.nitro-enclaves expired at 2049-10-28T14:28:05Z/);
    // From the leaf up to the root, as the chain runs.
    expect(problems.map((p) => p.split(' ')[1])).toEqual([
      LEAF, 'CN=i-0bbf1bfe232b8c2ce.us-east-1.aws.nitro-enclaves', 'CN=c71a34b77bd47e92.zonal.us-east-1.aws.nitro-enclaves',
      'CN=651a12adde5982f3.us-east-1.aws.nitro-enclaves', 'CN=aws.nitro-enclaves',
    ]);
    const nowhen = await verifyAttestation(fixture, { at: new Date(Number.NaN), allowDebug: true });
    expect(nowhen.ok).toBe(false);
    expect(detail(nowhen, 'certificate validity')).toBe('the verification time is not a valid date');
  });

  it('takes a certificate as valid from its first second to its last', async () => {
    for (const at of ['2024-09-17T20:42:48Z', '2024-09-17T23:42:51Z']) {
      expect(failed(await verifyAttestation(fixture, { at: new Date(at), allowDebug: true })), at).toEqual([]);
    }
  });
});

describe('hand-built documents', () => {
  it('fail the signature check when the leaf key is not EC P-384, naming the key', async () => {
    for (const [leafKey, has] of [['P-256', 'an EC P-256'], ['RSA', 'a non-EC (or unknown curve)']] as const) {
      const { document, rootPem } = await handBuilt({ leafKey });
      const result = await verifyAttestation(document, { rootPem });
      expect(failed(result), leafKey).toEqual(['signature']);
      expect(detail(result, 'signature')).toBe(`CN=test leaf has ${has} key; ES384 needs EC P-384`);
    }
  });

  it('name every fault of a chain, one after another', async () => {
    const faulty = await handBuilt({ middleIsCa: false, rootPathLength: 0 });
    expect(detail(await verifyAttestation(faulty.document, { rootPem: faulty.rootPem }), 'certificate chain')).toBe(
      'CN=middle is not a CA (basicConstraints cA is not set); CN=test root allows 0 CA certificate(s) below it (pathLenConstraint), the chain has 1',
    );
  });

  it('fail the chain check on a certificate that names its issuer but is signed by another key', async () => {
    const { document, rootPem } = await handBuilt({ leafSignedByStranger: true });
    const result = await verifyAttestation(document, { rootPem });
    expect(failed(result)).toEqual(['certificate chain']);
    expect(detail(result, 'certificate chain')).toBe('signature on CN=test leaf does not verify with the key of CN=middle');
  });

  it('count PCRs with any byte not zero as measured, say so, and name a public key the document lacks', async () => {
    const sparse = new Map([0, 1, 2].map((i) => [i, Uint8Array.from({ length: 48 }, (_, b) => (b === 0 ? 1 : 0))]));
    const { document, rootPem } = await handBuilt({ pcrs: sparse });
    const result = await verifyAttestation(document, { rootPem, publicKey: new Uint8Array(32).fill(5) });
    expect(failed(result)).toEqual(['public key']);
    expect(detail(result, 'debug mode')).toBe('not a debug-mode enclave: PCR0, PCR1 and PCR2 are measured');
    expect(detail(result, 'public key')).toBe(`the document has no public key (expected ${'05'.repeat(32)})`);
  });

  it('count a document without PCR0, PCR1 and PCR2 as from a debug-mode enclave', async () => {
    const { document, rootPem } = await handBuilt({ pcrs: new Map([[3, new Uint8Array(48).fill(7)]]) });
    const result = await verifyAttestation(document, { rootPem });
    expect(failed(result)).toEqual(['debug mode']);
    expect(detail(result, 'debug mode')).toMatch(/^PCR0, PCR1 and PCR2 are all zero: .*; refused \(--allow-debug, sdk allowDebug: true, accepts it for development\)$/);
  });
});

describe('certificates that are not certificates', () => {
  it('fail the structure check, naming which', async () => {
    const { decodeCoseSign1, decodeNitroDocument, encodeCoseSign1, encodeNitroDocument } = await import('../../protocol/cose.js');
    const withPayload = (change: (doc: ReturnType<typeof decodeNitroDocument>) => void) => {
      const sign1 = decodeCoseSign1(fixture);
      const doc = decodeNitroDocument(sign1.payload);
      change(doc);
      return encodeCoseSign1({ ...sign1, payload: encodeNitroDocument(doc) });
    };
    const leaf = await verifyAttestation(withPayload((doc) => { doc.certificate = Uint8Array.of(0x30, 0x03, 1, 2, 3); }), { at: AT, allowDebug: true });
    expect(leaf.checks).toEqual([{ name: 'structure', ok: false, detail: expect.stringMatching(/^certificate is not a valid X\.509 certificate: /) }]);
    const bundle = await verifyAttestation(withPayload((doc) => { doc.cabundle[2] = Uint8Array.of(0x30, 0x03, 1, 2, 3); }), { at: AT, allowDebug: true });
    expect(bundle.checks).toEqual([{ name: 'structure', ok: false, detail: expect.stringMatching(/^cabundle\[2\] is not a valid X\.509 certificate: /) }]);
  });
});

describe('the keys a document binds', () => {
  let dir: string;
  let rootPem: string;
  let provider: SimulatedNitroProvider;
  const pcrs = new Map([0, 1, 2].map((i) => [i, new Uint8Array(48).fill(0xa0 + i)]));
  const teeKey = new Uint8Array(32).fill(7);
  const operatorKey = new Uint8Array(32).fill(1);
  const boxPublicKey = new Uint8Array(32).fill(2);
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'attestation-verify-edges-'));
    provider = new SimulatedNitroProvider({ blobs: new FsBlobStore(dir), pcrs });
    await provider.attest({ publicKey: teeKey });
    rootPem = await readFile(simulatedRootPath(dir), 'utf8');
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('match the expected Ed25519 key in its SubjectPublicKeyInfo, and the operator and box keys in user_data', async () => {
    const document = await provider.attest({ publicKey: teeKey, userData: encodeUserData({ operatorKey, boxPublicKey }) });
    const result = await verifyAttestation(document, { rootPem, publicKey: teeKey, operatorKey, boxPublicKey });
    expect(failed(result)).toEqual([]);
    expect(result.document!.publicKey).toEqual(ed25519SpkiDer(teeKey));
    expect(result.checks.slice(-3)).toEqual([
      { name: 'public key', ok: true, detail: `matches ${hex(teeKey)} (as an Ed25519 SubjectPublicKeyInfo)` },
      { name: 'operator key', ok: true, detail: `matches ${hex(operatorKey)}` },
      { name: 'box key', ok: true, detail: `matches ${hex(boxPublicKey)}` },
    ]);
    const other = new Uint8Array(32).fill(3);
    const wrong = await verifyAttestation(document, { rootPem, operatorKey: other, boxPublicKey: other });
    expect(wrong.checks.slice(-2)).toEqual([
      { name: 'operator key', ok: false, detail: `operator key in user_data mismatch: expected ${hex(other)}, got ${hex(operatorKey)}` },
      { name: 'box key', ok: false, detail: `box key in user_data mismatch: expected ${hex(other)}, got ${hex(boxPublicKey)}` },
    ]);
  });

  it('refuse both user_data keys, saying why, when user_data is not ours', async () => {
    const document = await provider.attest({ publicKey: teeKey, userData: Buffer.from('operator') });
    const result = await verifyAttestation(document, { rootPem, operatorKey, boxPublicKey });
    expect(result.checks.slice(-2)).toEqual([
      { name: 'operator key', ok: false, detail: 'user_data is not UTF-8 JSON' },
      { name: 'box key', ok: false, detail: 'user_data is not UTF-8 JSON' },
    ]);
    expect(result.document!.userData).toEqual(new Uint8Array(Buffer.from('operator')));
  });
});
