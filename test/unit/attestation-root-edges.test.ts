import { readFileSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import { AWS_NITRO_ROOT_G1_PEM } from '../../protocol/attestation/aws-root.js';
import { verifyAttestation } from '../../protocol/attestation/verify.js';

/**
 * The guard on the embedded AWS root (protocol/attestation/verify.ts, pinnedRoot): the PEM
 * is the trust anchor, so a build whose PEM no longer has the fingerprint AWS publishes
 * (edited by mistake, or on purpose) verifies nothing against it. This file gives the
 * verifier another published fingerprint than the embedded PEM's.
 */
vi.mock('../../protocol/attestation/aws-root.js', async (original) => ({
  ...await original<typeof import('../../protocol/attestation/aws-root.js')>(),
  AWS_NITRO_ROOT_G1_SHA256: '00:11:22:33',
}));

const fixture = new Uint8Array(
  Buffer.from(readFileSync(new URL('../fixtures/aws-nitro-sample-2024-09-17.b64', import.meta.url), 'utf8').trim(), 'base64'),
);
const at = new Date(1726606091 * 1000);

describe('an embedded AWS root whose fingerprint is not the published one', () => {
  it('fails the chain check of every document, naming both fingerprints', async () => {
    const result = await verifyAttestation(fixture, { at, allowDebug: true });
    expect(result.ok).toBe(false);
    expect(result.checks.filter((c) => !c.ok)).toEqual([{
      name: 'certificate chain',
      ok: false,
      detail: "the embedded AWS Nitro root has fingerprint 64:1A:03:21:A3:E2:44:EF:E4:56:46:31:95:D6:06:31:7E:D7:CD:CC:3C:17:56:E0:98:93:F3:C6:8F:79:BB:5B, not AWS's 00:11:22:33",
    }]);
  });

  it('is not consulted for a root the caller pins itself', async () => {
    expect((await verifyAttestation(fixture, { at, allowDebug: true, rootPem: AWS_NITRO_ROOT_G1_PEM })).ok).toBe(true);
  });
});
