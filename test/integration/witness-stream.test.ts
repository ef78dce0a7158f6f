import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { channelOptions, enclaveProto, type EnclaveClient, type WitnessReplyIn } from '../../common/proto.js';
import { Freshness } from '../../enclave/cluster/freshness.js';
import { PeerClients } from '../../enclave/cluster/peer-client.js';
import { statement, TAGS } from '../../enclave/cluster/witness-book.js';
import { witnessRpc } from '../../enclave/cluster/witness-rpc.js';
import { generateIdentity, generateServiceKeys } from '../../enclave/keys.js';
import { advanceHead, genesisHead } from '../../enclave/storage/state-head.js';
import { startCuttableLine } from '../helpers/relay.js';
import { freePort } from '../helpers/service.js';

/**
 * The Witnesses stream (an owner's rounds to a member, protos/enclave.proto) over real gRPC on
 * loopback: a member's server (witness-rpc.ts) against an owner's PeerClients, and against a raw
 * client playing the host.
 */

const log = createLogger('test', 'silent');
const STORE = 'ab'.repeat(16);
let stops: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const stop of stops.reverse()) await stop();
  stops = [];
});

/** A member: its Freshness behind a gRPC server with the witness RPCs. */
async function member(keys: ReturnType<typeof generateServiceKeys>, options: { maxUnsentBytes?: number } = {}) {
  const freshness = new Freshness(keys.identity, new PeerClients(), { witnesses: 1, timeoutMs: 2000 });
  const server = new grpc.Server(channelOptions);
  server.addService(enclaveProto().Enclave.service, witnessRpc(freshness, log, options.maxUnsentBytes));
  const port = await freePort();
  await new Promise<void>((resolve, reject) => server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  stops.push(() => server.forceShutdown());
  return { freshness, address: `127.0.0.1:${port}`, port };
}

/** An owner whose only member is at `address`. */
function owner(keys: ReturnType<typeof generateServiceKeys>, address: string, timeoutMs = 2000) {
  const peers = new PeerClients();
  stops.push(() => peers.close());
  const freshness = new Freshness(keys.identity, peers, { witnesses: 1, timeoutMs });
  freshness.setPeers([address]);
  return freshness;
}

function heads(n: number) {
  let head = genesisHead(STORE);
  const all = [head];
  for (let i = 0; i < n; i++) all.push(head = advanceHead(head, Buffer.from(`w${i}`)));
  return all.map((h) => ({ store: STORE, ...h }));
}

function rawStream(address: string) {
  const client = new (enclaveProto().Enclave)(address, grpc.credentials.createInsecure(), channelOptions) as unknown as EnclaveClient;
  stops.push(() => client.close());
  const stream = client.Witnesses();
  const replies: WitnessReplyIn[] = [];
  const status = new Promise<grpc.StatusObject | grpc.ServiceError>((resolve) => {
    stream.on('error', resolve);
    stream.on('status', resolve);
  });
  stream.on('data', (reply: WitnessReplyIn) => replies.push(reply));
  return { stream, replies, status };
}

async function eventually(holds: () => boolean): Promise<void> {
  for (const started = Date.now(); !holds(); await new Promise((resolve) => setTimeout(resolve, 10))) {
    if (Date.now() - started > 10_000) throw new Error('never came true');
  }
}

describe('the Witnesses stream', () => {
  it('carries an owner\'s rounds to a member, which keeps every head and confirms each', async () => {
    const keys = generateServiceKeys();
    const m = await member(keys);
    const a = owner(keys, m.address);
    const chain = heads(12);
    await Promise.all(Array.from({ length: 12 }, (_, shard) => a.witness(shard, 1, chain[shard + 1])));
    expect(Array.from({ length: 12 }, (_, shard) => m.freshness.book.get(shard)?.seq)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
  });

  it('a request the host forges is answered with a refusal, changes nothing, and the stream goes on serving the owner\'s rounds', async () => {
    const keys = generateServiceKeys();
    const m = await member(keys);
    const raw = rawStream(m.address);
    const bytes = statement(TAGS.witness, { nonce: '00'.repeat(16), heads: [{ shard: 1, generation: 1, head: heads(1)[1] }] });
    raw.stream.write({ id: 7, statement: bytes, signature: Buffer.from(generateIdentity().sign(bytes)) });
    const signedByService = Buffer.from(keys.identity.sign(bytes));
    raw.stream.write({ id: 8, statement: bytes, signature: signedByService });
    await eventually(() => raw.replies.length === 2);
    expect(raw.replies[0]).toMatchObject({ id: 7, refused: 'the witness request is not a statement signed by this service' });
    expect(raw.replies[0].statement.length).toBe(0);
    expect(raw.replies[1]).toMatchObject({ id: 8, refused: '' });
    expect(Buffer.from(raw.replies[1].statement).toString().split('\n')[0]).toBe(TAGS.ack);
    expect(m.freshness.book.get(1)?.seq).toBe(1);
  });

  it('a host that sends rounds and never reads the answers cannot make the member hold them without end', async () => {
    const keys = generateServiceKeys();
    const m = await member(keys, { maxUnsentBytes: 64 * 1024 });
    const raw = rawStream(m.address);
    raw.stream.pause();
    // Refused at once (no tag): about 190 bytes of answer each, 40,000 of them.
    for (let id = 1; id <= 40_000; id++) raw.stream.write({ id, statement: Buffer.from('x'), signature: Buffer.alloc(64) });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    raw.stream.resume();
    expect(await raw.status).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED });
    expect(raw.replies.length).toBeLessThan(40_000);
    // The member itself is fine: an owner's next round is confirmed.
    const a = owner(keys, m.address);
    await a.witness(3, 1, heads(1)[1]);
    expect(m.freshness.book.get(3)?.seq).toBe(1);
  });

  it('when the member cannot be reached the owner\'s round fails (503 witness_unavailable), and once it can, the next round is confirmed on a new stream', async () => {
    const keys = generateServiceKeys();
    const m = await member(keys);
    const first = await startCuttableLine(m.address);
    const a = owner(keys, first.address, 1000);
    const chain = heads(3);
    await a.witness(0, 1, chain[1]);
    await first.close();
    await expect(a.witness(0, 1, chain[2])).rejects.toMatchObject({ code: 'witness_unavailable' });
    expect(m.freshness.book.get(0)?.seq).toBe(1);
    const again = await startCuttableLine(m.address, first.port);
    await a.witness(0, 1, chain[3]);
    expect(m.freshness.book.get(0)?.seq).toBe(3);
    await again.close();
  });
});
