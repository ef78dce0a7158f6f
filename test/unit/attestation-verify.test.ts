import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AWS_NITRO_ROOT_G1_PEM } from '../../protocol/attestation/aws-root.js';
import {
  AttestationFormatError,
  decodeCoseSign1,
  decodeNitroDocument,
  encodeCoseSign1,
  encodeNitroDocument,
  type NitroDocument,
} from '../../protocol/cose.js';
import { verifyAttestation, type VerificationResult, type VerifyOptions } from '../../protocol/attestation/verify.js';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { handBuilt } from '../helpers/attestation-chain.js';
import { SimulatedNsm, simulatedRootPath } from '../../enclave/attestation/simulated-nsm.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';

// Expected values from test/fixtures/aws-nitro-sample.md.
const fixture = new Uint8Array(
  Buffer.from(readFileSync(new URL('../fixtures/aws-nitro-sample-2024-09-17.b64', import.meta.url), 'utf8').trim(), 'base64'),
);
const AT = new Date(1726606091 * 1000);
const NONCE = Buffer.from('0000000000000000000000000000000000000001', 'hex');
const PCR3 = Buffer.from(
  '671ca1e328f75015b2aeee60639cc5252bc835d8bb690444d1f8e2bf4260f73dc1b71e07a14a770c7d0becac6eb3b53f',
  'hex',
);
const PCR4 = Buffer.from(
  'd352cfa31b8dc5f4856c9fa8181b19ed12f5da23883ac4ec729530f50dc1d37f1ac3876a7af39bd4de7a2aead14d14cb',
  'hex',
);
// The sample comes from a debug-mode enclave (PCR0–2 all zero): every check but that one is exercised with allowDebug.
const expected: VerifyOptions = { at: AT, nonce: NONCE, pcrs: { 3: PCR3, 4: PCR4 }, publicKey: Buffer.from('dummy'), allowDebug: true };

function checkOf(result: VerificationResult, name: string) {
  const found = result.checks.find((c) => c.name === name);
  if (!found) throw new Error(`no "${name}" check in ${JSON.stringify(result.checks)}`);
  return found;
}

function failedChecks(result: VerificationResult): string[] {
  return result.checks.filter((c) => !c.ok).map((c) => c.name);
}

/** Re-encodes the fixture with its payload changed, keeping the original signature. */
function withPayload(change: (doc: NitroDocument) => void): Uint8Array {
  const sign1 = decodeCoseSign1(fixture);
  const doc = decodeNitroDocument(sign1.payload);
  change(doc);
  return encodeCoseSign1({ ...sign1, payload: encodeNitroDocument(doc) });
}

