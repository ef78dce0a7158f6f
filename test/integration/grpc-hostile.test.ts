/**
 * The enclave does not trust the proxy: this test skips the proxy and calls the enclave's
 * gRPC service directly, as a compromised host could, with bad messages. The enclave must
 * refuse them with 4xx replies in the OpenAI error shape (or, for bytes that are not a
 * message at all, a gRPC error), enforce API keys itself, and stay up.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { channelOptions, enclaveProto, type ApiReplyIn, type EnclaveClient, type ExchangeReplyIn } from '../../common/proto.js';
import { request } from '../helpers/http.js';
import { issueKey } from '../helpers/processes.js';
import { startService, type RunningService } from '../helpers/service.js';
import { logsCaughtUp } from '../helpers/log-barrier.js';

/** Every API request travels on one RPC (Exchange, a stream); the HTTP method and path pick the route. */
type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE' | 'PUT' | '';
const methods: Method[] = ['GET', 'POST', 'PATCH', 'DELETE', 'PUT', ''];

let svc: RunningService;
let dir: string;
let key: string; // holds g1
let client: EnclaveClient;
let raw: grpc.Client;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-grpc-'));
  const file = join(dir, 'keys.json');
  key = issueKey(file, ['g1']);
  issueKey(file, ['g2']);
  svc = await startService({ API_KEYS_FILE: file, LOG_LEVEL: 'info' });
  client = new (enclaveProto().Enclave)(svc.enclaveAddr, grpc.credentials.createInsecure(), channelOptions);
  raw = new grpc.Client(svc.enclaveAddr, grpc.credentials.createInsecure(), channelOptions);
});
afterAll(async () => {
  client?.close();
  raw?.close();
  await svc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface Message { request_id?: string; target?: string; body?: Buffer; authorization?: string; organization?: string }
interface Outcome { reply?: ApiReplyIn; error?: grpc.ServiceError; json?: any }

function call(method: Method, message: Message): Promise<Outcome> {
  const { Exchange } = enclaveProto().Enclave.service;
  return exchange(Exchange.requestSerialize({ id: 1, request: { ...message, method }, timeout_ms: 20_000 }));
}

/** An Exchange frame around `request`: the bytes of an ApiRequest, or anything else, with no encoding of ours in the way. */
const exchangeFrame = (request: Buffer) => Buffer.concat([Buffer.from([0x08, 0x01]), field(2, request), Buffer.from([0x18, 0xa0, 0x9c, 0x01])]);

/**
 * Sends one frame on an Exchange stream of its own, as the proxy sends every request (a
 * compromised host could send anything): the reply, or the stream's gRPC error.
 */
function exchange(frame: Buffer): Promise<Outcome> {
  return new Promise((resolve) => {
    const stream = raw.makeBidiStreamRequest('/agent.enclave.v1.Enclave/Exchange', (b: Buffer) => b, (b: Buffer) => b, new grpc.Metadata(), { deadline: Date.now() + 20_000 });
    let done = false;
    const finish = (outcome: Outcome) => {
      if (done) return;
      done = true;
      stream.cancel();
      resolve(outcome);
    };
    stream.on('data', (bytes: Buffer) => {
      const answer = enclaveProto().Enclave.service.Exchange.responseDeserialize(bytes) as ExchangeReplyIn;
      if (answer.failed || !answer.reply) return finish({ error: Object.assign(new Error('the request failed in the enclave'), { code: grpc.status.INTERNAL }) as grpc.ServiceError });
      finish(withJson(answer.reply));
    });
    stream.on('error', (error: grpc.ServiceError) => finish({ error }));
    stream.on('end', () => finish({ error: Object.assign(new Error('the stream ended with no reply'), { code: grpc.status.UNKNOWN }) as grpc.ServiceError }));
    stream.write(frame);
  });
}

/** Sends bytes as the request message of the unary method `path` (only methods that do not exist are asked). */
function callRaw(path: string, bytes: Buffer): Promise<Outcome> {
  return new Promise((resolve) => {
    raw.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, bytes, new grpc.Metadata(), { deadline: Date.now() + 20_000 }, (error) => {
      resolve(error ? { error } : {});
    });
  });
}

function withJson(reply: ApiReplyIn): Outcome {
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(reply.body).toString('utf8'));
  } catch {
    json = undefined;
  }
  return { reply, json };
}

