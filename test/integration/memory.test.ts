import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { limits } from '../../common/limits.js';
import { expectError, request } from '../helpers/http.js';
import { startService, type RunningService } from '../helpers/service.js';
import { logsCaughtUp } from '../helpers/log-barrier.js';

let svc: RunningService;
const api = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  request(svc.baseUrl, method, path, body, headers);
const add = (tenant_id: string, content: string, metadata?: object) =>
  api('POST', '/v1/memory', { content, tenant_id, ...(metadata ? { metadata } : {}) });
const query = (tenant: string, q: string, topK?: number | string) =>
  api('GET', `/v1/memory?tenant_id=${encodeURIComponent(tenant)}&query=${encodeURIComponent(q)}${topK === undefined ? '' : `&top_k=${topK}`}`);

beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.stop();
});

describe('memory over HTTP, two real processes', () => {
  it('stores a memory and returns the record', async () => {
    const res = await add('alice', 'My dog is called Rex', { source: 'chat' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      object: 'memory', tenant_id: 'alice', content: 'My dog is called Rex', metadata: { source: 'chat' },
    });
    expect(res.body.id).toMatch(/^mem_[0-9a-f]{32}$/);
    expect(Math.abs(res.body.created_at - Date.now() / 1000)).toBeLessThan(60);
  });

  it('ranks memories by meaning, most relevant first', async () => {
    for (const text of ['The invoice is due Friday', 'I prefer window seats on flights', 'Our office is in Lisbon']) {
      expect((await add('alice', text)).status).toBe(200);
    }
    const res = await query('alice', "what is my pet's name");
    expect(res.status).toBe(200);
    expect(res.body.object).toBe('list');
    expect(res.body.data[0].content).toBe('My dog is called Rex');
    const scores = res.body.data.map((d: { score: number }) => d.score);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    expect(res.body.data[0]).toMatchObject({ id: expect.stringMatching(/^mem_/), metadata: { source: 'chat' }, created_at: expect.any(Number) });
  });

  it('returns top_k results, 5 by default', async () => {
    for (let i = 0; i < 6; i++) await add('bulk', `note number ${i} about gardening and tomatoes`);
    expect((await query('bulk', 'gardening')).body.data).toHaveLength(5);
    expect((await query('bulk', 'gardening', 2)).body.data).toHaveLength(2);
    expect((await query('bulk', 'gardening', 100)).body.data).toHaveLength(6);
  });

  it('gets and deletes a memory by id; a deleted memory is gone at once', async () => {
    const { event, ...created } = (await add('carol', 'The wifi password is on the fridge')).body;
    expect(event).toBe('ADD');
    const got = await api('GET', `/v1/memory/${created.id}?tenant_id=carol`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(created);

    const del = await api('DELETE', `/v1/memory/${created.id}?tenant_id=carol`);
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ id: created.id, object: 'memory.deleted', deleted: true, receipt: { scope: 'memory', ids: [created.id] } });

    expectError(await api('GET', `/v1/memory/${created.id}?tenant_id=carol`), 404, 'memory_not_found');
    expectError(await api('DELETE', `/v1/memory/${created.id}?tenant_id=carol`), 404, 'memory_not_found');
    expect((await query('carol', 'wifi password')).body.data).toEqual([]);
  });

  it('never shows one tenant another tenant\'s memories', async () => {
    const secret = (await add('tenant-a', 'Tenant A secret: the launch code is 1234')).body;
    await add('tenant-b', 'Tenant B likes tea');
    const b = await query('tenant-b', 'launch code secret', 100);
    expect(b.body.data.map((d: { content: string }) => d.content)).toEqual(['Tenant B likes tea']);
    expect((await query('tenant-c', 'launch code')).body.data).toEqual([]);
    expectError(await api('GET', `/v1/memory/${secret.id}?tenant_id=tenant-b`), 404);
    expectError(await api('DELETE', `/v1/memory/${secret.id}?tenant_id=tenant-b`), 404);
    // Still there for its owner.
    expect((await api('GET', `/v1/memory/${secret.id}?tenant_id=tenant-a`)).status).toBe(200);
  });
});

