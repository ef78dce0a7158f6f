import * as grpc from '@grpc/grpc-js';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import sodium from 'sodium-native';
import { channelOptions, enclaveProto, type JoinRequestIn } from '../../common/proto.js';
import { joinDigest } from '../../enclave/cluster/key-sharing.js';
import { generateServiceKeys } from '../../enclave/keys.js';
import { SimulatedNitroProvider } from '../../enclave/attestation/simulated-nsm.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { verifyAttestation } from '../../protocol/attestation/verify.js';
import { parseUserData } from '../../protocol/user-data.js';
import { connect } from '../../sdk/client.js';
import { scanForPrivateKeys } from '../helpers/key-scan.js';
import { startLoneEnclave, type Lone } from '../helpers/processes.js';
import { startRecordingRelay, type RecordingRelay } from '../helpers/relay.js';
import { freePort, startService, type RunningService } from '../helpers/service.js';
import { attestLoneEnclave } from '../helpers/lone-attestation.js';

/**
 * Keys shared only by attestation (issue 38, item 4), played as the host: a second enclave
 * takes the service's keys from a running one through a relay the host records; one whose
 * configuration differs is refused; and the host, answering in the member's place with the
 * member's own genuine document, cannot make the joiner take keys of the host's making.
 */
const CA_FILES = ['simulated-root.pem', 'simulated-intermediate.pem', 'simulated-intermediate-key.pem'];
// Both enclaves are configured alike: the operator key is measured (PCR1), so it is given, not made per host store.
const operator = new Uint8Array(32);
sodium.crypto_sign_keypair(operator, sodium.sodium_malloc(64));
const OPERATOR_PUBKEY = Buffer.from(operator).toString('base64');

let member: RunningService;
let relay: RecordingRelay;
let joined: RunningService;
const dirs: string[] = [];

/** A host store folder for another enclave of the same (simulated) service: the CA is the one thing shared. */
function folderWithCa(): string {
  const dir = emptyFolder();
  for (const file of CA_FILES) copyFileSync(join(member.dataDir, file), join(dir, file));
  return dir;
}

function emptyFolder(): string {
  const dir = mkdtempSync(join(tmpdir(), 'key-sharing-'));
  dirs.push(dir);
  return dir;
}

/** How a joining enclave ends up: its exit code, or 'serving' if it came up (which these cases must not). */
async function outcome(enclave: Lone): Promise<number | null | 'serving'> {
  return Promise.race([enclave.exited, enclave.waitForOutput('enclave listening').then(() => 'serving' as const)]);
}

async function keysOf(baseUrl: string, dataDir: string) {
  const tee = await connect({ baseUrl, rootPem: readFileSync(join(dataDir, 'simulated-root.pem'), 'utf8'), insecureSkipPcrPinning: true });
  return { tee, signing: Buffer.from(tee.attestation.teePublicKey), box: Buffer.from(tee.attestation.boxPublicKey) };
}

