/**
 * Simulated documents are shaped like real ones where strict verifiers look (issue 13):
 * 16 PCRs, SKI/AKI in the simulated chain, public_key as a DER SubjectPublicKeyInfo; and
 * the verifier's key binding accepts that form without letting another key through.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nacl from 'tweetnacl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedNitroProvider } from '../../enclave/attestation/simulated-nsm.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { decodeCoseSign1, decodeNitroDocument, type NitroDocument } from '../../protocol/cose.js';
import { verifyAttestation } from '../../protocol/attestation/verify.js';
import { ed25519KeyFromSpki, ed25519SpkiDer, publicKeyMatches } from '../../protocol/public-key.js';
import { ensureCommand } from '../helpers/system-package.js';

let dir: string;
let rootPem: string;
let document: Uint8Array;
let doc: NitroDocument;
const teeKey = nacl.sign.keyPair().publicKey;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'simulated-shape-'));
  const provider = new SimulatedNitroProvider({ blobs: new FsBlobStore(dir), pcrs: { 0: new Uint8Array(48).fill(1), 2: new Uint8Array(48).fill(2) } });
  rootPem = await provider.rootCertificatePem();
  document = await provider.attest({ publicKey: teeKey });
  doc = decodeNitroDocument(decodeCoseSign1(document).payload);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('simulated documents look like real ones', () => {
  it('carry PCR0 to PCR15, unmeasured ones as 48 zero bytes (Evervault requires 0, 1, 2 and 8)', () => {
    expect([...doc.pcrs.keys()]).toEqual([...Array(16).keys()]);
    expect(doc.pcrs.get(1)).toEqual(new Uint8Array(48));
    expect(doc.pcrs.get(8)).toEqual(new Uint8Array(48));
    expect(doc.pcrs.get(2)).toEqual(new Uint8Array(48).fill(2));
  });

  it('have a chain that `openssl verify -x509_strict` accepts (SKI on CAs, AKI below the root)', async () => {
    const openssl = ensureCommand('openssl', 'openssl');
    const pem = (der: Uint8Array) => new X509Certificate(der).toString();
    const [root, intermediate, leaf] = ['root.pem', 'intermediate.pem', 'leaf.pem'].map((f) => join(dir, f));
    await writeFile(root, rootPem);
    await writeFile(intermediate, pem(doc.cabundle[1]));
    await writeFile(leaf, pem(doc.certificate));
    const out = execFileSync(openssl, ['verify', '-x509_strict', '-CAfile', root, '-untrusted', intermediate, leaf], { encoding: 'utf8' });
    expect(out.trim()).toBe(`${leaf}: OK`);
  });

  it('bind the key as an Ed25519 SubjectPublicKeyInfo, which the verifier reads back', async () => {
    expect(doc.publicKey).toEqual(ed25519SpkiDer(teeKey));
    expect(ed25519KeyFromSpki(doc.publicKey!)).toEqual(teeKey);
    const result = await verifyAttestation(document, { rootPem, publicKey: teeKey, pcrs: { 8: new Uint8Array(48) } });
    expect(result.checks.filter((c) => !c.ok)).toEqual([]);
    expect(result.checks.find((c) => c.name === 'public key')!.detail).toContain('as an Ed25519 SubjectPublicKeyInfo');
  });

  it('fail the key binding for any other key, in either form', async () => {
    const other = nacl.sign.keyPair().publicKey;
    const result = await verifyAttestation(document, { rootPem, publicKey: other });
    expect(result.checks.find((c) => c.name === 'public key')!.ok).toBe(false);
  });
});

describe('publicKeyMatches', () => {
  const key = new Uint8Array(32).fill(7);
  it('accepts the raw key (older enclaves, opaque pinned bytes) and its SPKI', () => {
    expect(publicKeyMatches(key, key)).toBe(true);
    expect(publicKeyMatches(key, ed25519SpkiDer(key))).toBe(true);
    expect(publicKeyMatches(Buffer.from('dummy'), Buffer.from('dummy'))).toBe(true);
  });
  it('refuses another key, a truncated or extended SPKI, and an SPKI of another algorithm', () => {
    const spki = ed25519SpkiDer(key);
    expect(publicKeyMatches(key, ed25519SpkiDer(new Uint8Array(32).fill(8)))).toBe(false);
    expect(publicKeyMatches(key, spki.subarray(0, 43))).toBe(false);
    expect(publicKeyMatches(key, Buffer.concat([spki, Buffer.of(0)]))).toBe(false);
    const x25519 = Buffer.from(spki);
    x25519[8] = 0x6e; // OID 1.3.101.110 (X25519) instead of 1.3.101.112
    expect(publicKeyMatches(key, x25519)).toBe(false);
    expect(() => ed25519SpkiDer(new Uint8Array(31))).toThrow('32 bytes');
  });
});