describe('verifyAttestation on a real AWS Nitro document', () => {
  it('verifies at 1726606091 with the expected nonce, PCR3, PCR4 and public key', async () => {
    const result = await verifyAttestation(fixture, expected);
    expect(failedChecks(result)).toEqual([]);
    expect(result.ok).toBe(true);
    expect(result.checks.map((c) => c.name)).toEqual([
      'structure',
      'signature',
      'certificate chain',
      'certificate validity',
      'document age',
      'debug mode',
      'nonce',
      'PCR3',
      'PCR4',
      'public key',
    ]);
    const doc = result.document!;
    expect(doc.moduleId).toBe('i-0bbf1bfe232b8c2ce-enc019201afdaee4f17');
    expect(doc.timestamp.toISOString()).toBe('2024-09-17T20:47:10.288Z');
    expect(doc.pcrs[3]).toBe(PCR3.toString('hex'));
    expect(doc.pcrs[0]).toBe('00'.repeat(48));
    expect(Object.keys(doc.pcrs)).toHaveLength(16);
    expect(Buffer.from(doc.publicKey!).toString()).toBe('dummy');
    expect(doc.certificate.notBefore.toISOString()).toBe('2024-09-17T20:42:48.000Z');
    expect(doc.certificate.notAfter.toISOString()).toBe('2024-09-17T23:42:51.000Z');
    expect(checkOf(result, 'certificate chain').detail).toContain('CN=aws.nitro-enclaves');
  });

  it('pins the AWS root by default and accepts the same root passed explicitly', async () => {
    expect((await verifyAttestation(fixture, { at: AT, allowDebug: true })).ok).toBe(true);
    expect((await verifyAttestation(fixture, { at: AT, rootPem: AWS_NITRO_ROOT_G1_PEM, allowDebug: true })).ok).toBe(true);
  });

  it('accepts the tagged COSE_Sign1 form (tag 18)', async () => {
    const tagged = new Uint8Array([0xd2, ...fixture]);
    expect((await verifyAttestation(tagged, expected)).ok).toBe(true);
  });

  it('rejects a flipped signature byte', async () => {
    const sign1 = decodeCoseSign1(fixture);
    const signature = sign1.signature.slice();
    signature[10] ^= 0x01;
    const result = await verifyAttestation(encodeCoseSign1({ ...sign1, signature }), expected);
    expect(result.ok).toBe(false);
    expect(failedChecks(result)).toEqual(['signature']);
    expect(checkOf(result, 'signature').detail).toMatch(/^signature does not verify/);
  });

  it('rejects a changed PCR in the re-encoded payload: signature and PCR both fail', async () => {
    const changed = Buffer.from(PCR4);
    changed[0] ^= 0xff;
    const result = await verifyAttestation(
      withPayload((doc) => doc.pcrs.set(4, changed)),
      expected,
    );
    expect(failedChecks(result)).toEqual(['signature', 'PCR4']);
    expect(checkOf(result, 'PCR4').detail).toBe(
      `PCR4 mismatch: expected ${PCR4.toString('hex')}, got ${changed.toString('hex')}`,
    );
  });

  it('re-encoding the unchanged payload reproduces the signed bytes', async () => {
    expect(Buffer.from(withPayload(() => {})).equals(fixture)).toBe(true);
  });

  it('rejects a time past the leaf certificate expiry, naming the certificate', async () => {
    const at = new Date('2024-09-18T00:00:00Z');
    const result = await verifyAttestation(fixture, { ...expected, at });
    expect(failedChecks(result)).toEqual(['certificate validity', 'document age']);
    expect(checkOf(result, 'certificate validity').detail).toBe(
      'certificate CN=i-0bbf1bfe232b8c2ce-enc019201afdaee4f17.us-east-1.aws expired at 2024-09-17T23:42:51Z ' +
        '(checked at 2024-09-18T00:00:00Z)',
    );
  });

  it('rejects a time before the leaf certificate was issued', async () => {
    const result = await verifyAttestation(fixture, { ...expected, at: new Date('2024-09-17T20:00:00Z') });
    expect(failedChecks(result)).toEqual(['certificate validity', 'document age']);
    expect(checkOf(result, 'document age').detail).toBe('the document claims 2024-09-17T20:47:10.288Z, later than 2024-09-17T20:00:00Z by more than 300 s');
    expect(checkOf(result, 'certificate validity').detail).toContain('is not valid before 2024-09-17T20:42:48Z');
  });

  it('rejects a wrong nonce, a missing PCR and a wrong public key with the values involved', async () => {
    const result = await verifyAttestation(fixture, {
      at: AT,
      nonce: Buffer.from('02', 'hex'),
      pcrs: { 20: PCR3 },
      publicKey: Buffer.from('other'),
      allowDebug: true,
    });
    expect(failedChecks(result)).toEqual(['nonce', 'PCR20', 'public key']);
    expect(checkOf(result, 'nonce').detail).toBe(`nonce mismatch: expected 02, got ${NONCE.toString('hex')}`);
    expect(checkOf(result, 'PCR20').detail).toBe(`the document has no PCR20 (expected ${PCR3.toString('hex')})`);
    expect(checkOf(result, 'public key').detail).toContain('got 64756d6d79');
  });

  it('rejects a document whose nonce was removed', async () => {
    const result = await verifyAttestation(
      withPayload((doc) => (doc.nonce = null)),
      expected,
    );
    expect(checkOf(result, 'nonce').detail).toBe(`the document has no nonce (expected ${NONCE.toString('hex')})`);
  });

  it('rejects a chain with a missing intermediate', async () => {
    const result = await verifyAttestation(
      withPayload((doc) => doc.cabundle.pop()),
      expected,
    );
    expect(checkOf(result, 'certificate chain').detail).toContain(
      'CN=i-0bbf1bfe232b8c2ce-enc019201afdaee4f17.us-east-1.aws was not issued by CN=c71a34b77bd47e92.zonal',
    );
  });

  it('rejects a root PEM that is not a certificate', async () => {
    const result = await verifyAttestation(fixture, { ...expected, rootPem: 'not a certificate' });
    expect(failedChecks(result)).toEqual(['certificate chain']);
    expect(checkOf(result, 'certificate chain').detail).toMatch(/^pinned root is not a valid X.509 certificate/);
  });

  describe('against a simulated root', () => {
    let dataDir: string;
    let simulatedRootPem: string;
    beforeAll(async () => {
      dataDir = await mkdtemp(join(tmpdir(), 'attestation-verify-'));
      await new SimulatedNsm({ blobs: new FsBlobStore(dataDir) }).attest({ pcrs: { 0: new Uint8Array(48) }, publicKey: Buffer.from('k') });
      simulatedRootPem = await readFile(simulatedRootPath(dataDir), 'utf8');
    });
    afterAll(() => rm(dataDir, { recursive: true, force: true }));

    it('rejects the AWS document: the chain does not end at the pinned root', async () => {
      const result = await verifyAttestation(fixture, { ...expected, rootPem: simulatedRootPem });
      // The simulated root was created today, so at the 2024 check time it is not valid yet either.
      expect(failedChecks(result)).toEqual(['certificate chain', 'certificate validity']);
      expect(checkOf(result, 'certificate validity').detail).toContain('CN=Simulated TEE Root CA is not valid before');
      const detail = checkOf(result, 'certificate chain').detail;
      expect(detail).toMatch(/^chain does not end at the pinned root \(fingerprint [0-9A-F:]{95}, CN=Simulated TEE Root CA\)/);
      expect(detail).toContain('64:1A:03:21');
    });
  });

  describe('hand-built chains and documents', () => {
    it('fails the chain check on basicConstraints when an intermediate is not a CA, though every signature verifies', async () => {
      // keyCertSign without cA: OpenSSL's issuer matching accepts it, so only the CA check can catch it.
      const { document, rootPem } = await handBuilt({ middleIsCa: false });
      const result = await verifyAttestation(document, { rootPem });
      expect(failedChecks(result)).toEqual(['certificate chain']);
      expect(checkOf(result, 'certificate chain').detail).toBe('CN=middle is not a CA (basicConstraints cA is not set)');
    });

    it('enforces pathLenConstraint: a root that allows no CA below it cannot vouch for an intermediate', async () => {
      const { document, rootPem } = await handBuilt({ rootPathLength: 0 });
      const result = await verifyAttestation(document, { rootPem });
      expect(failedChecks(result)).toEqual(['certificate chain']);
      expect(checkOf(result, 'certificate chain').detail).toBe('CN=test root allows 0 CA certificate(s) below it (pathLenConstraint), the chain has 1');
      const allowed = await handBuilt({ rootPathLength: 1 });
      expect(failedChecks(await verifyAttestation(allowed.document, { rootPem: allowed.rootPem }))).toEqual([]);
    });

    it('refuses a document older than --max-age, and by default one older than its leaf certificate\'s lifetime', async () => {
      const now = Date.now();
      const hour = 3600_000;
      // A leaf valid for one hour (from 30 minutes ago), a document made 20 minutes ago.
      const fresh = await handBuilt({ timestamp: now - hour / 3, leafFrom: now - hour / 2, leafLifetimeMs: hour });
      expect(failedChecks(await verifyAttestation(fresh.document, { rootPem: fresh.rootPem }))).toEqual([]);
      // Ages are checked at `now`, not at whatever time the (slow, under load) key generation ends.
      const tight = await verifyAttestation(fresh.document, { rootPem: fresh.rootPem, maxAgeSeconds: 600, at: new Date(now) });
      expect(failedChecks(tight)).toEqual(['document age']);
      expect(checkOf(tight, 'document age').detail).toMatch(/^the document was made at .*, 1200 s before .*; at most 600 s \(--max-age\) is accepted$/);
      // Made 70 minutes ago by a leaf still valid now: older than the leaf's one-hour lifetime.
      const stale = await handBuilt({ timestamp: now - (7 * hour) / 6, leafFrom: now - hour / 2, leafLifetimeMs: hour });
      const result = await verifyAttestation(stale.document, { rootPem: stale.rootPem, at: new Date(now) });
      expect(failedChecks(result)).toEqual(['document age']);
      expect(checkOf(result, 'document age').detail).toMatch(/4200 s before .*; at most 3600 s \(the leaf certificate's lifetime\) is accepted$/);
    });

    it('refuses a debug-mode document (PCR0, PCR1, PCR2 all zero) unless allowDebug, and says why', async () => {
      const zeros = new Map([0, 1, 2, 3].map((i) => [i, new Uint8Array(48)]));
      const { document, rootPem } = await handBuilt({ pcrs: zeros });
      const refused = await verifyAttestation(document, { rootPem });
      expect(failedChecks(refused)).toEqual(['debug mode']);
      expect(checkOf(refused, 'debug mode').detail).toMatch(/all zero: the enclave runs in debug mode, where the host can read its memory.*refused \(--allow-debug/);
      const allowed = await verifyAttestation(document, { rootPem, allowDebug: true });
      expect(allowed.ok).toBe(true);
      expect(checkOf(allowed, 'debug mode').detail).toContain('(accepted: --allow-debug)');
      // One measured PCR of the three is enough: that is not how a debug enclave reports.
      const measured = new Map(zeros).set(1, new Uint8Array(48).fill(1));
      const real = await handBuilt({ pcrs: measured });
      expect(failedChecks(await verifyAttestation(real.document, { rootPem: real.rootPem }))).toEqual([]);
    });

    it('refuses an issuer whose keyUsage does not allow keyCertSign, though every signature verifies', async () => {
      const { document, rootPem } = await handBuilt({ middleKeyUsage: x509.KeyUsageFlags.digitalSignature });
      const result = await verifyAttestation(document, { rootPem });
      expect(failedChecks(result)).toEqual(['certificate chain']);
      expect(checkOf(result, 'certificate chain').detail).toBe('CN=test leaf was not issued by CN=middle (issuer name, key identifier or key usage differ)');
    });

    it('refuses a leaf whose authority key identifier names another key than its issuer\'s subject key identifier', async () => {
      const { document, rootPem } = await handBuilt({ keyIdentifiers: { middle: 'aa'.repeat(20), leafAuthority: 'bb'.repeat(20) } });
      const result = await verifyAttestation(document, { rootPem });
      expect(failedChecks(result)).toEqual(['certificate chain']);
      expect(checkOf(result, 'certificate chain').detail).toBe('CN=test leaf was not issued by CN=middle (issuer name, key identifier or key usage differ)');
      const matching = await handBuilt({ keyIdentifiers: { middle: 'aa'.repeat(20), leafAuthority: 'aa'.repeat(20) } });
      expect(failedChecks(await verifyAttestation(matching.document, { rootPem: matching.rootPem }))).toEqual([]);
    });

    it('refuses the real AWS debug-mode sample without allowDebug', async () => {
      const { allowDebug: _, ...strict } = expected;
      const result = await verifyAttestation(fixture, strict);
      expect(failedChecks(result)).toEqual(['debug mode']);
      expect(checkOf(result, 'debug mode').detail).toContain('PCR0, PCR1 and PCR2 are all zero');
    });
  });

  describe('malformed input is a failed "structure" check, never an exception', () => {
    const cases: Array<[string, Uint8Array, RegExp]> = [
      ['truncated CBOR', fixture.subarray(0, fixture.length - 10), /truncated CBOR/],
      ['cut inside the header', fixture.subarray(0, 3), /truncated CBOR/],
      ['empty input', new Uint8Array(0), /empty/],
      ['garbage base64', new Uint8Array(Buffer.from('this is not an attestation document!', 'base64')), /./],
      ['trailing bytes', new Uint8Array([...fixture, 0x00]), /1 trailing byte/],
      ['a CBOR map instead of an array', Buffer.from('a0', 'hex'), /array of 4 items/],
      ['a float', Buffer.from('fb3ff0000000000000', 'hex'), /floating-point/],
      ['indefinite-length array', Buffer.from('9fff', 'hex'), /indefinite-length/],
    ];
    for (const [name, bytes, reason] of cases) {
      it(name, async () => {
        const result = await verifyAttestation(bytes, expected);
        expect(result.ok).toBe(false);
        expect(result.checks).toHaveLength(1);
        expect(result.checks[0].name).toBe('structure');
        expect(result.checks[0].detail).toMatch(reason);
        expect(result.document).toBeUndefined();
      });
    }

    it('every sampled single-byte corruption is rejected', async () => {
      for (let i = 0; i < fixture.length; i += 29) {
        const corrupted = fixture.slice();
        corrupted[i] ^= 0x40;
        const result = await verifyAttestation(corrupted, expected);
        expect(result.ok, `byte ${i}`).toBe(false);
      }
    });
  });
});

describe('COSE / payload decoding', () => {
  const payload = (hex: string) => () => decodeNitroDocument(Buffer.from(hex, 'hex'));

  it('reports missing and mistyped fields', () => {
    expect(payload('a0')).toThrow('attestation payload is missing module_id');
    expect(payload('80')).toThrow('attestation payload must be a map');
    // {"module_id": h'00'}
    expect(payload('a1696d6f64756c655f69644100')).toThrow('module_id must be a text string');
  });

  it('rejects duplicate and unknown keys', () => {
    // {"nonce": null, "nonce": null}
    expect(payload('a2656e6f6e6365f6656e6f6e6365f6')).toThrow(/duplicate map key "nonce"/);
    // {"extra": 1}
    expect(payload('a165657874726101')).toThrow('attestation payload has unknown field "extra"');
  });

  it('rejects a protected header that is not ES384', () => {
    const sign1 = decodeCoseSign1(fixture);
    const es256 = Buffer.from('a10126', 'hex'); // {1: -7}
    expect(() => decodeCoseSign1(encodeCoseSign1({ ...sign1, protectedHeader: es256 }))).toThrow(
      new AttestationFormatError('COSE algorithm must be ES384 (-35), got -7'),
    );
  });

  it('enforces the AWS content rules when encoding too', () => {
    const doc = decodeNitroDocument(decodeCoseSign1(fixture).payload);
    expect(() => encodeNitroDocument({ ...doc, nonce: new Uint8Array(513) })).toThrow('nonce must be 0 to 512 bytes, got 513');
    expect(() => encodeNitroDocument({ ...doc, pcrs: new Map([[32, PCR3]]) })).toThrow('PCR index 32 is outside 0..31');
  });
});
