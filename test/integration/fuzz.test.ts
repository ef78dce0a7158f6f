/**
 * Property-based fuzzing of the running two-process service over raw HTTP: thousands of
 * malformed, oversized, deeply nested, odd-unicode and prototype-pollution requests, bad
 * query strings and bad headers, to every endpoint. Every answer must be a 2xx/4xx (no
 * 5xx: nothing upstream can fail here and requests go one at a time, so no documented
 * 502/503/504 case applies), every error must have the OpenAI shape, and both processes
 * must be alive and unpolluted at the end. fast-check prints the seed of any failure.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request, type JsonResponse } from '../helpers/http.js';
import { issueKey } from '../helpers/processes.js';
import { rawRequest } from '../helpers/raw-http.js';
import { startService, type RunningService } from '../helpers/service.js';

let svc: RunningService;
let dir: string;
let port: number;
let key: string; // holds fz and fz2
let otherKey: string; // holds other
const stats = { requests: 0, byStatus: new Map<number, number>() };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-fuzz-'));
  const file = join(dir, 'keys.json');
  key = issueKey(file, ['fz', 'fz2']);
  otherKey = issueKey(file, ['other']);
  svc = await startService({
    API_KEYS_FILE: file, RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0', HTTP_RECEIVE_TIMEOUT_MS: '2000', LOG_LEVEL: 'warn',
  });
  port = Number(new URL(svc.baseUrl).port);
});
afterAll(async () => {
  await svc?.stop();
  rmSync(dir, { recursive: true, force: true });
  const counts = [...stats.byStatus.entries()].sort(([a], [b]) => a - b).map(([s, n]) => `${s}×${n}`).join(' ');
  console.log(`fuzz: ${stats.requests} requests; statuses ${counts}`);
});

// ---------------------------------------------------------------- building requests

interface FuzzRequest {
  method: string;
  target: string;
  headers: [string, string][];
  body?: Buffer;
  /** How the body is framed: honest Content-Length, one too short, chunked, or none. */
  framing: 'length' | 'short' | 'chunked' | 'none';
}

function serialize(r: FuzzRequest): Buffer {
  const head = [`${r.method} ${r.target} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close', ...r.headers.map(([k, v]) => `${k}: ${v}`)];
  const body = r.body ?? Buffer.alloc(0);
  if (r.framing === 'length') head.push(`Content-Length: ${body.length}`);
  if (r.framing === 'short') head.push(`Content-Length: ${Math.max(0, body.length - 1)}`);
  if (r.framing === 'chunked') head.push('Transfer-Encoding: chunked');
  const payload = r.framing === 'chunked'
    ? Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from(body.length ? '\r\n0\r\n\r\n' : '\r\n')])
    : r.framing === 'none' ? Buffer.alloc(0) : body;
  return Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'latin1'), payload]);
}

/** Percent-encodes the UTF-8 bytes of a string (lone surrogates become U+FFFD, as a browser would send). */
const pct = (s: string) => [...Buffer.from(s, 'utf8')].map((b) => (/[A-Za-z0-9._~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, '0')}`)).join('');

const nastyUnits = [
  '\uD800', '\uDFFF', '\uDBFF\uDFFF', '\u0000', '\u0001', '\u007F', '\u202E', '\u200F', '\u200B', '\uFEFF', '\uFFFF', '\u0085',
  '\u2028', '\u2029', '👩‍👩‍👧‍👦', '🦄', 'e\u0301', 'ﷺ', '\\', '"', "'", '%', '&', '=', '?', '#', '/', '..', '\r\n', '\t', ' ',
  '<script>', '${x}', 'null', '__proto__', 'constructor', 'prototype', 'fz', 'a',
];
const unit = fc.oneof(fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), fc.constantFrom(...nastyUnits));
const oddString = fc.string({ unit, maxLength: 30 });
const tenant = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('fz', 'fz', 'fz', 'fz2', 'other') },
  { weight: 1, arbitrary: fc.constantFrom('FZ', 'fz ', '', 'a'.repeat(129), 'x/y', 'fz\u0000', 'nobody') },
  { weight: 1, arbitrary: oddString },
);
/** Text with some non-space character (so the schema accepts it), odd characters included. */
const someText = fc.tuple(oddString, fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }), oddString).map(([a, b, c]) => `${a}${b.trim() || 'x'}${c}`);
const json = fc.jsonValue({ maxDepth: 3, stringUnit: unit });
const method = fc.constantFrom('GET', 'POST', 'DELETE', 'PUT', 'PATCH', 'HEAD', 'OPTIONS', 'TRACE', 'FOO', 'get');

