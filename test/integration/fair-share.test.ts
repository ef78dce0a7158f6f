import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, request } from '../helpers/http.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { issueKey } from '../helpers/processes.js';
import { startService, type RunningService } from '../helpers/service.js';

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
});