beforeAll(async () => {
  member = await startService({ OPERATOR_PUBKEY });
  relay = await startRecordingRelay(member.enclaveAddr);
  joined = await startService({ OPERATOR_PUBKEY, DATA_DIR: folderWithCa(), JOIN_ENCLAVE_ADDR: relay.address });
});
afterAll(async () => {
  await joined?.stop();
  await relay?.close();
  await member?.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('an enclave that joins a running one', () => {
  it('attests the same signing and box keys, signs with the one and opens sealed requests with the other', async () => {
    const a = await keysOf(member.baseUrl, member.dataDir);
    const b = await keysOf(joined.baseUrl, joined.dataDir);
    expect(b.signing.equals(a.signing)).toBe(true);
    expect(b.box.equals(a.box)).toBe(true);
    // Its own store, its own memories; the same keys.
    const added = await b.tee.sealedCall<{ id: string }>('POST', '/v1/memory', { tenant_id: 'joined', content: 'kept by the second enclave' });
    expect(added.status).toBe(200);
    const found = await b.tee.call<{ data: { content: string }[] }>('GET', '/v1/memory?tenant_id=joined&query=second%20enclave&top_k=1');
    expect(found.body.data[0].content).toBe('kept by the second enclave');
    expect(joined.output()).toMatch(/took the service keys from a member enclave whose attestation verified/);
    expect(member.output()).toMatch(/shared the service keys with an enclave whose attestation verified/);
  });

  it('received them sealed: the host relaying the join saw no private key, raw, base64 or hex', async () => {
    const a = await keysOf(member.baseUrl, member.dataDir);
    const relayed = { 'joiner to member': relay.upstream(), 'member to joiner': relay.downstream() };
    // Two attestation documents went through (a few KB each): the join happened here.
    expect(relayed['member to joiner'].length).toBeGreaterThan(2000);
    const { hits, bytesSearched } = scanForPrivateKeys(relayed, { signingPublicKey: a.signing, boxPublicKey: a.box });
    expect(bytesSearched).toBeGreaterThan(4000);
    expect(hits).toEqual([]);
  });
});

describe('the member refuses', () => {
  it('an enclave whose measured configuration differs (PCR1): it does not start, and says which check failed', async () => {
    const other = await startLoneEnclave({
      OPERATOR_PUBKEY, DATA_DIR: folderWithCa(), ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`,
      JOIN_ENCLAVE_ADDR: member.enclaveAddr, MODEL_BASE_URL: 'http://127.0.0.1:9/v1',
    });
    try {
      expect(await outcome(other)).toBe(1);
      expect(other.output()).toMatch(/refusing to start: the member at .* refused to share the keys: the joining enclave's document does not verify: PCR1/);
      expect(member.output()).toMatch(/refused to share the service keys/);
    } finally {
      await other.stop();
    }
  });

  it('a document under another root, a challenge it did not issue, and one used twice (direct gRPC, as the host)', async () => {
    const client = new (enclaveProto().Enclave)(member.enclaveAddr, grpc.credentials.createInsecure(), channelOptions);
    const askChallenge = () => new Promise<Buffer>((resolve, reject) => {
      client.JoinChallenge({}, (err, reply) => (err ? reject(err) : resolve(reply!.challenge)));
    });
    const askToJoin = (challenge: Buffer, document: Uint8Array) => new Promise<void>((resolve, reject) => {
      client.Join({ challenge, document: Buffer.from(document) }, (err) => (err ? reject(err) : resolve()));
    });
    try {
      // A document with the member's PCRs, signed by a CA of the host's own.
      const memberPcrs = (await attestLoneEnclave(member.enclaveAddr, member.dataDir)).document!.pcrs;
      const forger = new SimulatedNitroProvider({
        blobs: new FsBlobStore(emptyFolder()),
        pcrs: new Map(Object.entries(memberPcrs).map(([i, hex]) => [Number(i), new Uint8Array(Buffer.from(hex, 'hex'))])),
      });
      const challenge = await askChallenge();
      const forged = await forger.attest({ publicKey: new Uint8Array(32).fill(1), nonce: challenge });
      await expect(askToJoin(challenge, forged)).rejects.toMatchObject({ code: grpc.status.PERMISSION_DENIED, details: expect.stringMatching(/certificate chain/) });
      // Used once, even by a refused join.
      await expect(askToJoin(challenge, forged)).rejects.toMatchObject({ details: expect.stringMatching(/not issued by this enclave, was already used, or expired/) });
      await expect(askToJoin(Buffer.alloc(32, 7), forged)).rejects.toMatchObject({ details: expect.stringMatching(/not issued by this enclave/) });
    } finally {
      client.close();
    }
  });
});

describe('the joiner refuses', () => {
  it('keys the host made, even beside the member\'s own genuine document for this join', async () => {
    // The host answers in the member's place: it gets the member to attest with the right
    // nonce through the public API, and seals keys of its own to the joiner's key.
    const server = new grpc.Server(channelOptions);
    server.addService(enclaveProto().Enclave.service, {
      JoinChallenge: (_call: unknown, callback: grpc.sendUnaryData<{ challenge: Buffer }>) => callback(null, { challenge: Buffer.alloc(32, 3) }),
      Join: (call: grpc.ServerUnaryCall<JoinRequestIn, unknown>, callback: grpc.sendUnaryData<{ document: Buffer; sealed_keys: Buffer }>) => {
        void (async () => {
          const nonce = Buffer.from(joinDigest(new Uint8Array(call.request.document))).toString('hex');
          const answer = await fetch(`${member.baseUrl}/v1/attestation?nonce=${nonce}`);
          const document = Buffer.from(((await answer.json()) as { code_attestation: string }).code_attestation, 'base64');
          const joinerDoc = await verifyAttestation(new Uint8Array(call.request.document), { rootPem: readFileSync(join(member.dataDir, 'simulated-root.pem'), 'utf8') });
          const recipient = parseUserData(joinerDoc.document!.userData).boxPublicKey;
          callback(null, { document, sealed_keys: Buffer.from(generateServiceKeys().sealFor(recipient)) });
        })().catch((err: Error) => callback({ code: grpc.status.INTERNAL, details: err.message }));
      },
    });
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    const joiner = await startLoneEnclave({ OPERATOR_PUBKEY, DATA_DIR: folderWithCa(), ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, JOIN_ENCLAVE_ADDR: `127.0.0.1:${port}` });
    try {
      expect(await outcome(joiner)).toBe(1);
      expect(joiner.output()).toMatch(/refusing to start: the sealed keys are not the keys the member attested/);
    } finally {
      await joiner.stop();
      server.forceShutdown();
    }
  });

  it('a member it cannot reach: it does not start with keys of its own', async () => {
    const joiner = await startLoneEnclave({ OPERATOR_PUBKEY, DATA_DIR: folderWithCa(), ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, JOIN_ENCLAVE_ADDR: `127.0.0.1:${await freePort()}` });
    try {
      expect(await outcome(joiner)).toBe(1);
      expect(joiner.output()).toMatch(/refusing to start: cannot reach the member enclave at 127\.0\.0\.1:\d+ for a challenge/);
    } finally {
      await joiner.stop();
    }
  });
});