/** A refusal: a 4xx reply whose body is exactly the OpenAI error shape. */
function expectRefused(o: Outcome, status?: number, code?: string) {
  expect(o.error, o.error?.message).toBeUndefined();
  const what = `${o.reply!.status} ${Buffer.from(o.reply!.body).toString('utf8').slice(0, 300)}`;
  expect(o.reply!.status, what).toBeGreaterThanOrEqual(400);
  expect(o.reply!.status, what).toBeLessThan(500);
  if (status) expect(o.reply!.status, what).toBe(status);
  expect(Object.keys(o.json), what).toEqual(['error']);
  expect(Object.keys(o.json.error).sort(), what).toEqual(['code', 'message', 'param', 'type']);
  if (code) expect(o.json.error.code, what).toBe(code);
}

/** Encodes protobuf field `n` (length-delimited) holding `bytes`, valid UTF-8 or not. */
function field(n: number, bytes: Buffer): Buffer {
  const varint = (v: number) => {
    const out: number[] = [];
    while (v > 0x7f) { out.push((v & 0x7f) | 0x80); v >>>= 7; }
    out.push(v);
    return Buffer.from(out);
  };
  return Buffer.concat([varint((n << 3) | 2), varint(bytes.length), bytes]);
}

const validBody = (tenant: string) => Buffer.from(JSON.stringify({ content: 'direct call', tenant_id: tenant }));
const auth = () => `Bearer ${key}`;

