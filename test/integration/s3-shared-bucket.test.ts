/**
 * Two enclaves, each with its own host store, on one S3 bucket (#38 item 3, as deploy/README.md
 * lays out a cluster): the blobs are shared only through the bucket, against the loopback
 * stand-in of S3's API or a real S3 server (test/helpers/s3-bucket.ts). A takes shard 1 at generation 1 and stores memories; B opens it at
 * generation 2 through its own host store while A still runs (A's lease lapsed, say): B serves
 * A's memories, and A's next write, whose append's condition the bucket now refuses, answers
 * 503 shard_not_owned, never 200, and is stored nowhere.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHARD_MISS_HEADER, shardOf } from '../../protocol/shards.js';
import { connect } from '../../sdk/client.js';
import { request } from '../helpers/http.js';
import { startLone, type Lone } from '../helpers/processes.js';
import { testBucket, type TestBucket } from '../helpers/s3-bucket.js';
import { freePort } from '../helpers/service.js';
import { startShardPair, type ShardPair } from '../helpers/shard-pair.js';

let bucket: TestBucket;
let pair: ShardPair;
let hostStoreB: Lone | undefined;
let dataDirB: string;
const tenant = (() => {
  for (let i = 0; ; i++) if (shardOf(`bucket-${i}`, 4) === 1) return `bucket-${i}`;
})();

beforeAll(async () => {
  bucket = await testBucket('shared-bucket');
  const s3 = { BLOB_STORE_S3: `s3://${bucket.name}/${bucket.prefix}service/`, ...bucket.env };
  dataDirB = mkdtempSync(join(tmpdir(), 'shared-bucket-b-'));
  pair = await startShardPair(s3, {
    bEnv: async (a) => {
      const address = `127.0.0.1:${await freePort()}`;
      hostStoreB = startLone('host-store/main.js', { ...a.env, HOST_STORE_ADDR: address, DATA_DIR: dataDirB });
      await hostStoreB.waitForOutput('host store listening');
      return { HOST_STORE_ADDR: address };
    },
  });
}, 240_000);
afterAll(async () => {
  await pair?.stop();
  await hostStoreB?.stop();
  await bucket?.close();
  rmSync(dataDirB, { recursive: true, force: true });
});

describe('two host stores on one bucket, an enclave behind each', () => {
  it('B opens A\'s shard through its own host store and serves A\'s memories; A\'s next write is refused by the bucket and stored nowhere', async () => {
    for (const shard of [0, 1, 2, 3]) await pair.rpcA.open(shard, 1);
    const rootPem = readFileSync(join(pair.a.dataDir, 'simulated-root.pem'), 'utf8');
    // B's host store has its own DATA_DIR: its copy of the root is the one A's enclave put in the bucket.
    expect(readFileSync(join(dataDirB, 'simulated-root.pem'), 'utf8')).toBe(rootPem);
    const onA = await connect({ baseUrl: pair.a.baseUrl, rootPem, insecureSkipPcrPinning: true });
    const stored: Array<{ id: string; content: string }> = [];
    for (const content of ['The boat is moored at pier nine', 'The oars are in the shed', 'The sail was mended in May']) {
      const res = await onA.call<{ id: string }>('POST', '/v1/memory', { tenant_id: tenant, content, dedupe: false });
      expect(res.status).toBe(200);
      stored.push({ id: res.body.id, content });
    }

    // A is not told: it still believes it owns shard 1 when B takes it.
    const opened = await pair.rpcB.open(1, 2);
    expect(opened).toMatchObject({ shard: 1, generation: '2', tenants: '1', memories: '3' });
    const onB = await connect({ baseUrl: pair.b.baseUrl, rootPem, insecureSkipPcrPinning: true });
    for (const { id, content } of stored) {
      const got = await onB.call<{ content: string }>('GET', `/v1/memory/${id}?tenant_id=${tenant}`);
      expect(got.status).toBe(200);
      expect(got.body.content).toBe(content);
    }
    const found = await onB.call<{ data: Array<{ content: string }> }>('GET', `/v1/memory?tenant_id=${tenant}&query=${encodeURIComponent('where is the boat?')}&top_k=1`);
    expect(found.body.data[0].content).toBe('The boat is moored at pier nine');
    const onB2 = await onB.call<{ id: string }>('POST', '/v1/memory', { tenant_id: tenant, content: 'The anchor chain was replaced', dedupe: false });
    expect(onB2.status).toBe(200);

    const late = await request(pair.a.baseUrl, 'POST', '/v1/memory', { tenant_id: tenant, content: 'written by the old owner', dedupe: false });
    expect(late.status, late.text).toBe(503);
    expect(late.body.error.code).toBe('shard_not_owned');
    expect(late.headers.get(SHARD_MISS_HEADER)).toBe('1');
    const listed = await onB.call<{ data: Array<{ content: string }> }>('GET', `/v1/memory?tenant_id=${tenant}&limit=100`);
    expect(listed.body.data.map((m) => m.content).sort()).toEqual([...stored.map((m) => m.content), 'The anchor chain was replaced'].sort());
    // The other shards stay A's: the bucket fences per shard, not per enclave.
    const other = (() => {
      for (let i = 0; ; i++) if (shardOf(`other-${i}`, 4) === 2) return `other-${i}`;
    })();
    expect((await request(pair.a.baseUrl, 'POST', '/v1/memory', { tenant_id: other, content: 'still A\'s shard' })).status).toBe(200);
  });
});