/**
 * Header bytes go out as latin1. Most values keep to bytes HTTP allows, so the request
 * reaches the service; one in ten keeps its control characters for the HTTP parser. A
 * bare CR or LF would end the header: that case is sent separately.
 */
const headerSafe = (s: string, keepControls: boolean) =>
  // Control characters are exactly what this header generator must recognise.
  // eslint-disable-next-line no-control-regex
  [...s].map((c) => (c.charCodeAt(0) > 0xff ? '?' : !keepControls && /[\x00-\x08\x0a-\x1f\x7f]/.test(c) ? ' ' : c)).join('').replace(/[\r\n]/g, ' ');
const headerValue = fc.tuple(fc.oneof(oddString, fc.string({ unit: 'binary-ascii', maxLength: 40 })), fc.integer({ min: 0, max: 9 }))
  .map(([s, n]) => headerSafe(s, n === 0));
const authorization = fc.oneof(
  { weight: 6, arbitrary: fc.constant<string | undefined>('KEY') },
  { weight: 1, arbitrary: fc.constant<string | undefined>('OTHER') },
  { weight: 1, arbitrary: fc.constant<string | undefined>(undefined) },
  { weight: 2, arbitrary: fc.constantFrom('Bearer', 'Bearer ', 'bearer x', 'Basic Zm9vOmJhcg==', 'Bearer \u00ff\u00fe', `Bearer ${'a'.repeat(5000)}`, 'Bearer a b c', 'Bearer agk_=====', 'Token x') },
  { weight: 1, arbitrary: headerValue },
);
const extraHeaders = fc.array(fc.tuple(
  fc.constantFrom('organization_id', 'OpenAI-Organization', 'X-Request-Id', 'Accept', 'Content-Encoding', 'Expect', 'X-Forwarded-For', 'Upgrade', 'Cookie', 'Range', 'If-None-Match', 'Transfer-Encoding'),
  headerValue,
), { maxLength: 3 });
const contentType = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom<string | undefined>('application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON') },
  { weight: 2, arbitrary: fc.constantFrom<string | undefined>(
    'application/json; charset=utf-16', 'application/json;;;', 'text/plain', 'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x', '*/*', '', undefined,
  ) },
);