describe('the enclave, called directly over gRPC', () => {
  it('enforces API keys itself: no proxy is trusted to have checked', async () => {
    expectRefused(await call('POST', { target: '/v1/memory', body: validBody('g1') }), 401, 'missing_api_key');
    expectRefused(await call('POST', { target: '/v1/memory', body: validBody('g1'), authorization: 'Bearer agk_forged-forged-forged-forged' }), 401, 'invalid_api_key');
    expectRefused(await call('POST', { target: '/v1/memory', body: validBody('g2'), authorization: auth() }), 403, 'tenant_not_allowed');
    expectRefused(await call('GET', { target: '/v1/memory?tenant_id=g2&query=x', authorization: auth() }), 403);
    const ok = await call('POST', { target: '/v1/memory', body: validBody('g1'), authorization: auth() });
    expect(ok.reply!.status).toBe(200);
    expectRefused(await call('GET', { target: `/v1/memory/${ok.json.id}?tenant_id=g2`, authorization: auth() }), 403);
    expectRefused(await call('DELETE', { target: `/v1/memory/${ok.json.id}?tenant_id=g2` }), 401);
    expect((await call('GET', { target: `/v1/memory/${ok.json.id}?tenant_id=g1`, authorization: auth() })).reply!.status).toBe(200);
  });

  it.each([
    ['an empty target', 'POST', ''],
    ['a relative target', 'POST', 'v1/memory'],
    ['an absolute URL', 'POST', 'http://evil.example/v1/memory'],
    ['a target over 16 KiB', 'GET', `/v1/memory?tenant_id=g1&query=${'x'.repeat(17_000)}`],
    ['a NUL in the target', 'GET', '/v1/memory\u0000?tenant_id=g1&query=x'],
    ['POST on the attestation path (405)', 'POST', '/v1/attestation'],
    ['a query on an item path', 'GET', '/v1/memory/mem_1?tenant_id=g1&query=x'],
    ['a method no route takes', 'PUT', '/v1/memory?tenant_id=g1'],
    ['no method at all', '', '/v1/memory?tenant_id=g1'],
    ['the memory path without a tenant', 'GET', '/v1/memory'],
    ['a nested item path', 'DELETE', '/v1/memory/a/b?tenant_id=g1'],
    ['a PATCH with no change', 'PATCH', '/v1/memory/mem_1?tenant_id=g1'],
    ['a bad percent-escape in the id', 'GET', '/v1/memory/%zz?tenant_id=g1'],
    ['an id over 128 characters', 'GET', `/v1/memory/${'a'.repeat(200)}?tenant_id=g1`],
    ['a repeated, odd tenant', 'GET', '/v1/memory?tenant_id=g1&tenant_id=%00&query=x'],
    ['a pollution query', 'GET', '/v1/memory?tenant_id=g1&query=x&__proto__[top_k]=1'],
  ] as [string, Method, string][])('refuses %s', async (_name, method, target) => {
    expectRefused(await call(method, { target, body: validBody('g1'), authorization: auth() }));
  });

  it.each([
    ['random bytes', Buffer.from([0x00, 0xff, 0x13, 0x37, 0x7b])],
    ['invalid UTF-8', Buffer.from('{"content":"\xed\xa0\x80","tenant_id":"g1"}', 'latin1')],
    ['an overlong encoding', Buffer.from('{"content":"\xc0\xaf","tenant_id":"g1"}', 'latin1')],
    ['a __proto__ key', Buffer.from('{"content":"x","tenant_id":"g1","__proto__":{"top_k":1}}')],
    ['a __proto__ key in metadata', Buffer.from('{"content":"x","tenant_id":"g1","metadata":{"__proto__":{"top_k":1}}}')],
    ['an escaped __proto__ key', Buffer.from('{"content":"x","tenant_id":"g1","metadata":{"\\u005f_proto__":{"a":1}}}')],
    ['constructor.prototype', Buffer.from('{"content":"x","tenant_id":"g1","metadata":{"constructor":{"prototype":{"a":1}}}}')],
    ['deep nesting', Buffer.from(`{"content":"x","tenant_id":"g1","metadata":{"a":${'['.repeat(200_000)}${']'.repeat(200_000)}}}`)],
    ['a body over 1 MiB', Buffer.from(JSON.stringify({ content: 'a'.repeat(2 * 1024 * 1024), tenant_id: 'g1' }))],
    ['an empty body', Buffer.alloc(0)],
    ['a JSON array', Buffer.from('[{"content":"x","tenant_id":"g1"}]')],
    ['an extra field', Buffer.from('{"content":"x","tenant_id":"g1","admin":true}')],
    ['a content over the limit', Buffer.from(JSON.stringify({ content: 'a'.repeat(40_000), tenant_id: 'g1' }))],
  ])('refuses a body of %s', async (_name, body) => {
    expectRefused(await call('POST', { target: '/v1/memory', body, authorization: auth() }));
  });

  it('refuses odd and huge header fields, and keeps a hostile request id out of its logs', async () => {
    const body = validBody('g1');
    expectRefused(await call('POST', { target: '/v1/memory', body, authorization: `Bearer ${'a'.repeat(1024 * 1024)}` }), 401);
    expectRefused(await call('POST', { target: '/v1/memory', body, authorization: `Bearer ${key}\u0000` }), 401);
    expectRefused(await call('POST', { target: '/v1/memory', body, authorization: `Bearer ${key.slice(0, -1)}\uD800` }), 401);
    const marker = `INJECTED-${'z'.repeat(100_000)}`;
    const ok = await call('POST', { target: '/v1/memory', body, authorization: auth(), request_id: `x\n{"level":60,"msg":"${marker}"}`, organization: '\uFFFF'.repeat(10_000) });
    expect(ok.reply!.status).toBe(200);
    await logsCaughtUp(svc.baseUrl, svc.output);
    expect(svc.output()).not.toContain('INJECTED-');
    expect(svc.output()).toContain('"reqId":"invalid"');
  });

  it('refuses invalid UTF-8 inside the message\'s own string fields', async () => {
    const bytes = Buffer.concat([
      field(2, Buffer.from('/v1/memory?tenant_id=g1&query=\xff\xfe\xed\xa0\x80', 'latin1')),
      field(4, Buffer.from(`Bearer ${key}\xff`, 'latin1')),
      field(6, Buffer.from('GET')),
    ]);
    expectRefused(await exchange(exchangeFrame(bytes)));
    const target = Buffer.concat([field(2, Buffer.from('/v1/memory', 'latin1')), field(3, validBody('g1')), field(4, Buffer.from(`Bearer \xc0${key}`, 'latin1')), field(6, Buffer.from('POST'))]);
    expectRefused(await exchange(exchangeFrame(target)), 401);
    const method = Buffer.concat([field(2, Buffer.from('/v1/memory', 'latin1')), field(3, validBody('g1')), field(4, Buffer.from(`Bearer ${key}`)), field(6, Buffer.from('P\xffST', 'latin1'))]);
    expectRefused(await exchange(exchangeFrame(method)));
  });

  it('answers bytes that are no message with a gRPC error, and unknown methods with UNIMPLEMENTED', async () => {
    for (const bytes of [Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f]), Buffer.from([0x12, 0x80]), Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x41])]) {
      for (const o of [await exchange(exchangeFrame(bytes)), await exchange(bytes)]) {
        if (o.error) expect(o.error.code).not.toBe(grpc.status.UNAVAILABLE);
        else expectRefused(o);
      }
    }
    const unknown = await callRaw('/agent.enclave.v1.Enclave/DropAllTenants', Buffer.alloc(0));
    // The RPCs of the old channels are gone (one per route, then the unary Call): every request goes through Exchange.
    expect((await callRaw('/agent.enclave.v1.Enclave/AddMemory', Buffer.alloc(0))).error?.code).toBe(grpc.status.UNIMPLEMENTED);
    expect((await callRaw('/agent.enclave.v1.Enclave/Call', Buffer.alloc(0))).error?.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(unknown.error?.code).toBe(grpc.status.UNIMPLEMENTED);
    // A message over the channel's 8 MiB cap is refused by the transport.
    const huge = await call('POST', { target: '/v1/memory', body: Buffer.alloc(9 * 1024 * 1024, 0x61), authorization: auth() });
    expect(huge.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
  });

  it('never answers a random message with a 5xx (property)', async () => {
    const target = fc.oneof(
      fc.constantFrom('/v1/memory', '/v1/memory?tenant_id=g1&query=x', '/v1/memory/mem_0?tenant_id=g1', '/v1/memory/search', '/v1/attestation',
        '/v1/attestation?nonce=zz', '/v1/models', '/v1/models/x', '/v1/embeddings', '/v1/responses', '/v1/sealed', '/', ''),
      fc.string({ unit: 'binary', maxLength: 60 }),
      fc.string({ unit: 'binary', maxLength: 60 }).map((s) => `/v1/memory?${s}`),
    );
    const message = fc.record({
      method: fc.constantFrom(...methods),
      target,
      body: fc.oneof(fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)), fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify(v) ?? ''))),
      authorization: fc.oneof(fc.constant(auth()), fc.string({ unit: 'binary', maxLength: 40 })),
      organization: fc.string({ unit: 'binary', maxLength: 20 }),
      request_id: fc.string({ maxLength: 80 }),
    });
    await fc.assert(fc.asyncProperty(message, async ({ method, ...m }) => {
      const o = await call(method, m);
      expect(o.error, o.error?.message).toBeUndefined();
      const status = o.reply!.status;
      expect(status, `${method} ${m.target} → ${status}`).toBeLessThan(500);
      if (status >= 400) expectRefused(o);
    }), { numRuns: 600 });
    // Raw bytes as messages: a reply (refused) or a gRPC error, never a dead enclave.
    await fc.assert(fc.asyncProperty(fc.uint8Array({ maxLength: 200 }), async (bytes) => {
      const o = await exchange(exchangeFrame(Buffer.from(bytes)));
      if (o.error) expect(o.error.code, o.error.message).not.toBe(grpc.status.UNAVAILABLE);
      else expect(o.reply!.status).toBeLessThan(500);
    }), { numRuns: 300 });
  });

  it('is still up and serving after all of it', async () => {
    expect(svc.enclave.exitCode).toBeNull();
    const health = await new Promise<{ ready: boolean; auth_required: boolean }>((res, rej) =>
      client.Health({}, { deadline: Date.now() + 5000 }, (e, r) => (e ? rej(e) : res(r as never))));
    expect(health).toMatchObject({ ready: true, auth_required: true });
    const viaProxy = await request(svc.baseUrl, 'POST', '/v1/memory', { content: 'still fine', tenant_id: 'g1' }, { authorization: auth() });
    expect(viaProxy.status).toBe(200);
    expect(svc.output()).not.toContain(key);
  });
});
