/**
 * The release manifest's parser as a hostile file meets it: every field it relies on, the
 * canonical bytes the operator signs, and the edges of each check (the mutants that
 * `npm run test:mutation -- --mutate sdk/attestation/manifest.ts` found alive).
 */
import nacl from 'tweetnacl';
import { describe, expect, it } from 'vitest';
import {
  canonicalJson, MANIFEST_TYPE, manifestSigningBytes, ManifestError, verifyManifest, type ReleaseManifest,
} from '../../sdk/attestation/manifest.js';

const operator = nacl.sign.keyPair();
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const pcr = (digit: string) => digit.repeat(96);

function manifest(extra: Record<string, unknown> = {}): ReleaseManifest {
  return {
    type: MANIFEST_TYPE, version: 'v1.2.3', tee_name: 'aws-nitro-enclaves',
    pcrs: { 0: pcr('a'), 1: pcr('b'), 2: pcr('c') }, operator_pubkey: b64(operator.publicKey), created_at: '2026-11-27T08:00:00Z',
    ...extra,
  } as ReleaseManifest;
}

/** Signed by the operator as given (the signature covers whatever the object holds). */
const signed = (m: Record<string, unknown>) => ({ manifest: m, signature: b64(nacl.sign.detached(manifestSigningBytes(m as unknown as ReleaseManifest), operator.secretKey)) });

const refusal = (input: unknown): string => {
  try {
    verifyManifest(input, operator.publicKey);
  } catch (error) {
    expect(error).toBeInstanceOf(ManifestError);
    return (error as Error).message;
  }
  throw new Error('accepted');
};

describe('canonicalJson: the bytes an operator signs', () => {
  it('names the format on the wire', () => {
    expect(MANIFEST_TYPE).toBe('agent-service/release-manifest/v1');
  });

  it('sorts keys by code unit at every depth, keeps arrays in order, and has no whitespace', () => {
    expect(canonicalJson({ b: 1, a: [3, { d: null, c: true }], B: 'x' })).toBe('{"B":"x","a":[3,{"c":true,"d":null}],"b":1}');
    expect(canonicalJson({ ab: 1, a: 2, aa: 3, b: 4 })).toBe('{"a":2,"aa":3,"ab":1,"b":4}');
    expect(canonicalJson([])).toBe('[]');
    expect(canonicalJson({})).toBe('{}');
  });

  it('refuses numbers with more than one spelling, naming them', () => {
    expect(() => canonicalJson({ n: 1.5 })).toThrow('manifest numbers must be safe integers, got 1.5');
    expect(() => canonicalJson([2 ** 53])).toThrow(ManifestError);
    expect(canonicalJson([-7, 0, 2 ** 53 - 1])).toBe('[-7,0,9007199254740991]');
  });

  it('is the whole of what is signed: pretty-printed and reordered, the same manifest verifies', () => {
    const good = signed(manifest({ image: { eif: 'x', nitro_cli: '1.4.2' } }) as unknown as Record<string, unknown>);
    const reordered = JSON.stringify({ signature: good.signature, manifest: Object.fromEntries(Object.entries(good.manifest).reverse()) }, null, 2);
    expect(verifyManifest(reordered, operator.publicKey).manifest.version).toBe('v1.2.3');
  });
});

