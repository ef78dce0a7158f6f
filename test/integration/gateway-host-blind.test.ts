import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type GatewayProcess } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { issueKey } from '../helpers/processes.js';
import { startRecordingRelay, startTamperingRelay, type RecordingRelay, type TamperingRelay } from '../helpers/relay.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * The host sees nothing: every kind of call, sent through agent-gateway by an unmodified
 * client, with recording relays on both sides of the proxy (gateway ⇄ [front] ⇄ proxy ⇄
 * [back] ⇄ enclave). Canaries sit in every content, the tenant id and the API key. A second
 * gateway goes through a relay that flips a byte of each answer.
 */
let model: ModelServer;
let svc: RunningService;
let front: RecordingRelay;
let back: RecordingRelay | undefined;
let flipper: TamperingRelay;
let gateway: GatewayProcess;
let flipped: GatewayProcess;
let key: string;

const CANARY = 'canary-Quillfeather-8e2d';
const TENANT = 'tenant-canary-Marrowby-51f0';
const ROUTES = ['/v1/memory', '/v1/chat/completions', '/v1/responses', '/v1/embeddings', '/v1/models'];
const weather = {
  type: 'function' as const,
  function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};

const recorded = () => [front.upstream(), front.downstream(), back!.upstream(), back!.downstream()];
const holds = (needle: string) => recorded().filter((bytes) => bytes.includes(Buffer.from(needle, 'utf8'))).length;

let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gw-blind-'));
  key = issueKey(join(dir, 'keys.json'), [TENANT]);
  model = await startModelServer();
  svc = await startService({ API_KEYS_FILE: join(dir, 'keys.json'), MODEL_BASE_URL: model.url, MODEL_API_KEY: 'sk-model', MODEL_NAMES: 'echo,tool-client' }, {
    proxyEnclaveAddr: async (enclaveAddr) => {
      back = await startRecordingRelay(enclaveAddr);
      return back.address;
    },
  });
  front = await startRecordingRelay(svc.baseUrl.replace('http://', ''));
  flipper = await startTamperingRelay(svc.baseUrl);
  const trust = ['--root', join(svc.dataDir, 'simulated-root.pem'), '--insecure-dev'];
  gateway = await startGateway(['--service', `http://${front.address}`, ...trust, '--state-file', join(dir, 'a.json')]);
  flipped = await startGateway(['--service', flipper.baseUrl, ...trust, '--state-file', join(dir, 'b.json')]);
});
afterAll(async () => {
  await gateway?.stop();
  await flipped?.stop();
  await front?.close();
  await flipper?.close();
  await svc?.stop();
  await back?.close();
  await model?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const openai = (url: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: key, organization: TENANT, maxRetries: 0 });
const api = (method: string, path: string, body?: unknown) => request(gateway.url, method, path, body, { authorization: `Bearer ${key}` });

describe('every call through the gateway, and the host sees nothing', () => {
  it('memory add, batch add, search, list, PATCH, delete; embeddings; chat plain, streamed and with tools; Responses, plain and streamed', async () => {
    const added = await api('POST', '/v1/memory', { tenant_id: TENANT, content: `first ${CANARY}` });
    expect(added.status, added.text).toBe(200);
    const batch = await api('POST', '/v1/memory', { memories: [{ tenant_id: TENANT, content: `second ${CANARY}` }, { tenant_id: TENANT, content: `third ${CANARY}` }] });
    expect(batch.status, batch.text).toBe(200);
    const searched = await api('POST', '/v1/memory/search', { tenant_id: TENANT, query: CANARY, top_k: 5 });
    expect(searched.body.data.length).toBeGreaterThan(0);
    const listed = await api('GET', `/v1/memory?tenant_id=${TENANT}`);
    expect(listed.body.data.map((m: { content: string }) => m.content)).toContain(`first ${CANARY}`);
    const patched = await api('PATCH', `/v1/memory/${added.body.id}?tenant_id=${TENANT}`, { content: `patched ${CANARY}` });
    expect(patched.body.content).toBe(`patched ${CANARY}`);
    expect((await api('DELETE', `/v1/memory/${added.body.id}?tenant_id=${TENANT}`)).status).toBe(200);

    const client = openai(gateway.url);
    expect((await client.embeddings.create({ model: 'static-sif-100d', input: CANARY })).data[0].embedding).toHaveLength(100);
    const chat = await client.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: `plain ${CANARY}` }] });
    expect(chat.choices[0].message.content).toBe(`echo: plain ${CANARY}`);
    // Seven canaries: each third the echo model streams holds a whole one.
    const long = Array.from({ length: 7 }, () => CANARY).join(' ');
    let text = '';
    for await (const chunk of await client.chat.completions.create({ model: 'echo', stream: true, messages: [{ role: 'user', content: long }] })) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe(`echo: ${long}`);
    const tools = await client.chat.completions.create({ model: 'tool-client', tools: [weather], messages: [{ role: 'user', content: `weather ${CANARY}` }] });
    expect(tools.choices[0].message.tool_calls?.[0]).toMatchObject({ function: { name: 'get_weather' } });
    const response = await client.responses.create({ model: 'echo', input: `responses ${CANARY}` });
    expect(response.output_text).toBe(`echo: responses ${CANARY}`);
    let streamed = '';
    for await (const event of await client.responses.create({ model: 'echo', input: long, stream: true })) if (event.type === 'response.output_text.delta') streamed += event.delta;
    expect(streamed).toBe(`echo: ${long}`);
    // The model did get the canary and the tenant's memories (positive control).
    expect(JSON.stringify(model.requests)).toContain(CANARY);
  });

  it('no recorded byte, on either side of the proxy, holds a canary, the tenant, the API key or a route', () => {
    for (const bytes of recorded()) expect(bytes.length).toBeGreaterThan(10_000);
    for (const needle of [CANARY, TENANT, key, key.slice(4, 20), ...ROUTES, 'get_weather']) expect(holds(needle), needle).toBe(0);
    // What the host does see: sealed envelopes and streams (and the public attestation).
    expect(holds('POST /v1/sealed HTTP/1.1')).toBe(1);
    expect(holds('POST /v1/sealed/stream HTTP/1.1')).toBe(1);
  });
});

