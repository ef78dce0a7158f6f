import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nacl from 'tweetnacl';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedNitroProvider, simulatedRootPath } from '../../enclave/attestation/simulated-nsm.js';
import { signReply, streamSigner } from '../../enclave/api/signing.js';
import { generateIdentity } from '../../enclave/keys.js';
import { AttestationError, connect, ResponseSignatureError, type TeeClient } from '../../sdk/client.js';
import { encodeUserData } from '../../protocol/user-data.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { signedManifest } from '../helpers/manifests.js';

/**
 * The sdk against a loopback server that answers GET /v1/attestation with real simulated
 * documents and real signatures, and can be told to lie in one way at a time.
 */
type Lie = 'none' | 'ignore-nonce' | 'unsigned' | 'other-signer' | 'other-box-key' | 'other-operator' | 'debug-mode';

const state = { count: 1, shardOf: () => 0, head: () => ({ seq: 0, hash: '00'.repeat(32) }), storeId: () => '5e'.repeat(16), ancestry: () => 'yes' as const };
const identity = { ...generateIdentity(), state };
const impostor = { ...generateIdentity(), state };
const operatorPair = nacl.sign.keyPair();
const operatorKey = operatorPair.publicKey;
const boxKey = nacl.box.keyPair().publicKey;
const PCRS = new Map([[0, new Uint8Array(48).fill(0xa0)], [1, new Uint8Array(48).fill(0xa1)], [2, new Uint8Array(48).fill(0xa2)]]);
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');

