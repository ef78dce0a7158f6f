/**
 * Freshness across enclaves (#38 item 5), as the host plays it against real processes: one host
 * store, enclaves A and B of one service (B took the keys from A by attestation) with SHARDS=4,
 * SHARDS_OPEN=none and WITNESSES=1, a proxy each; this test is the host's placement (SetPeers,
 * OpenShard, CloseShard over gRPC) and its disk (the host store's folder).
 *
 * The attack: a shard written on A, its files copied aside, more writes, the old copy put back,
 * the shard moved to B. Clients that never saw the newer head could not tell; B refuses the copy,
 * naming both heads, because A told B each new head before acknowledging it.
 */
import * as grpc from '@grpc/grpc-js';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statement, TAGS } from '../../enclave/cluster/witness-book.js';
import { generateIdentity } from '../../enclave/keys.js';
import { shardOf } from '../../protocol/shards.js';
import { channelOptions, enclaveProto, type EnclaveClient, type WitnessReplyIn } from '../../common/proto.js';
import { request } from '../helpers/http.js';
import { startLone } from '../helpers/processes.js';
import { freePort } from '../helpers/service.js';
import { grpcError, shardRpc, startShardPair, type ShardPair } from '../helpers/shard-pair.js';

let pair: ShardPair;
const aside = mkdtempSync(join(tmpdir(), 'freshness-copy-'));
const tenantOf = (shard: number) => {
  for (let i = 0; ; i++) if (shardOf(`fresh-${i}`, 4) === shard) return `fresh-${i}`;
};
const tenant = tenantOf(1);

beforeAll(async () => {
  pair = await startShardPair({ WITNESSES: '1' });
  // The host's placement names each enclave's members (placement/member.ts does it from etcd).
  await pair.rpcA.setPeers([pair.b.enclaveAddr]);
  await pair.rpcB.setPeers([pair.a.enclaveAddr]);
}, 240_000);
afterAll(async () => {
  await pair?.stop();
  rmSync(aside, { recursive: true, force: true });
});

const add = (baseUrl: string, content: string) => request(baseUrl, 'POST', '/v1/memory', { tenant_id: tenant, content });
const short = (seq: string | number, head: Buffer | string) => `${seq}:${(typeof head === 'string' ? head : head.toString('hex')).slice(0, 16)}`;
const shardFolder = () => join(pair.a.dataDir, 'shard-01');

