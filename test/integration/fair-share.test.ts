import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { connect, type TeeClient } from '../../sdk/client.js';
import { sealRequest } from '../../protocol/sealed.js';
import { expectError, request } from '../helpers/http.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { issueKey } from '../helpers/processes.js';
import { startService, waitFor, type RunningService } from '../helpers/service.js';

/**
 * Finding 7: one caller held every place in the enclave's work gate with open chat streams,
 * and every other tenant's query got 503. Each API key now has a share (here 4 of 64).
 */
let model: ModelServer;
let svc: RunningService;
let dir: string;
let greedy: string;
let other: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-fair-'));
  const keys = join(dir, 'keys.json');
  greedy = issueKey(keys, ['greedy']);
  other = issueKey(keys, ['other']);
  model = await startModelServer();
  svc = await startService({ API_KEYS_FILE: keys, MODEL_BASE_URL: model.url, ENCLAVE_MAX_IN_FLIGHT_PER_KEY: '4', ENCLAVE_MAX_STREAM_MS: '3000' });
});
afterAll(async () => {
  await svc?.stop();
  await model?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a fair share of the enclave per API key', () => {
  it('one key holding open streams gets 429 past its share; another key is still served', async () => {
    const streams = Array.from({ length: 4 }, () => {
      const controller = new AbortController();
      const done = fetch(`${svc.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        signal: controller.signal,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${greedy}` },
        body: JSON.stringify({ model: 'slow-stream', stream: true, messages: [{ role: 'user', content: 'hold on' }] }),
      }).then(async (res) => { await res.body?.getReader().read(); return res.status; });
      return { controller, done };
    });
    // Each stream has its first chunk: all four hold their place in the enclave.
    expect(await Promise.all(streams.map((s) => s.done))).toEqual([200, 200, 200, 200]);

    const refused = await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=greedy&query=x', undefined, { authorization: `Bearer ${greedy}` });
    expectError(refused, 429, 'too_many_concurrent_requests');
    const served = await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=other&query=x', undefined, { authorization: `Bearer ${other}` });
    expect(served.status).toBe(200);

    for (const s of streams) s.controller.abort();
  });

  it('a stream that would run for ever is ended at ENCLAVE_MAX_STREAM_MS with an error event, still signed (finding 7)', async () => {
    const res = await fetch(`${svc.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${other}` },
      body: JSON.stringify({ model: 'slow-stream', stream: true, messages: [{ role: 'user', content: 'never ends' }] }),
    });
    expect(res.status).toBe(200);
    // The model never finishes; the enclave ends the stream itself.
    const text = await res.text();
    expect(text).toMatch(/stream_time_limit/);
    expect(text).toMatch(/data: \{"object":"chat\.completion\.chunk","type":"tee\.signature"/);
  });

  /** Opens `count` streamed chats as `authorization` that hold their places until aborted. */
  async function holdStreams(count: number, authorization: (i: number) => string) {
    const streams = Array.from({ length: count }, (_, i) => {
      const controller = new AbortController();
      const done = fetch(`${svc.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        signal: controller.signal,
        headers: { 'content-type': 'application/json', authorization: authorization(i) },
        body: JSON.stringify({ model: 'slow-stream', stream: true, messages: [{ role: 'user', content: 'hold on' }] }),
      }).then(async (res) => { await res.body?.getReader().read(); return res.status; });
      return { controller, done };
    });
    return { statuses: await Promise.all(streams.map((s) => s.done)), release: () => { for (const s of streams) s.controller.abort(); } };
  }

  /** Until the greedy key's places are free again (aborted streams end in the enclave shortly after). */
  const greedyFree = () => waitFor(async () => (await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=greedy&query=x', undefined, { authorization: `Bearer ${greedy}` })).status === 200, 30_000);

  it('counts one key as one caller however its header is spelled (hold round two, 4)', async () => {
    await greedyFree();
    // Case and spacing of the scheme are free in bearer parsing: four spellings, one key.
    const spellings = [`Bearer ${greedy}`, `bearer ${greedy}`, `BEARER  ${greedy}`, `Bearer ${greedy} `];
    const held = await holdStreams(4, (i) => spellings[i]);
    expect(held.statuses).toEqual([200, 200, 200, 200]);
    const refused = await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=greedy&query=x', undefined, { authorization: `beARer   ${greedy}` });
    expectError(refused, 429, 'too_many_concurrent_requests');
    const served = await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=other&query=x', undefined, { authorization: `Bearer ${other}` });
    expect(served.status).toBe(200);
    held.release();
  });

  it('counts a sealed call under the key inside its envelope, once opened (hold round two, 4)', async () => {
    await greedyFree();
    const rootPem = readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8');
    const asGreedy: TeeClient = await connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem, authorization: `Bearer ${greedy}` });
    const asOther: TeeClient = await connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem, authorization: `Bearer ${other}` });
    // Four sealed chats of the greedy key that the model never answers: each holds a place.
    const hanging = Array.from({ length: 4 }, () => {
      const controller = new AbortController();
      const { envelope } = sealRequest(asGreedy.attestation.boxPublicKey, {
        method: 'POST',
        target: '/v1/chat/completions',
        body: new Uint8Array(Buffer.from(JSON.stringify({ model: 'hang', messages: [{ role: 'user', content: 'wait' }] }))),
        authorization: `Bearer ${greedy}`,
        timestamp: Date.now(),
      });
      const done = fetch(`${svc.baseUrl}/v1/sealed`, {
        method: 'POST', signal: controller.signal, headers: { 'content-type': 'application/octet-stream' }, body: envelope,
      }).catch(() => undefined);
      return { controller, done };
    });
    // Once the four hold their places, the key's fifth call, sealed or plain, is over its share.
    await waitFor(async () => (await asGreedy.sealedCall('GET', '/v1/memory?tenant_id=greedy&query=x')).status === 429, 30_000);
    expectError(await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=greedy&query=x', undefined, { authorization: `Bearer ${greedy}` }), 429, 'too_many_concurrent_requests');
    // Another key, sealed or plain, is served meanwhile.
    expect((await asOther.sealedCall('GET', '/v1/memory?tenant_id=other&query=x')).status).toBe(200);
    expect((await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=other&query=x', undefined, { authorization: `Bearer ${other}` })).status).toBe(200);
    for (const h of hanging) h.controller.abort();
    await Promise.all(hanging.map((h) => h.done));
  });
});