describe('verifyManifest refuses, saying why', () => {
  const good = () => manifest() as unknown as Record<string, unknown>;

  it('a file that is not a {manifest, signature} object, too large, or with fields beside them', () => {
    expect(refusal('[]')).toBe('the manifest must be a JSON object {manifest, signature}');
    expect(refusal('null')).toBe('the manifest must be a JSON object {manifest, signature}');
    expect(refusal('not json')).toBe('the manifest is not JSON');
    expect(refusal(`{"pad":"${'x'.repeat(64 * 1024)}"}`)).toBe('a manifest is at most 65536 bytes');
    // Exactly at the limit is still read (and refused for what it is, not its size).
    const atLimit = `{"manifest":${JSON.stringify(good())},"signature":"","p":"${'x'.repeat(64 * 1024)}"}`.slice(0, 64 * 1024 - 2);
    expect(refusal(`${atLimit}"}`)).not.toMatch(/at most/);
    expect(refusal({ ...signed(good()), note: 'hi', also: 1 })).toBe('unexpected field(s) beside manifest and signature: note, also');
  });

  it('a manifest that is not an object, of another type, or missing a field the checks rely on', () => {
    expect(refusal({ manifest: [], signature: 'AA==' })).toBe('manifest must be an object');
    expect(refusal(signed({ ...good(), type: 'agent-service/release-manifest/v0' }))).toBe(`manifest.type must be "${MANIFEST_TYPE}"`);
    for (const field of ['version', 'tee_name', 'operator_pubkey', 'created_at']) {
      expect(refusal(signed({ ...good(), [field]: '' }))).toBe(`manifest.${field} must be a non-empty string`);
      expect(refusal(signed({ ...good(), [field]: 7 }))).toBe(`manifest.${field} must be a non-empty string`);
    }
    expect(refusal(signed({ ...good(), created_at: 'yesterday' }))).toBe('manifest.created_at must be an ISO 8601 time');
    expect(refusal(signed({ ...good(), image: 'docker.io/x' }))).toBe('manifest.image must be an object');
    expect(refusal(signed({ ...good(), source: ['abc'] }))).toBe('manifest.source must be an object');
    expect(refusal(signed({ ...good(), source: null }))).toBe('manifest.source must be an object');
  });

  it('PCRs that are not an object, not indexes 0..31, not 96 lowercase hex digits, or short of PCR0-2', () => {
    expect(refusal(signed({ ...good(), pcrs: [pcr('a')] }))).toBe('manifest.pcrs must be an object');
    for (const index of ['32', '1x', '-1', '01x', 'a']) {
      expect(refusal(signed({ ...good(), pcrs: { ...manifest().pcrs, [index]: pcr('d') } }))).toBe(`manifest.pcrs key "${index}" is not a PCR index 0..31`);
    }
    expect(verifyManifest(signed({ ...good(), pcrs: { ...manifest().pcrs, 31: pcr('d'), 19: pcr('e') } }), operator.publicKey).pcrs[31]).toHaveLength(48);
    for (const hex of [`x${pcr('a')}`, `${pcr('a')}x`, pcr('A'), pcr('a').slice(1), 7]) {
      expect(refusal(signed({ ...good(), pcrs: { ...manifest().pcrs, 1: hex } }))).toBe('manifest PCR1 must be 96 lowercase hex digits (SHA-384)');
    }
    expect(refusal(signed({ ...good(), pcrs: { 0: pcr('a'), 2: pcr('c') } }))).toBe('the manifest must pin PCR0, PCR1 and PCR2; it lacks PCR1');
  });

  it('a signature that is missing, not base64 or not 64 bytes; another operator key; a changed byte', () => {
    const good2 = signed(good());
    expect(refusal({ ...good2, signature: '' })).toBe('signature must be base64');
    expect(refusal({ ...good2, signature: 5 })).toBe('signature must be base64');
    expect(refusal({ ...good2, signature: b64(new Uint8Array(63)) })).toBe('signature must be 64 bytes');
    expect(refusal(signed({ ...good(), operator_pubkey: '!' }))).toBe('operator_pubkey must be base64');
    const other = nacl.sign.keyPair();
    expect(refusal(signed({ ...good(), operator_pubkey: b64(other.publicKey) }))).toMatch(/^the manifest names operator key .*, not the pinned /);
    expect(refusal({ ...good2, manifest: { ...good2.manifest, version: 'v9' } })).toMatch(/^the signature does not verify with the operator key /);
    expect(() => verifyManifest(good2, new Uint8Array(31))).toThrow('the pinned operator key must be a 32-byte Ed25519 key');
  });
});