describe('freshness across enclaves (WITNESSES=1)', () => {
  const ids: string[] = [];
  let old: { seq: string; head: Buffer };

  it('a write on the owner is acknowledged once the other enclave witnessed its head', async () => {
    await pair.rpcA.open(1, 1);
    for (const content of ['the first thing A stored', 'the second thing A stored']) {
      const res = await add(pair.a.baseUrl, content);
      expect(res.status, res.text).toBe(200);
      ids.push(res.body.id as string);
    }
    const [state] = (await pair.rpcA.shards()).open;
    const seen = await pair.rpcB.witnessed(1);
    expect(seen.head).toMatchObject({ seq: Number(state.seq), hash: state.head.toString('hex') });
    old = { seq: state.seq, head: state.head };
  });

  it('a restored old copy of the shard is refused by the next owner, naming both heads', async () => {
    // The host copies the shard's files aside (what a backup, or a snapshot of its disk, is)…
    cpSync(shardFolder(), join(aside, 'shard-01'), { recursive: true });
    // …the owner goes on writing…
    for (const content of ['written after the copy', 'also after the copy']) {
      const res = await add(pair.a.baseUrl, content);
      expect(res.status, res.text).toBe(200);
      ids.push(res.body.id as string);
    }
    const newest = await pair.rpcA.close(1);
    expect(Number(newest.seq)).toBeGreaterThan(Number(old.seq));
    // …then the host puts the old copy back (its store stopped and started around it) and moves the shard to B.
    cpSync(shardFolder(), join(aside, 'newest'), { recursive: true });
    await pair.a.killHostStore('SIGTERM');
    rmSync(shardFolder(), { recursive: true });
    cpSync(join(aside, 'shard-01'), shardFolder(), { recursive: true });
    await pair.a.startHostStore();

    const refused = await grpcError(pair.rpcB.open(1, 2));
    expect(refused.code, refused.details).toBe(grpc.status.DATA_LOSS);
    expect(refused.details).toContain('shard 1 (shard-01/) is an older copy than a member of the service witnessed');
    expect(refused.details).toContain(`its chain ends at state ${short(old.seq, old.head)}`);
    expect(refused.details).toContain(`the witnessed state ${short(newest.seq, newest.head)}`);
    // Nothing of the copy is served: B does not hold the shard.
    expect((await pair.rpcB.shards()).open).toEqual([]);
    const res = await request(pair.b.baseUrl, 'GET', `/v1/memory/${ids[0]}?tenant_id=${tenant}`);
    expect(res.status, res.text).toBe(503);
    expect(res.body.error.code).toBe('shard_not_owned');

    // The newest copy back: B opens it, with every acknowledged memory.
    await pair.a.killHostStore('SIGTERM');
    rmSync(shardFolder(), { recursive: true });
    cpSync(join(aside, 'newest'), shardFolder(), { recursive: true });
    await pair.a.startHostStore();
    const opened = await pair.rpcB.open(1, 3);
    expect(opened.seq).toBe(newest.seq);
    for (const id of ids) {
      const got = await request(pair.b.baseUrl, 'GET', `/v1/memory/${id}?tenant_id=${tenant}`);
      expect(got.status, got.text).toBe(200);
    }
  });

  it('a witness request the host forges is refused and changes nothing', async () => {
    const before = await pair.rpcA.witnessed(1);
    const forger = generateIdentity();
    const bytes = statement(TAGS.witness, { nonce: '00'.repeat(16), heads: [{ shard: 1, generation: 9, head: { store: before.head!.store, seq: 1_000_000, hash: 'ee'.repeat(32) } }] });
    const client = new (enclaveProto().Enclave)(pair.a.enclaveAddr, grpc.credentials.createInsecure(), channelOptions) as unknown as EnclaveClient;
    try {
      const stream = client.Witnesses();
      const reply = new Promise<WitnessReplyIn>((resolve, reject) => {
        stream.once('data', resolve);
        stream.once('error', reject);
      });
      stream.write({ id: 1, statement: bytes, signature: Buffer.from(forger.sign(bytes)) });
      expect(await reply).toMatchObject({ id: 1, refused: 'the witness request is not a statement signed by this service' });
      stream.end();
    } finally {
      client.close();
    }
    expect((await pair.rpcA.witnessed(1)).head).toEqual(before.head);
  });

  it('an enclave that joins takes the heads its sponsor witnessed, and the generations it has seen, with the keys', async () => {
    const address = `127.0.0.1:${await freePort()}`;
    const c = startLone('enclave/main.js', { ...pair.a.env, ENCLAVE_ADDR: address, JOIN_ENCLAVE_ADDR: pair.b.enclaveAddr });
    const rpcC = shardRpc(address);
    try {
      await c.waitForOutput('enclave listening', 90_000);
      const sponsor = await pair.rpcB.witnessed(1);
      expect(sponsor.head?.seq).toBeGreaterThan(0);
      const joined = await rpcC.witnessed(1);
      expect(joined.head).toEqual(sponsor.head);
      // And the highest owner generation it has seen of the shard (B was asked to open it at 2, then 3): C witnesses nothing below it either.
      expect(sponsor.generation).toBe(3);
      expect(joined.generation).toBe(3);
      expect(joined.instance).not.toBe(sponsor.instance);
    } finally {
      rpcC.end();
      await c.stop();
    }
  }, 120_000);

  it('with the other enclave down, a write is stored but not acknowledged (503 witness_unavailable), and no shard opens', async () => {
    await pair.a.killEnclave('SIGKILL');
    const res = await add(pair.b.baseUrl, 'written while A is down');
    expect(res.status, res.text).toBe(503);
    expect(res.body.error).toMatchObject({ code: 'witness_unavailable', message: expect.stringMatching(/confirmed by 0 of the 1 other member named by the host, and WITNESSES is 1/) });
    // Stored and applied all the same (it is in the log): a read finds it.
    const found = await request(pair.b.baseUrl, 'GET', `/v1/memory?tenant_id=${tenant}&query=${encodeURIComponent('written while A is down')}&top_k=1`);
    expect(found.status, found.text).toBe(200);
    expect(found.body.data[0].content).toBe('written while A is down');
    const refused = await grpcError(pair.rpcB.open(2, 1));
    expect(refused.code, refused.details).toBe(grpc.status.UNAVAILABLE);
    expect(refused.details).toMatch(/only 0 of the 1 other member named by the host said which head of shard 2 they witnessed, and WITNESSES is 1/);
  });
});
