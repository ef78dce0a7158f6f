/**
 * The host replaying recorded sealed writes where no replay guard in memory saw them
 * (docs/trust-model.md): to the enclave a shard moved to, and to an enclave that was killed
 * and came back with the service's keys (JOIN_ENCLAVE_ADDR) and the shard. Real processes:
 * one host store, enclaves A and B with SHARDS=4 and SHARDS_OPEN=none (B took the keys from A
 * by attestation), a proxy each; this test is the client, then the host: it keeps the
 * envelopes' bytes as they crossed the host and sends them again. A loopback chat model saves
 * memories with add_memory, so one streamed chat makes several changes under one id.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openReply, sealRequest } from '../../protocol/sealed.js';
import { shardOf } from '../../protocol/shards.js';
import { connect } from '../../sdk/client.js';
import { expectError, request, type JsonResponse } from '../helpers/http.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { startService } from '../helpers/service.js';
import { startShardPair, type ShardPair } from '../helpers/shard-pair.js';

let pair: ShardPair;
let model: ModelServer;
let boxKey: Uint8Array;
const tenant = (() => {
  for (let i = 0; ; i++) if (shardOf(`replayed-${i}`, 4) === 2) return `replayed-${i}`;
})();

beforeAll(async () => {
  model = await startModelServer();
  pair = await startShardPair({ MODEL_BASE_URL: model.url });
  await pair.rpcA.open(2, 1);
  const tee = await connect({ insecureSkipPcrPinning: true, baseUrl: pair.a.baseUrl, rootPem: readFileSync(join(pair.a.dataDir, 'simulated-root.pem'), 'utf8') });
  boxKey = tee.attestation.boxPublicKey;
}, 240_000);
afterAll(async () => {
  await pair?.stop();
  await model?.close();
});

/** An envelope as the host records it: the bytes of POST /v1/sealed. */
const seal = (method: string, target: string, body?: unknown, key = boxKey, organization?: string) =>
  Object.assign(sealRequest(key, { method, target, body: Buffer.from(body === undefined ? '' : JSON.stringify(body)), organization, timestamp: Date.now() }), { path: '/v1/sealed' });

/** A sealed streamed chat for the tenant (POST /v1/sealed/stream). */
const sealStream = (body: unknown) => ({ ...seal('POST', '/v1/chat/completions', body, boxKey, tenant), path: '/v1/sealed/stream' });

/**
 * Sends the envelope's bytes to `baseUrl`: the outer answer, and the inner one when it opened
 * (a stream's only as far as the host sees it: its frames, whole).
 */
async function send(baseUrl: string, sealed: ReturnType<typeof seal>): Promise<{ outer: JsonResponse; inner?: { status: number; body: any } }> {
  const res = await fetch(`${baseUrl}${sealed.path}`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: sealed.envelope });
  const bytes = new Uint8Array(await res.arrayBuffer());
  const text = Buffer.from(bytes).toString('utf8');
  if (res.status !== 200) return { outer: { status: res.status, headers: res.headers, body: JSON.parse(text), text } };
  if (sealed.path !== '/v1/sealed') return { outer: { status: 200, headers: res.headers, body: undefined, text } };
  const reply = openReply(bytes, sealed.replyKey, sealed.nonce);
  return { outer: { status: 200, headers: res.headers, body: undefined, text: '' }, inner: { status: reply.status, body: JSON.parse(Buffer.from(reply.body).toString('utf8')) } };
}

/** What the tenant holds, read plainly from the shard's owner: every memory, and one memory's history. */
async function state(baseUrl: string, id: string) {
  const list = await request(baseUrl, 'GET', `/v1/memory?tenant_id=${tenant}&limit=100`);
  expect(list.status, list.text).toBe(200);
  const history = await request(baseUrl, 'GET', `/v1/memory/${id}/history?tenant_id=${tenant}`);
  expect(history.status, history.text).toBe(200);
  return {
    contents: (list.body.data as Array<{ content: string }>).map((m) => m.content).sort(),
    versions: (history.body.data as Array<{ event: string; record?: { content: string } }>).map((v) => `${v.event}:${v.record?.content ?? ''}`),
  };
}

const WRITES = ['add', 'batch', 'firstUpdate', 'secondUpdate', 'chat'] as const;
const recorded: Record<(typeof WRITES)[number], ReturnType<typeof seal>> = {} as never;
let id = '';
let before: Awaited<ReturnType<typeof state>>;