let dataDir: string;
let rootPem: string;
let server: Server;
let baseUrl: string;
let lie: Lie = 'none';

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'sdk-client-'));
  const provider = new SimulatedNitroProvider({ blobs: new FsBlobStore(dataDir), pcrs: PCRS });
  await provider.rootCertificatePem();
  // Same CA, the PCRs of an enclave in debug mode.
  const debugProvider = new SimulatedNitroProvider({ blobs: new FsBlobStore(dataDir), pcrs: new Map([0, 1, 2].map((i) => [i, new Uint8Array(48)])) });
  rootPem = await readFile(simulatedRootPath(dataDir), 'utf8');
  server = createServer(async (req, res) => {
    const nonce = new URL(req.url!, 'http://x').searchParams.get('nonce');
    const document = await (lie === 'debug-mode' ? debugProvider : provider).attest({
      publicKey: identity.publicKey,
      userData: encodeUserData({ operatorKey, boxPublicKey: boxKey }),
      nonce: lie === 'ignore-nonce' || !nonce ? undefined : Buffer.from(nonce, 'hex'),
    });
    const body = Buffer.from(JSON.stringify({
      code_attestation: b64(document),
      operator_pubkey: b64(lie === 'other-operator' ? nacl.sign.keyPair().publicKey : operatorKey),
      tee_name: provider.teeName,
      tee_public_key: b64(identity.publicKey),
      tee_box_public_key: b64(lie === 'other-box-key' ? nacl.box.keyPair().publicKey : boxKey),
    }));
    const knownState = req.headers['x-tee-known-state'];
    const request = { request_id: '', method: 'GET', target: req.url!, body: Buffer.alloc(0), authorization: '', organization: '', known_state: typeof knownState === 'string' ? knownState : '' };
    const signer = lie === 'other-signer' ? impostor : identity;
    const reply = lie === 'unsigned' ? { status: 200, body, headers: {} } : signReply(signer, 'GET', request, { status: 200, body, headers: {} });
    res.writeHead(200, { 'content-type': 'application/json', ...reply.headers }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterEach(() => {
  lie = 'none';
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await rm(dataDir, { recursive: true, force: true });
});

describe('connect', () => {
  it('verifies the document, its bindings and the signed answer, and exposes the attested keys', async () => {
    const tee = await connect({ baseUrl, rootPem, pcrs: { 0: Buffer.from(PCRS.get(0)!).toString('hex'), 2: PCRS.get(2)! }, operatorKey: b64(operatorKey) });
    expect(tee.attestation.teePublicKey).toEqual(identity.publicKey);
    expect(tee.attestation.boxPublicKey).toEqual(boxKey);
    expect(tee.attestation.operatorKey).toEqual(operatorKey);
    expect(tee.attestation.checks.map((c) => c.name)).toEqual([
      'structure', 'signature', 'certificate chain', 'certificate validity', 'document age', 'debug mode', 'nonce', 'PCR0', 'PCR2', 'public key', 'operator key', 'box key',
    ]);
  });

  it('refuses an enclave in debug mode, even with its zero PCRs pinned, unless allowDebug', async () => {
    lie = 'debug-mode';
    const zeros = '00'.repeat(48);
    for (const options of [{ insecureSkipPcrPinning: true }, { pcrs: { 0: zeros, 1: zeros, 2: zeros } }]) {
      const error = await connect({ baseUrl, rootPem, ...options }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AttestationError);
      expect((error as Error).message).toMatch(/debug mode: PCR0, PCR1 and PCR2 are all zero: the enclave runs in debug mode, where the host can read its memory/);
    }
    const tee = await connect({ baseUrl, rootPem, insecureSkipPcrPinning: true, allowDebug: true });
    expect(tee.attestation.checks.find((c) => c.name === 'debug mode')?.detail).toContain('accepted');
  });

  it.each([
    ['a document without our fresh nonce', 'ignore-nonce', /nonce: the document has no nonce/],
    ['an advertised box key that the document does not bind', 'other-box-key', /box key: box key in user_data mismatch/],
    ['an advertised operator key that the document does not bind', 'other-operator', /operator key: operator key in user_data mismatch/],
  ] as const)('refuses %s', async (_name, how, message) => {
    lie = how;
    const error = await connect({ baseUrl, rootPem, insecureSkipPcrPinning: true }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AttestationError);
    expect((error as Error).message).toMatch(message);
  });

  it('refuses a pinned PCR or operator key that does not match, the AWS root, and an unsigned or impostor-signed answer', async () => {
    const wrongPcr = await connect({ baseUrl, rootPem, pcrs: { 0: PCRS.get(0)!, 1: 'ff'.repeat(48) } }).then(() => { throw new Error('connected, but a refusal was expected'); }, (e: AttestationError) => e);
    expect(wrongPcr.message).toMatch(/PCR1: PCR1 mismatch: expected ffff/);
    expect(wrongPcr.checks.find((c) => c.name === 'PCR1')?.ok).toBe(false);
    await expect(connect({ baseUrl, rootPem, insecureSkipPcrPinning: true, operatorKey: Buffer.alloc(32, 1).toString('hex') })).rejects.toThrow(/operator key in user_data mismatch/);
    await expect(connect({ baseUrl, insecureSkipPcrPinning: true })).rejects.toThrow(/certificate chain: chain does not end at the pinned root/);
    lie = 'unsigned';
    await expect(connect({ baseUrl, rootPem, insecureSkipPcrPinning: true })).rejects.toThrow(ResponseSignatureError);
    lie = 'other-signer';
    await expect(connect({ baseUrl, rootPem, insecureSkipPcrPinning: true })).rejects.toThrow(/does not verify with the enclave's key/);
  });
});

describe('PCR pinning is required (finding 12)', () => {
  it('refuses to connect without pinned PCRs, before sending anything, unless the loudly named opt-out is set', async () => {
    let fetched = 0;
    const spy: typeof fetch = (input, init) => { fetched++; return fetch(input, init); };
    await expect(connect({ baseUrl, rootPem, fetch: spy })).rejects.toThrow(/no PCRs pinned/);
    await expect(connect({ baseUrl, rootPem, pcrs: {}, fetch: spy })).rejects.toThrow(/no PCRs pinned/);
    // PCR1 alone pins a configuration, not code: any code under the root could claim it.
    await expect(connect({ baseUrl, rootPem, pcrs: { 1: 'ab'.repeat(48), 2: 'cd'.repeat(48) }, fetch: spy })).rejects.toThrow(/pin PCR0/);
    expect(fetched).toBe(0);
    expect((await connect({ baseUrl, rootPem, insecureSkipPcrPinning: true, fetch: spy })).attestation.teeName).toBe('simulated');
  });
});

describe('connect with a release manifest instead of pcrs', () => {
  const manifestOf = (pcrs: Record<number, Uint8Array | string>, signer = operatorPair, teeName = 'simulated') =>
    JSON.stringify(signedManifest({ signer, pcrs, teeName }));
  const released = { 0: PCRS.get(0)!, 1: PCRS.get(1)!, 2: PCRS.get(2)! };

  it('pins the PCRs of a manifest signed by the pinned operator key', async () => {
    const tee = await connect({ baseUrl, rootPem, manifest: manifestOf(released), operatorKey: b64(operatorKey) });
    expect(tee.attestation.checks.filter((c) => c.name.startsWith('PCR')).map((c) => `${c.name} ${c.ok}`)).toEqual(['PCR0 true', 'PCR1 true', 'PCR2 true']);
  });

  it('refuses a manifest whose PCRs are not the running code’s (another build)', async () => {
    const error = await connect({ baseUrl, rootPem, manifest: manifestOf({ ...released, 0: 'ab'.repeat(48) }), operatorKey }).then(() => { throw new Error('connected, but a refusal was expected'); }, (e: AttestationError) => e);
    expect(error).toBeInstanceOf(AttestationError);
    expect(error.message).toMatch(/PCR0: PCR0 mismatch: expected abab/);
  });

  it('refuses, before fetching anything, a tampered manifest, one from another signer, one without a pinned key, and one for another TEE', async () => {
    let fetched = 0;
    const spy: typeof fetch = (input, init) => { fetched++; return fetch(input, init); };
    const tampered = JSON.parse(manifestOf(released)) as { manifest: { pcrs: Record<string, string> } };
    tampered.manifest.pcrs['0'] = 'cd'.repeat(48);
    await expect(connect({ baseUrl, rootPem, manifest: tampered, operatorKey, fetch: spy })).rejects.toThrow(/signature does not verify/);
    const impostor = nacl.sign.keyPair();
    await expect(connect({ baseUrl, rootPem, manifest: manifestOf(released, impostor), operatorKey, fetch: spy })).rejects.toThrow(/names operator key .*, not the pinned/);
    await expect(connect({ baseUrl, rootPem, manifest: manifestOf(released), fetch: spy })).rejects.toThrow(/a manifest needs operatorKey/);
    await expect(connect({ baseUrl, rootPem, manifest: manifestOf(released), operatorKey, pcrs: released, fetch: spy })).rejects.toThrow(/either pcrs or a manifest/);
    expect(fetched).toBe(0);
    await expect(connect({ baseUrl, rootPem, manifest: manifestOf(released, operatorPair, 'aws-nitro-enclaves'), operatorKey })).rejects.toThrow(
      /tee_name simulated, the manifest is for aws-nitro-enclaves/,
    );
  });
});

describe('TeeClient requests', () => {
  it('never sends a request (with its API key) to another origin: a path starting with // is refused', async () => {
    const seen: string[] = [];
    const spy: typeof fetch = (input, init) => {
      seen.push(String(input));
      return fetch(input, init);
    };
    const tee = await connect({ baseUrl, rootPem, insecureSkipPcrPinning: true, authorization: 'Bearer secret-key', fetch: spy });
    seen.length = 0;
    for (const path of ['//127.0.0.1:9/steal', '//evil.example/x', '/\\evil.example/x']) {
      await expect(tee.call('GET', path)).rejects.toThrow(/not to the service at/);
      await expect(tee.sealedCall('GET', path)).rejects.toThrow(/not to the service at/);
    }
    expect(seen).toEqual([]);
  });
});

describe('TeeClient.verifyStream', () => {
  let tee: TeeClient;
  beforeAll(async () => {
    tee = await connect({ baseUrl, rootPem, insecureSkipPcrPinning: true });
  });
  const request = { method: 'POST', target: '/v1/chat/completions', organization: 'org', body: Buffer.from('{"stream":true}') };
  const apiRequest = { request_id: '', method: request.method, target: request.target, body: request.body, authorization: '', organization: 'org', known_state: '' };

  it('returns the signed bytes of a stream that ends with the enclave\'s signature event', () => {
    const signer = streamSigner(identity, 'POST', apiRequest, 200);
    const data = Buffer.from('data: {"choices":[]}\n\n');
    signer.update(data);
    const transcript = Buffer.concat([data, signer.finish(), Buffer.from('data: [DONE]\n\n')]);
    expect(Buffer.from(tee.verifyStream(request, 200, transcript).body)).toEqual(data);
    expect(() => tee.verifyStream({ ...request, organization: 'other' }, 200, transcript)).toThrow(ResponseSignatureError);
    expect(() => tee.verifyStream(request, 200, data)).toThrow(/does not end with a tee.signature event/);
  });
});
