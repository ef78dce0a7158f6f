/**
 * Release manifests (issue 13): the operator signs a build's PCRs, clients pin them after
 * checking the signature against the operator key they trust. Every attack on the file is
 * tried: a changed PCR, another signer, a manifest naming the pinned key but signed by
 * another, missing PCRs, junk around it.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nacl from 'tweetnacl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson, ManifestError, verifyManifest, type SignedManifest } from '../../sdk/attestation/manifest.js';
import { main as releaseManifest } from '../../scripts/release-manifest.js';
import { main as agentVerify, parseArgs as parseVerifyArgs } from '../../sdk/bin/agent-verify.js';
import { SimulatedNitroProvider } from '../../enclave/attestation/simulated-nsm.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { encodeUserData } from '../../protocol/user-data.js';
import { parseNitroMeasurements } from '../../scripts/lib/nitro-measurements.js';
import { signedManifest } from '../helpers/manifests.js';

const operator = nacl.sign.keyPair();
const PCRS = { 0: 'a0'.repeat(48), 1: 'a1'.repeat(48), 2: 'a2'.repeat(48) };
const copy = (value: SignedManifest): SignedManifest => JSON.parse(JSON.stringify(value)) as SignedManifest;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'release-manifest-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('verifyManifest', () => {
  const good = signedManifest({ signer: operator, pcrs: PCRS, overrides: { image: { eif_sha384: 'ff'.repeat(48), layers: 3 } } });

  it('returns the PCRs of a manifest signed by the pinned key, however the JSON is laid out', () => {
    const backwards = Object.fromEntries(Object.entries(good.manifest).reverse());
    const reordered = `{"signature":${JSON.stringify(good.signature)},\n  "manifest": ${JSON.stringify(backwards, null, 4)}}`;
    for (const text of [JSON.stringify(good), reordered]) {
      const verified = verifyManifest(text, operator.publicKey);
      expect(Object.keys(verified.pcrs)).toEqual(['0', '1', '2']);
      expect(Buffer.from(verified.pcrs[1]).toString('hex')).toBe(PCRS[1]);
    }
  });

  it('refuses a manifest whose PCR was changed after signing', () => {
    const tampered = copy(good);
    tampered.manifest.pcrs['0'] = 'b0'.repeat(48);
    expect(() => verifyManifest(tampered, operator.publicKey)).toThrow('the signature does not verify');
  });

  it('refuses a change to any signed field, informational ones included', () => {
    for (const change of [(m: SignedManifest) => { m.manifest.version = 'v2'; }, (m: SignedManifest) => { m.manifest.image!.layers = 4; },
      (m: SignedManifest) => { m.manifest.tee_name = 'aws-nitro-enclaves'; }]) {
      const tampered = copy(good);
      change(tampered);
      expect(() => verifyManifest(tampered, operator.publicKey)).toThrow('the signature does not verify');
    }
  });

  it('refuses another signer, whether it names itself or the pinned key', () => {
    const impostor = nacl.sign.keyPair();
    expect(() => verifyManifest(signedManifest({ signer: impostor, pcrs: PCRS }), operator.publicKey)).toThrow(/names operator key .*, not the pinned/);
    const claimsOperator = signedManifest({ signer: impostor, pcrs: PCRS, overrides: { operator_pubkey: Buffer.from(operator.publicKey).toString('base64') } });
    expect(() => verifyManifest(claimsOperator, operator.publicKey)).toThrow('the signature does not verify');
  });

  it('refuses a signature over the same body without the domain tag (a signature made for something else)', () => {
    const bare = copy(good);
    bare.signature = Buffer.from(nacl.sign.detached(Buffer.from(canonicalJson(good.manifest as never)), operator.secretKey)).toString('base64');
    expect(() => verifyManifest(bare, operator.publicKey)).toThrow('the signature does not verify');
  });

  it.each([
    ['without PCR1', { pcrs: { 0: PCRS[0], 2: PCRS[2] } }, 'it lacks PCR1'],
    ['with a short PCR', { pcrs: { ...PCRS, 2: 'a2' } }, 'PCR2 must be 96 lowercase hex digits'],
    ['with PCR index 32', { pcrs: { ...PCRS, 32: PCRS[0] } }, 'not a PCR index 0..31'],
    ['of another type', { type: 'something/else' }, 'manifest.type must be'],
    ['without created_at', { created_at: '' }, 'manifest.created_at must be a non-empty string'],
  ])('refuses a manifest %s', (_name, overrides, message) => {
    const bad = signedManifest({ signer: operator, pcrs: PCRS, overrides: overrides as never });
    expect(() => verifyManifest(bad, operator.publicKey)).toThrow(message);
  });

  it('refuses junk: not JSON, extra top-level fields, a float, a bad signature encoding, a wrong-length pinned key', () => {
    expect(() => verifyManifest('{"manifest":', operator.publicKey)).toThrow('not JSON');
    expect(() => verifyManifest({ ...good, pcrs: PCRS }, operator.publicKey)).toThrow('unexpected field(s) beside manifest and signature: pcrs');
    expect(() => verifyManifest(signedManifest({ signer: operator, pcrs: PCRS, overrides: { image: { size: 1.5 } } }), operator.publicKey)).toThrow(ManifestError);
    expect(() => verifyManifest({ ...good, signature: 'not base64!' }, operator.publicKey)).toThrow('signature must be base64');
    expect(() => verifyManifest(good, operator.publicKey.subarray(0, 31))).toThrow('32-byte');
  });
});

describe('parseNitroMeasurements', () => {
  it('reads nitro-cli build-enclave output, PCR8 included when the image is signed', () => {
    const out = JSON.stringify({ Measurements: { HashAlgorithm: 'Sha384 { ... }', PCR0: PCRS[0].toUpperCase(), PCR1: PCRS[1], PCR2: PCRS[2], PCR8: 'a8'.repeat(48) } });
    expect(parseNitroMeasurements(out, 'build.json')).toEqual({ ...PCRS, 8: 'a8'.repeat(48) });
  });
  it('refuses output without PCR2 or with a malformed value', () => {
    expect(() => parseNitroMeasurements(JSON.stringify({ Measurements: { PCR0: PCRS[0], PCR1: PCRS[1] } }), 'x')).toThrow('x lacks PCR2');
    expect(() => parseNitroMeasurements(JSON.stringify({ Measurements: { ...{ PCR0: 'zz' } } }), 'x')).toThrow('PCR0 is not 96 hex digits');
    expect(() => parseNitroMeasurements('Start building the Enclave Image...', 'x')).toThrow('is not JSON');
  });
});

describe('release-manifest (the operator’s command)', () => {
  function io() {
    const out: string[] = [];
    const err: string[] = [];
    return { out, err, io: { out: (t: string) => out.push(t), err: (t: string) => err.push(t), now: () => new Date('2026-11-25T01:02:03Z') } };
  }

  it('signs nitro-cli measurements with an openssl-style PEM key; the result verifies with the key’s public half', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const keyFile = join(dir, 'operator.pem');
    await writeFile(keyFile, privateKey.export({ format: 'pem', type: 'pkcs8' }));
    const measurements = join(dir, 'build.json');
    await writeFile(measurements, JSON.stringify({ Measurements: { HashAlgorithm: 'Sha384 { ... }', PCR0: PCRS[0], PCR1: PCRS[1], PCR2: PCRS[2] } }));
    const outFile = join(dir, 'manifest.json');
    const run = io();
    const status = await releaseManifest(
      ['--key', keyFile, '--release', 'v1.2.0', '--measurements', measurements, '--image', 'eif=agent-enclave.eif', '--source', 'commit=abc123', '--out', outFile],
      run.io,
    );
    expect(run.err.join('\n')).toContain('wrote');
    expect(status).toBe(0);
    const pinned = new Uint8Array(Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url'));
    const verified = verifyManifest(await readFile(outFile, 'utf8'), pinned);
    expect(verified.manifest).toMatchObject({
      version: 'v1.2.0', tee_name: 'aws-nitro-enclaves', created_at: '2026-11-25T01:02:03.000Z',
      image: { eif: 'agent-enclave.eif' }, source: { commit: 'abc123' }, pcrs: PCRS,
    });
  });

  it('signs --pcr values with a local operator-key.json', async () => {
    const keyFile = join(dir, 'operator-key.json');
    await writeFile(keyFile, JSON.stringify({ public_key: Buffer.from(operator.publicKey).toString('base64'), secret_key: Buffer.from(operator.secretKey).toString('base64') }));
    const run = io();
    const status = await releaseManifest(['--key', keyFile, '--release', 'local', '--tee', 'simulated', ...Object.entries(PCRS).map(([i, v]) => `--pcr=${i}=${v}`)], run.io);
    expect(status).toBe(0);
    expect(verifyManifest(run.out.join(''), operator.publicKey).manifest.tee_name).toBe('simulated');
  });

  it.each([
    [['--release', 'x', '--pcr', `0=${PCRS[0]}`], '--key is required'],
    [['--key', 'k', '--pcr', `0=${PCRS[0]}`], '--release is required'],
    [['--key', 'k', '--release', 'x'], 'give the measurements one way'],
    [['--key', 'k', '--release', 'x', '--measurements', 'm', '--pcr', `0=${PCRS[0]}`], 'give the measurements one way'],
    [['--key', 'k', '--release', 'x', '--measurements', 'm', '--root', 'r.pem'], '--root goes with --from-service'],
    [['--key', 'k', '--release', 'x', '--bogus'], "Unknown option '--bogus'"],
  ])('usage error for %j', async (argv, message) => {
    const run = io();
    expect(await releaseManifest(argv, run.io)).toBe(2);
    expect(run.err.join('\n')).toContain(message);
  });

  it('refuses a key that is not Ed25519, and bad --pcr values (exit 1 / 2)', async () => {
    const keyFile = join(dir, 'p256.pem');
    await writeFile(keyFile, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }));
    let run = io();
    expect(await releaseManifest(['--key', keyFile, '--release', 'x', '--pcr', `0=${PCRS[0]}`], run.io)).toBe(1);
    expect(run.err.join('\n')).toContain('holds a ec key, not Ed25519');
    const jsonKey = join(dir, 'operator-key.json');
    run = io();
    expect(await releaseManifest(['--key', jsonKey, '--release', 'x', '--pcr', `0=${PCRS[0]}`], run.io)).toBe(1);
    expect(run.err.join('\n')).toContain('it lacks PCR1, PCR2');
    run = io();
    expect(await releaseManifest(['--key', jsonKey, '--release', 'x', '--pcr', '0=abc'], run.io)).toBe(2);
    expect(run.err.join('\n')).toContain('--pcr must be <index 0-31>=<96 hex digits>');
  });
});

describe('agent-verify --manifest arguments', () => {
  const key = Buffer.from(operator.publicKey).toString('base64');
  it('needs the pinned operator key, and replaces --pcr', () => {
    expect(parseVerifyArgs(['http://x', '--manifest', 'm.json'])).toEqual({ kind: 'usage-error', message: expect.stringContaining('--manifest needs --operator-key') });
    expect(parseVerifyArgs(['http://x', '--manifest', 'm.json', '--operator-key', key, '--pcr', `0=${PCRS[0]}`])).toMatchObject({ kind: 'usage-error', message: expect.stringContaining('exclude each other') });
    expect(parseVerifyArgs(['http://x', '--manifest', 'm.json', '--operator-key', key])).toMatchObject({ kind: 'verify', manifest: 'm.json' });
  });
});

describe('agent-verify --manifest <url> on a document file', () => {
  const URL_OF_MANIFEST = 'https://releases.example/v1/release-manifest.json';
  let documentFile: string;
  let rootFile: string;

  beforeAll(async () => {
    const provider = new SimulatedNitroProvider({
      blobs: new FsBlobStore(dir),
      pcrs: Object.fromEntries(Object.entries(PCRS).map(([i, v]) => [i, new Uint8Array(Buffer.from(v, 'hex'))])),
    });
    rootFile = join(dir, 'root.pem');
    await writeFile(rootFile, await provider.rootCertificatePem());
    const document = await provider.attest({
      publicKey: nacl.sign.keyPair().publicKey,
      userData: encodeUserData({ operatorKey: operator.publicKey, boxPublicKey: nacl.box.keyPair().publicKey }),
    });
    documentFile = join(dir, 'document.b64');
    await writeFile(documentFile, Buffer.from(document).toString('base64'));
  });

  async function verifyWith(manifest: SignedManifest | undefined) {
    const fetched: string[] = [];
    const out: string[] = [];
    const io = {
      out: (t: string) => out.push(t),
      err: (t: string) => out.push(t),
      fetch: (async (input: string | URL | Request) => {
        fetched.push(String(input));
        return manifest ? new Response(JSON.stringify(manifest)) : new Response('not found', { status: 404 });
      }) as typeof fetch,
    };
    const status = await agentVerify([documentFile, '--root', rootFile, '--manifest', URL_OF_MANIFEST, '--operator-key', Buffer.from(operator.publicKey).toString('hex')], io);
    return { status, out: out.join('\n'), fetched };
  }

  it('fetches the manifest, checks its signature, then pins its PCRs (exit 0)', async () => {
    const result = await verifyWith(signedManifest({ signer: operator, pcrs: PCRS }));
    expect(result.fetched).toEqual([URL_OF_MANIFEST]);
    expect(result.out).toContain('✓ manifest: release v-test (simulated) signed by the operator key; pins PCR0, PCR1, PCR2');
    expect(result.out).toContain('✓ PCR2: matches');
    expect(result.status).toBe(0);
  });

  it('fails on a tampered manifest, another build’s manifest, and a manifest it cannot fetch (exit 1)', async () => {
    const tampered = signedManifest({ signer: operator, pcrs: PCRS });
    tampered.manifest.pcrs['1'] = '00'.repeat(48);
    expect(await verifyWith(tampered)).toMatchObject({ status: 1, out: expect.stringContaining('✗ manifest: https://releases.example/v1/release-manifest.json: the signature does not verify') });
    const otherBuild = await verifyWith(signedManifest({ signer: operator, pcrs: { ...PCRS, 1: 'b1'.repeat(48) } }));
    expect(otherBuild.out).toContain('✗ PCR1: PCR1 mismatch');
    expect(otherBuild.status).toBe(1);
    expect(await verifyWith(undefined)).toMatchObject({ status: 1, out: expect.stringContaining('returned HTTP 404') });
  });
});