describe('a byte flipped by the host', () => {
  /** Flips one bit of the sealed answer: a byte of the reply's box, or one base64 character of a stream's first data frame. */
  const flipOne = (body: Buffer) => {
    const text = body.toString('latin1');
    if (!text.startsWith('data: ')) {
      // A sealed reply: nonce (24 bytes) ‖ box.
      const bytes = Buffer.from(body);
      bytes[40] ^= 0x01;
      return bytes;
    }
    // In a stream: the third event, the first data frame (after the header and the head).
    const at = text.split('\n\n').slice(0, 2).join('\n\n').length + 2 + 20;
    const swapped = text[at] === 'A' ? 'B' : 'A';
    return Buffer.from(text.slice(0, at) + swapped + text.slice(at + 1), 'latin1');
  };

  it('gives the caller an error, never altered content: a memory list, a chat, a streamed chat', async () => {
    flipper.tamper = (exchange) => (exchange.url.startsWith('/v1/sealed') ? { ...exchange, body: flipOne(exchange.body) } : exchange);
    try {
      const listed = await request(flipped.url, 'GET', `/v1/memory?tenant_id=${TENANT}`, undefined, { authorization: `Bearer ${key}` });
      expect(listed.status).toBe(502);
      // The sealed reply does not open: the box, which authenticates it, caught the flip.
      expect(listed.body.error).toMatchObject({ code: 'gateway_check_failed', message: expect.stringMatching(/sealed reply check failed: the sealed reply does not open/) });
      expect(listed.text).not.toContain(CANARY);
      const client = openai(flipped.url);
      await expect(client.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'flip me' }] })).rejects.toMatchObject({ status: 502, code: 'gateway_check_failed' });
      const stream = await client.chat.completions.create({ model: 'echo', stream: true, messages: [{ role: 'user', content: 'flip my stream' }] }).catch((e: unknown) => e);
      let text = '';
      const failed = await (async () => {
        if (stream instanceof Error) return stream;
        for await (const chunk of stream as AsyncIterable<{ choices: { delta: { content?: string } }[] }>) text += chunk.choices[0]?.delta.content ?? '';
        return undefined;
      })().catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(Error);
      expect('echo: flip my stream'.startsWith(text)).toBe(true);
    } finally {
      flipper.tamper = (exchange) => exchange;
    }
  });

  it('a 429 or 503 the host makes itself keeps its status (the client backs off), and nothing else of it passes', async () => {
    const HOST_TEXT = 'host-written text that must not reach the client';
    for (const [status, code, retryAfter, passed] of [[429, 'gateway_service_rate_limited', '7', '7'], [503, 'gateway_service_unavailable', 'Wed, 21 Oct 2099 07:28:00 GMT', null]] as const) {
      flipper.tamper = (exchange) => (exchange.url.startsWith('/v1/sealed')
        ? { ...exchange, status, headers: { 'content-type': 'application/json', 'retry-after': retryAfter }, body: Buffer.from(JSON.stringify({ error: { message: HOST_TEXT } })) }
        : exchange);
      try {
        const listed = await request(flipped.url, 'GET', `/v1/memory?tenant_id=${TENANT}`, undefined, { authorization: `Bearer ${key}` });
        expect(listed.status).toBe(status);
        expect(listed.body.error).toMatchObject({ code, message: expect.stringMatching(/not signed by the enclave/) });
        expect(listed.headers.get('retry-after')).toBe(passed);
        expect(listed.text).not.toContain(HOST_TEXT);
        // The openai client reads it as what it is (and would retry it; here it is told not to).
        const client = openai(flipped.url);
        const failed = await client.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'busy?' }] }).catch((e: unknown) => e);
        expect(failed).toBeInstanceOf(status === 429 ? OpenAI.RateLimitError : OpenAI.InternalServerError);
        expect(failed).toMatchObject({ status, code });
      } finally {
        flipper.tamper = (exchange) => exchange;
      }
    }
  });

  it('unflipped, the same relay passes everything (the flip is the only change)', async () => {
    const listed = await request(flipped.url, 'GET', `/v1/memory?tenant_id=${TENANT}`, undefined, { authorization: `Bearer ${key}` });
    expect(listed.status).toBe(200);
  });
});