describe('bad input gets a clear 4xx in the OpenAI error shape', () => {
  const post = (body: unknown, headers?: Record<string, string>) => api('POST', '/v1/memory', body, headers);

  it.each([
    ['missing content', { tenant_id: 't' }, 'content', 'missing_required_parameter'],
    ['missing tenant_id', { content: 'x' }, 'tenant_id', 'missing_required_parameter'],
    ['empty content', { content: '', tenant_id: 't' }, 'content', 'empty_string'],
    ['whitespace content', { content: '   \n', tenant_id: 't' }, 'content', 'invalid_value'],
    ['numeric content', { content: 5, tenant_id: 't' }, 'content', 'invalid_type'],
    ['array tenant_id', { content: 'x', tenant_id: ['t'] }, 'tenant_id', 'invalid_type'],
    ['bad tenant_id characters', { content: 'x', tenant_id: 'a/b' }, 'tenant_id', 'invalid_value'],
    ['metadata not an object', { content: 'x', tenant_id: 't', metadata: 'x' }, 'metadata', 'invalid_type'],
    ['metadata.source not a string', { content: 'x', tenant_id: 't', metadata: { source: 1 } }, 'metadata.source', 'invalid_type'],
    ['unknown field', { content: 'x', tenant_id: 't', colour: 'red' }, 'colour', 'unknown_parameter'],
    ['content over the maximum', { content: 'a'.repeat(limits.maxContentChars + 1), tenant_id: 't' }, 'content', 'string_above_max_length'],
  ])('%s', async (_name, body, param, code) => {
    const err = expectError(await post(body), 400, code);
    expect(err.param).toBe(param);
    expect(err.type).toBe('invalid_request_error');
  });

  it('accepts content at exactly the maximum', async () => {
    expect((await post({ content: 'a '.repeat(limits.maxContentChars / 2), tenant_id: 'max' })).status).toBe(200);
  });

  it('refuses invalid JSON, a non-object body, no body and the wrong content type', async () => {
    expectError(await post('{"content": "x", ', { 'content-type': 'application/json' }), 400, 'invalid_json');
    expectError(await post('[1,2]'), 400, 'invalid_type');
    expectError(await post('"just a string"'), 400, 'invalid_type');
    expectError(await api('POST', '/v1/memory', undefined, { 'content-type': 'application/json' }), 400);
    expectError(await post('content=x', { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'unsupported_media_type');
    expectError(await post('{"content":"x","tenant_id":"t"}', { 'content-type': 'text/plain' }), 415);
  });

  it('refuses prototype-pollution keys', async () => {
    expectError(await post('{"content":"x","tenant_id":"t","__proto__":{"polluted":true}}'), 400);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('refuses a body over the limit with 413', async () => {
    expectError(await post({ content: 'a'.repeat(limits.maxBodyBytes + 10), tenant_id: 't' }), 413, 'too_large');
  });

  it.each([
    ['0', 'out_of_range'], ['101', 'out_of_range'], ['abc', 'invalid_type'], ['2.5', 'invalid_type'], ['-1', 'out_of_range'],
  ])('refuses top_k=%s', async (topK, code) => {
    const err = expectError(await query('t', 'x', topK), 400, code);
    expect(err.param).toBe('top_k');
  });

  it('refuses a query or list without tenant_id, and mixes of the two', async () => {
    expect(expectError(await api('GET', '/v1/memory?query=x'), 400).param).toBe('tenant_id');
    expect(expectError(await api('GET', '/v1/memory'), 400).param).toBe('tenant_id');
    expect(expectError(await api('GET', '/v1/memory?tenant_id=t&top_k=3'), 400).param).toBe('top_k');
    expect(expectError(await api('GET', '/v1/memory?tenant_id=t&query=x&limit=3'), 400).param).toBe('limit');
    expect(expectError(await api('GET', '/v1/memory/mem_x'), 400).param).toBe('tenant_id');
  });

  it('answers unknown routes with 404, and a known path with another method with 405 and Allow', async () => {
    expectError(await api('GET', '/v1/nothing'), 404, 'unknown_route');
    const put = await api('PUT', '/v1/memory');
    expectError(put, 405, 'method_not_allowed');
    expect(put.headers.get('allow')).toBe('DELETE, GET, POST');
    const post = await api('POST', '/v1/memory/mem_1?tenant_id=t');
    expectError(post, 405, 'method_not_allowed');
    expect(post.headers.get('allow')).toBe('DELETE, GET, PATCH');
    // GET / is the web console (proxy/console-routes.ts); any other path outside the API is a 404.
    expectError(await api('GET', '/v2'), 404);
  });

  it('did not crash on any of it', async () => {
    expect(svc.enclave.exitCode).toBeNull();
    expect(svc.proxy.exitCode).toBeNull();
    expect((await api('GET', '/healthz')).status).toBe(200);
  });
});

describe('logs', () => {
  it('carry the request id across the gRPC hop and never memory contents', async () => {
    const marker = 'Zanzibar-unique-content-marker';
    const res = await api('POST', '/v1/memory', { content: marker, tenant_id: 'logs' }, { 'x-request-id': 'req-trace-42' });
    expect(res.headers.get('x-request-id')).toBe('req-trace-42');
    await query('logs', marker);
    await logsCaughtUp(svc.baseUrl, svc.output);
    const lines = svc.output().split('\n').filter((l) => l.includes('req-trace-42'));
    expect(lines.some((l) => l.includes('"process":"proxy"'))).toBe(true);
    expect(lines.some((l) => l.includes('"process":"enclave"'))).toBe(true);
    expect(svc.output()).not.toContain(marker);
  });
});