describe('sealed writes replayed where no guard in memory saw them', () => {
  it('the client\'s writes, on A: an add, a batch of two, an update and a later update, a streamed chat whose model saves ten memories', async () => {
    recorded.add = seal('POST', '/v1/memory', { tenant_id: tenant, content: 'The spare key is under the blue flowerpot' });
    const added = await send(pair.a.baseUrl, recorded.add);
    expect(added.inner?.status, JSON.stringify(added)).toBe(200);
    id = added.inner!.body.id as string;
    recorded.batch = seal('POST', '/v1/memory', { memories: [{ tenant_id: tenant, content: 'Batch one: the boat is moored at pier 4' }, { tenant_id: tenant, content: 'Batch two: the oars are in the shed' }] });
    expect((await send(pair.a.baseUrl, recorded.batch)).inner?.status).toBe(200);
    recorded.firstUpdate = seal('PATCH', `/v1/memory/${id}?tenant_id=${tenant}`, { content: 'The spare key is under the red flowerpot' });
    expect((await send(pair.a.baseUrl, recorded.firstUpdate)).inner?.status).toBe(200);
    recorded.secondUpdate = seal('PATCH', `/v1/memory/${id}?tenant_id=${tenant}`, { content: 'The spare key is with the neighbour now' });
    expect((await send(pair.a.baseUrl, recorded.secondUpdate)).inner?.status).toBe(200);
    // One request, ten changes under its id (CHAT_TOOL_MAX_ADDS): the model asks for fifty.
    recorded.chat = sealStream({ model: 'tool-add-50', stream: true, messages: [{ role: 'user', content: 'Remember these facts' }] });
    const chat = await send(pair.a.baseUrl, recorded.chat);
    expect(chat.outer.status, chat.outer.text).toBe(200);
    before = await state(pair.a.baseUrl, id);
    expect(before.contents).toHaveLength(13);
    expect(before.contents.filter((c) => c.startsWith('fact number'))).toHaveLength(10);
    expect(before.versions).toHaveLength(3);
    // A itself refuses them, from its guard in memory.
    expectError((await send(pair.a.baseUrl, recorded.add)).outer, 409, 'sealed_request_replayed');
  });

  it('the shard moved to B: each recorded write sent to B is refused (409 sealed_request_replayed) and nothing changed', async () => {
    await pair.rpcA.close(2);
    await pair.rpcB.open(2, 2);
    for (const name of WRITES) {
      expectError((await send(pair.b.baseUrl, recorded[name])).outer, 409, 'sealed_request_replayed');
    }
    expect(await state(pair.b.baseUrl, id)).toEqual(before);
  });

  it('A killed and started again with the service\'s keys, the shard moved back to it: each recorded write is refused and nothing changed', async () => {
    await pair.a.killEnclave('SIGKILL');
    await pair.a.startEnclave({ JOIN_ENCLAVE_ADDR: pair.b.enclaveAddr });
    await pair.rpcB.close(2);
    await pair.rpcA.open(2, 3);
    for (const name of WRITES) {
      expectError((await send(pair.a.baseUrl, recorded[name])).outer, 409, 'sealed_request_replayed');
    }
    expect(await state(pair.a.baseUrl, id)).toEqual(before);
    // A fresh envelope is served as ever.
    expect((await send(pair.a.baseUrl, seal('GET', `/v1/memory/${id}?tenant_id=${tenant}`))).inner?.body.content).toBe('The spare key is with the neighbour now');
  });
});

describe('one enclave alone (npm start), killed and started again', () => {
  it('comes back with a new box key: a recorded envelope no longer opens (400 sealed_open_failed) and nothing changed', async () => {
    const lone = await startService();
    try {
      const tee = await connect({ insecureSkipPcrPinning: true, baseUrl: lone.baseUrl, rootPem: readFileSync(join(lone.dataDir, 'simulated-root.pem'), 'utf8') });
      const add = seal('POST', '/v1/memory', { tenant_id: tenant, content: 'The bicycle is chained to the lamp post' }, tee.attestation.boxPublicKey);
      expect((await send(lone.baseUrl, add)).inner?.status).toBe(200);
      await lone.killEnclave('SIGKILL');
      await lone.startEnclave();
      expectError((await send(lone.baseUrl, add)).outer, 400, 'sealed_open_failed');
      const list = await request(lone.baseUrl, 'GET', `/v1/memory?tenant_id=${tenant}`);
      expect((list.body.data as unknown[]).length).toBe(1);
    } finally {
      await lone.stop();
    }
  }, 240_000);

  it('an envelope refused by an enclave without its shard (503, nothing done) is applied there once the shard has moved, once', async () => {
    const fresh = seal('POST', '/v1/memory', { tenant_id: tenant, content: 'Sent first to the enclave without the shard' });
    const missed = await send(pair.b.baseUrl, fresh);
    expectError(missed.outer, 503, 'shard_not_owned');
    expect(missed.outer.headers.get('x-tee-shard-miss')).toBe('2');
    await pair.rpcA.close(2);
    await pair.rpcB.open(2, 4);
    // The same bytes, back at B now that it holds the shard: not a replay, since nothing was done.
    const applied = await send(pair.b.baseUrl, fresh);
    expect(applied.inner?.status, JSON.stringify(applied)).toBe(200);
    expectError((await send(pair.b.baseUrl, fresh)).outer, 409, 'sealed_request_replayed');
    const after = await state(pair.b.baseUrl, id);
    expect(after.contents).toEqual([...before.contents, 'Sent first to the enclave without the shard'].sort());
  });
});