// Bodies: near-valid records with odd values, arbitrary JSON, pollution, nesting, raw bytes, oversize.
const metadata = fc.oneof(
  { weight: 4, arbitrary: fc.dictionary(fc.oneof(fc.constantFrom('source', 'tags'), someText), fc.oneof(someText, fc.integer(), fc.double(), fc.boolean(), fc.constant(null)), { maxKeys: 6 }) },
  { weight: 1, arbitrary: fc.dictionary(oddString, fc.oneof(oddString, json), { maxKeys: 20 }) },
  { weight: 1, arbitrary: json },
);
const validish = fc.record({
  content: fc.oneof({ weight: 8, arbitrary: someText }, { weight: 1, arbitrary: fc.constantFrom('a '.repeat(16_384), 'a'.repeat(32_769), ' \n\t', '') }),
  tenant_id: tenant,
  metadata,
}, { requiredKeys: ['content', 'tenant_id'] });
const mutated = fc.record({
  content: fc.oneof(oddString, json),
  tenant_id: fc.oneof(tenant, json),
  metadata: fc.oneof(metadata, json),
  extra: json,
}, { requiredKeys: [] }).map(({ extra, ...rest }) => (extra === undefined ? rest : { ...rest, [JSON.stringify(extra).slice(0, 10)]: extra }));
const addBody = fc.oneof({ weight: 3, arbitrary: validish }, { weight: 1, arbitrary: mutated });
const pollution = fc.constantFrom(
  '{"__proto__":{"top_k":1}}',
  '{"content":"x","tenant_id":"fz","__proto__":{"top_k":1}}',
  '{"content":"x","tenant_id":"fz","metadata":{"__proto__":{"top_k":1}}}',
  '{"content":"x","tenant_id":"fz","constructor":{"prototype":{"top_k":1}}}',
  '{"content":"x","tenant_id":"fz","metadata":{"constructor":{"prototype":{"top_k":1}}}}',
  '{"content":"x","tenant_id":"fz","metadata":{"\\u005f_proto__":{"top_k":1}}}',
  '{"content":"x","tenant_id":"fz","metadata":{"__pro\\u0074o__":{"top_k":1}}}',
  '{"content":"x","tenant_id":"fz","metadata":{"__proto__":null}}',
  '{"content":"x","tenant_id":"fz","metadata":{"constructor":"x","prototype":"y","hasOwnProperty":"z","toString":"w"}}',
  '[{"__proto__":{"top_k":1}}]',
  '{"model":"m","messages":[{"role":"user","content":"hi","__proto__":{"top_k":1}}]}',
  '{"model":"m","messages":[{"role":"user","content":"hi"}],"constructor":{"prototype":{"top_k":1}}}',
);
const nested = fc.tuple(fc.integer({ min: 100, max: 100_000 }), fc.constantFrom('[', '{"a":')).map(([n, open]) => {
  const close = open === '[' ? ']' : '}';
  return `{"content":"x","tenant_id":"fz","metadata":{"deep":${open.repeat(n)}1${close.repeat(n)}}}`;
});
const chatBody = fc.record({
  model: fc.oneof(oddString, json),
  messages: fc.oneof(fc.array(fc.record({ role: fc.oneof(fc.constantFrom('user', 'assistant', 'system', 'tool', ''), oddString), content: fc.oneof(oddString, json) }, { requiredKeys: [] }), { maxLength: 4 }), json),
  stream: fc.oneof(fc.boolean(), json),
}, { requiredKeys: [] });
const invalidUtf8 = fc.constantFrom(
  Buffer.from([0xff, 0xfe, 0x7b, 0x7d]), Buffer.from('{"content":"\xed\xa0\x80","tenant_id":"fz"}', 'latin1'),
  Buffer.from('{"content":"\xc0\x80","tenant_id":"fz"}', 'latin1'), Buffer.from('{"content":"\xf8\x88\x80\x80\x80","tenant_id":"fz"}', 'latin1'),
  Buffer.from('\ufeff{"content":"bom","tenant_id":"fz"}', 'utf8'), Buffer.from('{"content":"x","tenant_id":"fz"}\u0000', 'utf8'),
);
const body = fc.oneof(
  { weight: 6, arbitrary: addBody.map((b) => Buffer.from(JSON.stringify(b))) },
  { weight: 3, arbitrary: json.map((v) => Buffer.from(JSON.stringify(v))) },
  { weight: 3, arbitrary: pollution.map((s) => Buffer.from(s)) },
  { weight: 2, arbitrary: chatBody.map((b) => Buffer.from(JSON.stringify(b))) },
  { weight: 1, arbitrary: nested.map((s) => Buffer.from(s)) },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)) },
  { weight: 2, arbitrary: invalidUtf8 },
  { weight: 2, arbitrary: fc.string({ unit, maxLength: 200 }).map((s) => Buffer.from(s)) },
);

