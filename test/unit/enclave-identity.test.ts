import { createPublicKey, verify } from 'node:crypto';
import nacl from 'tweetnacl';
import { describe, expect, it } from 'vitest';
import { generateIdentity } from '../../enclave/keys.js';
import { ed25519SpkiDer } from '../../protocol/public-key.js';

// The identity signs with libsodium; verifiers use tweetnacl (the sdk) or OpenSSL (the
// verify tools, a browser's WebCrypto). Each must accept its signatures and refuse altered ones.
describe('the enclave identity', () => {
  const identity = generateIdentity();
  const message = new TextEncoder().encode('POST /v1/memory 200 e3b0c442…');
  const signature = identity.sign(message);

  it('signs with Ed25519 that tweetnacl and OpenSSL both verify', () => {
    expect(identity.publicKey).toHaveLength(32);
    expect(signature).toHaveLength(64);
    expect(nacl.sign.detached.verify(message, signature, identity.publicKey)).toBe(true);
    const key = createPublicKey({ key: Buffer.from(ed25519SpkiDer(identity.publicKey)), format: 'der', type: 'spki' });
    expect(verify(null, message, key, signature)).toBe(true);
  });

  it('signs deterministically, and no other message or key verifies', () => {
    expect(Buffer.from(identity.sign(message)).equals(Buffer.from(signature))).toBe(true);
    const altered = message.slice();
    altered[0] ^= 1;
    expect(nacl.sign.detached.verify(altered, signature, identity.publicKey)).toBe(false);
    const flipped = Uint8Array.from(signature);
    flipped[10] ^= 1;
    expect(nacl.sign.detached.verify(message, flipped, identity.publicKey)).toBe(false);
    const other = generateIdentity();
    expect(Buffer.from(other.publicKey).equals(Buffer.from(identity.publicKey))).toBe(false);
    expect(nacl.sign.detached.verify(message, signature, other.publicKey)).toBe(false);
  });
});
