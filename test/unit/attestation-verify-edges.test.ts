import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { verifyAttestation } from '../../protocol/attestation/verify.js';

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
    const ahead = await verifyAttestation(fixture, { at: new Date(Date.parse('2024-09-17T20:47:10.288Z') - 299_000), allowDebug: true });
    expect(ahead.checks.find((c) => c.name === 'document age')?.detail).toBe(
      "made at 2024-09-17T20:47:10.288Z, 0 s old (at most 10803 s, the leaf certificate's lifetime)",
    );
  });
});