const queryKey = fc.oneof(
  fc.constantFrom('query', 'tenant_id', 'top_k', 'nonce', '__proto__', '__proto__[top_k]', 'constructor[prototype][top_k]', 'tenant_id[]', 'query[0]', 'top_k[$gt]', ''),
  oddString.map(pct),
);
const queryValue = fc.oneof(
  oddString.map(pct),
  fc.constantFrom('fz', 'fz2', 'other', '5', '0', '-1', '101', '1e2', '2.5', 'NaN', '0x10', '%', '%zz', '%ff', '%00', '%C0%80', '%ED%A0%80', 'a'.repeat(5000), 'de', 'abcd'.repeat(33)),
);
const garbageQuery = fc.array(fc.tuple(queryKey, queryValue, fc.boolean()), { maxLength: 6 })
  .map((pairs) => pairs.map(([k, v, withValue]) => (withValue ? `${k}=${v}` : k)).join('&'));
const rarely = <T>(arb: fc.Arbitrary<T>) => fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: arb });
const validishQuery = fc.tuple(someText, tenant, rarely(fc.oneof(fc.integer({ min: 1, max: 100 }).map(String), queryValue)), rarely(garbageQuery))
  .map(([q, t, k, extra]) => [`query=${pct(q)}`, `tenant_id=${pct(t)}`, ...(k === undefined ? [] : [`top_k=${k}`]), ...(extra ? [extra] : [])].join('&'));
const queryString = fc.oneof({ weight: 2, arbitrary: validishQuery }, { weight: 1, arbitrary: garbageQuery });
/** Ids of memories the fuzzing created, so lookups and deletions also hit real records. */
const createdIds: string[] = [];
const segment = fc.oneof(
  fc.nat().map((i) => createdIds[i % Math.max(1, createdIds.length)] ?? 'mem_00000000000000000000000000000001'),
  fc.constantFrom('mem_00000000000000000000000000000000', '..', '.', '%2F', '%2e%2e', '%00', '%', '%zz', 'a'.repeat(129), 'a'.repeat(300), ';x', '*', '~'),
  oddString.map(pct),
);
const itemQuery = fc.oneof({ weight: 3, arbitrary: tenant.map((t) => `tenant_id=${pct(t)}`) }, { weight: 1, arbitrary: garbageQuery });
const path = fc.oneof(
  fc.constantFrom('/v1/memory', '/v1/memory/', '/v1/attestation', '/v1/chat/completions', '/healthz', '/', '/v1', '/v2/memory', '//v1//memory', '/v1/memory/../attestation', '/V1/MEMORY', '*', '/v1/memory;x'),
  segment.map((s) => `/v1/memory/${s}`),
  fc.webPath(),
);
const target = fc.oneof(
  { weight: 5, arbitrary: fc.tuple(path, queryString).map(([p, q]) => (q ? `${p}?${q}` : p)) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 40 }).map((s) => `/${s.replace(/[\r\n ]/g, '')}`) },
  { weight: 1, arbitrary: fc.constantFrom('http://evil.example/v1/memory?tenant_id=fz&query=x', 'v1/memory', '/v1/memory?query=x&tenant_id=fz#frag', `/v1/memory?${'q=1&'.repeat(2000)}`) },
);

const fuzzRequest = fc.record({
  method,
  target,
  auth: authorization,
  contentType,
  extra: extraHeaders,
  body: fc.option(body, { nil: undefined }),
  framing: fc.constantFrom<FuzzRequest['framing']>('length', 'length', 'length', 'length', 'short', 'chunked', 'none'),
}).map(({ auth, contentType: ct, extra, ...r }): FuzzRequest => {
  const headers: [string, string][] = [];
  if (auth !== undefined) headers.push(['Authorization', auth === 'KEY' ? `Bearer ${key}` : auth === 'OTHER' ? `Bearer ${otherKey}` : auth]);
  if (ct !== undefined) headers.push(['Content-Type', ct]);
  headers.push(...extra.filter(([k]) => k !== 'Transfer-Encoding' || r.framing !== 'chunked'));
  return { ...r, headers };
});

// --------------------------------------------------------------- checking answers

