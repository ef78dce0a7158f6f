import nacl from 'tweetnacl';
import { manifestSigningBytes, MANIFEST_TYPE, type ReleaseManifest, type SignedManifest } from '../../sdk/attestation/manifest.js';

/** A signed manifest for tests; `overrides` change the body before it is signed. */
export function signedManifest(options: {
  signer: nacl.SignKeyPair;
  pcrs: Record<number, Uint8Array | string>;
  teeName?: string;
  overrides?: Partial<ReleaseManifest>;
}): SignedManifest {
  const manifest: ReleaseManifest = {
    type: MANIFEST_TYPE,
    version: 'v-test',
    tee_name: options.teeName ?? 'simulated',
    pcrs: Object.fromEntries(
      Object.entries(options.pcrs).map(([i, v]) => [i, typeof v === 'string' ? v : Buffer.from(v).toString('hex')]),
    ),
    operator_pubkey: Buffer.from(options.signer.publicKey).toString('base64'),
    created_at: '2026-11-25T00:00:00.000Z',
    ...options.overrides,
  };
  const signature = nacl.sign.detached(manifestSigningBytes(manifest), options.signer.secretKey);
  return { manifest, signature: Buffer.from(signature).toString('base64') };
}
