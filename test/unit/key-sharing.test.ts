import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SimulatedNitroProvider } from '../../enclave/attestation/simulated-nsm.js';
import { joinDigest, joinService, KeyMember, KeySharingError, type AttestationContext } from '../../enclave/cluster/key-sharing.js';
import { generateServiceKeys } from '../../enclave/keys.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { verifyAttestation } from '../../protocol/attestation/verify.js';
import { encodeUserData, parseUserData } from '../../protocol/user-data.js';

const dir = mkdtempSync(join(tmpdir(), 'key-sharing-unit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const blobs = new FsBlobStore(dir);
const operatorKey = new Uint8Array(32).fill(9);
const pcrs = (fill: number) => new Map([0, 1, 2].map((i) => [i, new Uint8Array(48).fill(fill + i)]));

async function context(fill: number): Promise<AttestationContext> {
  const provider = new SimulatedNitroProvider({ blobs, pcrs: pcrs(fill) });
  return { provider, rootPem: await provider.rootCertificatePem(), operatorKey };
}

function memberOf(keys = generateServiceKeys(), ctx: AttestationContext, now = () => Date.now()) {
  return new KeyMember(keys, ctx, encodeUserData({ operatorKey, boxPublicKey: keys.requestKey.publicKey }), now);
}

describe('keys shared by attestation (the protocol, in one process)', () => {
  it('hands the keys to an enclave with the same PCRs: it then signs as the member does', async () => {
    const keys = generateServiceKeys();
    const member = memberOf(keys, await context(1));
    const joined = await joinService({ challenge: async () => member.challenge(), join: (c, d) => member.share(c, d) }, await context(1));
    expect(Buffer.from(joined.identity.publicKey).equals(Buffer.from(keys.identity.publicKey))).toBe(true);
    expect(Buffer.from(joined.requestKey.publicKey).equals(Buffer.from(keys.requestKey.publicKey))).toBe(true);
    const message = new Uint8Array([1, 2, 3]);
    expect(Buffer.from(joined.identity.sign(message)).equals(Buffer.from(keys.identity.sign(message)))).toBe(true);
  });

  it('refuses an enclave with other PCRs, and the joiner refuses a member with other PCRs', async () => {
    const member = memberOf(undefined, await context(1));
    await expect(joinService({ challenge: async () => member.challenge(), join: (c, d) => member.share(c, d) }, await context(5)))
      .rejects.toThrow(/the joining enclave's document does not verify: PCR0: PCR0 mismatch/);
    // A member that shares with anyone (no check of its own) is still refused by the joiner's check of its document.
    const keys = generateServiceKeys();
    const elsewhere = await context(5);
    const lax = {
      challenge: async () => new Uint8Array(32).fill(4),
      join: async (_challenge: Uint8Array, document: Uint8Array) => {
        const joiner = await verifyAttestation(document, { rootPem: elsewhere.rootPem });
        const userData = encodeUserData({ operatorKey, boxPublicKey: keys.requestKey.publicKey });
        return {
          document: await elsewhere.provider.attest({ publicKey: keys.identity.publicKey, userData, nonce: joinDigest(document) }),
          sealedKeys: keys.sealFor(parseUserData(joiner.document!.userData).boxPublicKey),
        };
      },
    };
    await expect(joinService(lax, await context(1))).rejects.toThrow(/the member's document does not verify: PCR0: PCR0 mismatch/);
  });

  it('forgets a challenge after 60 s, and holds at most 64 open', async () => {
    let now = 1_000_000;
    const member = memberOf(undefined, await context(1), () => now);
    const old = member.challenge();
    now += 60_001;
    await expect(member.share(old, new Uint8Array(10))).rejects.toThrow(/not issued by this enclave, was already used, or expired/);
    for (let i = 0; i < 64; i++) member.challenge();
    expect(() => member.challenge()).toThrow(KeySharingError);
    now += 60_001;
    expect(member.challenge()).toHaveLength(32);
  });
});