function checkAnswer(r: FuzzRequest, res: JsonResponse): void {
  stats.requests++;
  stats.byStatus.set(res.status, (stats.byStatus.get(res.status) ?? 0) + 1);
  // FUZZ_DEBUG=1 prints every refusal, to see what the generators reach.
  if (process.env.FUZZ_DEBUG && res.status >= 400) console.log('fuzz', res.status, res.body?.error?.code, res.body?.error?.param, JSON.stringify([r.method, r.target.slice(0, 80)]));
  const what = `${r.method} ${r.target.slice(0, 200)} → ${res.status} ${res.text.slice(0, 300)}`;
  expect(res.status, `no answer: ${what}`).toBeGreaterThanOrEqual(200);
  expect(res.status, what).toBeLessThan(500);
  expect(res.text, what).not.toMatch(/\bat \S+ \(|node_modules|\.[jt]s:\d+/);
  if (r.method === 'HEAD') return;
  if (res.status >= 400) {
    expect(res.headers.get('content-type'), what).toMatch(/^application\/json/);
    expect(res.body, what).toBeTypeOf('object');
    expect(Object.keys(res.body), what).toEqual(['error']);
    expect(Object.keys(res.body.error).sort(), what).toEqual(['code', 'message', 'param', 'type']);
    expect(res.body.error.message, what).toBeTypeOf('string');
    expect(res.body.error.type, what).toBeTypeOf('string');
  } else if (/^\/(?:[?#].*)?$/.test(r.target)) {
    // The web console's page (proxy/console-routes.ts), whatever the query string.
    expect(res.headers.get('content-type'), what).toMatch(/^text\/html/);
  } else if (!res.headers.get('content-type')?.startsWith('text/event-stream')) {
    expect(res.body, `2xx without a JSON body: ${what}`).not.toBeUndefined();
    if (res.body?.object === 'memory' && createdIds.length < 500) createdIds.push(res.body.id);
  }
}

const send = async (r: FuzzRequest) => checkAnswer(r, await rawRequest(port, serialize(r), { timeoutMs: 15_000 }));

// ---------------------------------------------------------------------- the runs

describe('fuzzing every endpoint over HTTP', () => {
  it('answers mixed hostile requests with 2xx/4xx in the OpenAI error shape', async () => {
    await fc.assert(fc.asyncProperty(fuzzRequest, send), { numRuns: 2000 });
  });

  it('answers hostile memory writes', async () => {
    const writeBody = fc.oneof({ weight: 1, arbitrary: validish.map((b) => Buffer.from(JSON.stringify(b))) }, { weight: 1, arbitrary: body });
    const write = fc.record({ body: writeBody, auth: authorization, ct: contentType, framing: fc.constantFrom<FuzzRequest['framing']>('length', 'chunked') })
      .map(({ body: b, auth, ct, framing }): FuzzRequest => ({
        method: 'POST', target: '/v1/memory', body: b, framing,
        headers: [
          ...(auth === undefined ? [] : [['Authorization', auth === 'KEY' ? `Bearer ${key}` : auth === 'OTHER' ? `Bearer ${otherKey}` : auth] as [string, string]]),
          ...(ct === undefined ? [] : [['Content-Type', ct] as [string, string]]),
        ],
      }));
    await fc.assert(fc.asyncProperty(write, send), { numRuns: 1500 });
  });

  it('answers hostile memory queries, lookups and deletions', async () => {
    const read = fc.tuple(fc.constantFrom('GET', 'DELETE', 'GET'), fc.oneof(queryString.map((q) => `/v1/memory?${q}`), fc.tuple(segment, itemQuery).map(([s, q]) => `/v1/memory/${s}?${q}`)), authorization)
      .map(([m, t, auth]): FuzzRequest => ({
        method: m, target: t, framing: 'none',
        headers: auth === undefined ? [] : [['Authorization', auth === 'KEY' ? `Bearer ${key}` : auth === 'OTHER' ? `Bearer ${otherKey}` : auth]],
      }));
    await fc.assert(fc.asyncProperty(read, send), { numRuns: 1200 });
  });

  it('answers a few oversized and malformed-framing requests', async () => {
    const big = Buffer.from(JSON.stringify({ content: 'a'.repeat(1024 * 1024), tenant_id: 'fz' }));
    const auth: [string, string] = ['Authorization', `Bearer ${key}`];
    const ct: [string, string] = ['Content-Type', 'application/json'];
    for (const r of [
      { method: 'POST', target: '/v1/memory', headers: [auth, ct], body: big, framing: 'length' },
      { method: 'POST', target: '/v1/memory', headers: [auth, ct], body: big, framing: 'chunked' },
      { method: 'POST', target: '/v1/memory', headers: [auth, ct, ['Content-Length', '5']], body: Buffer.from('{}'), framing: 'length' },
      { method: 'POST', target: '/v1/memory', headers: [auth, ct, ['Transfer-Encoding', 'chunked']], body: Buffer.from('{}'), framing: 'length' },
      { method: 'POST', target: '/v1/memory', headers: [auth, ct, ['Content-Length', '-1']], body: Buffer.from('{}'), framing: 'none' },
      { method: 'POST', target: '/v1/memory', headers: [auth, ct, ['Content-Encoding', 'gzip']], body: Buffer.from('{"content":"x","tenant_id":"fz"}'), framing: 'length' },
      { method: 'GET', target: '/v1/memory?tenant_id=fz&query=x', headers: [auth, ['X-Bad', 'a\u0000b']], framing: 'none' },
      { method: 'GET', target: '/v1/memory?tenant_id=fz&query=x', headers: [auth, auth], framing: 'none' },
      { method: 'GET', target: '/v1/memory?tenant_id=fz&query=x', headers: [['Authorization', `Bearer ${key}\rX-Injected: 1`]], framing: 'none' },
      { method: 'GET', target: `/v1/memory?tenant_id=fz&query=${'x'.repeat(15_000)}`, headers: [auth], framing: 'none' },
    ] as FuzzRequest[]) await send(r);
    // A request line that never ends, and a bare CR inside the headers.
    checkAnswer({ method: 'GET', target: '/', headers: [], framing: 'none' }, await rawRequest(port, `GET /${'a'.repeat(20_000)}`, { timeoutMs: 15_000 }));
    checkAnswer({ method: 'GET', target: '/', headers: [], framing: 'none' }, await rawRequest(port, 'GET / HTTP/1.1\r\nHost: x\rY: z\r\n\r\n', { timeoutMs: 15_000 }));
  });

  it('left both processes up, the tenants confined and the prototypes clean', async () => {
    expect(svc.enclave.exitCode).toBeNull();
    expect(svc.proxy.exitCode).toBeNull();
    expect((await request(svc.baseUrl, 'GET', '/healthz')).status).toBe(200);
    const auth = { authorization: `Bearer ${key}` };
    // Three memories in a fresh tenant; a query without top_k must use the default (5),
    // not a top_k planted on Object.prototype by a pollution payload.
    const tenantId = `canary-${Date.now()}`;
    const file = join(dir, 'keys.json');
    const canaryKey = issueKey(file, [tenantId]);
    svc.enclave.kill('SIGHUP');
    const canary = { authorization: `Bearer ${canaryKey}` };
    const { waitFor } = await import('../helpers/service.js');
    await waitFor(async () => (await request(svc.baseUrl, 'GET', `/v1/memory?tenant_id=${tenantId}&query=x`, undefined, canary)).status === 200, 10_000);
    for (const c of ['red apples', 'green apples', 'yellow apples']) {
      const res = await request(svc.baseUrl, 'POST', '/v1/memory', { content: c, tenant_id: tenantId }, canary);
      expect(res.status).toBe(200);
      expect(res.body.metadata).toEqual({});
    }
    const found = await request(svc.baseUrl, 'GET', `/v1/memory?tenant_id=${tenantId}&query=apples`, undefined, canary);
    expect(found.body.top_k).toBe(5);
    expect(found.body.data).toHaveLength(3);
    // The fuzzing key still cannot reach another tenant.
    expect((await request(svc.baseUrl, 'GET', `/v1/memory?tenant_id=${tenantId}&query=apples`, undefined, auth)).status).toBe(403);
    expect(stats.requests).toBeGreaterThan(4500);
  });
});
