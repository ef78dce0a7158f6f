import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, request } from '../helpers/http.js';
import { issueKey } from '../helpers/processes.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * The memory API a memory-service user expects (as Mem0 offers it): list in pages, update,
 * delete a tenant's memories, search with metadata filters; over HTTP through both
 * processes, and still true after the enclave is killed and recovers from the host store.
 */

let svc: RunningService;
let dir: string;
let keyA: string; // holds tenant-a only
const auth = () => ({ authorization: `Bearer ${keyA}` });
const api = (method: string, path: string, body?: unknown) => request(svc.baseUrl, method, path, body, auth());

const add = async (tenant_id: string, content: string, metadata?: Record<string, unknown>) => {
  const res = await api('POST', '/v1/memory', { content, tenant_id, ...(metadata ? { metadata } : {}) });
  expect(res.status, res.text).toBe(200);
  return res.body as { id: string; content: string; metadata: Record<string, unknown>; created_at: number; updated_at?: number };
};
const search = async (body: Record<string, unknown>) => {
  const res = await api('POST', '/v1/memory/search', body);
  expect(res.status, res.text).toBe(200);
  return res.body as { object: string; data: Array<{ id: string; content: string; metadata: Record<string, unknown> }> };
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-memapi-'));
  const file = join(dir, 'keys.json');
  keyA = issueKey(file, ['tenant-a', 'big', 'pages', 'wipe', 'other']);
  issueKey(file, ['tenant-b']);
  svc = await startService({ API_KEYS_FILE: file });
});
afterAll(async () => {
  await svc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('GET /v1/memory without a query: the tenant\'s memories, newest first, in pages', () => {
  const ids: string[] = [];
  beforeAll(async () => {
    for (let i = 0; i < 25; i++) ids.push((await add('pages', `page memory number ${i}`)).id);
  });

  it('pages of `limit` (default 20) in OpenAI\'s list shape, `after` continuing from an id', async () => {
    const first = await api('GET', '/v1/memory?tenant_id=pages');
    expect(first.status).toBe(200);
    const newestFirst = [...ids].reverse();
    expect(first.body).toMatchObject({ object: 'list', first_id: newestFirst[0], last_id: newestFirst[19], has_more: true });
    expect(first.body.data.map((m: { id: string }) => m.id)).toEqual(newestFirst.slice(0, 20));
    const second = await api('GET', `/v1/memory?tenant_id=pages&limit=10&after=${first.body.last_id}`);
    expect(second.body.data.map((m: { id: string }) => m.id)).toEqual(newestFirst.slice(20));
    expect(second.body).toMatchObject({ has_more: false, first_id: newestFirst[20], last_id: newestFirst[24] });
    const small = await api('GET', '/v1/memory?tenant_id=pages&limit=3');
    expect(small.body.data).toHaveLength(3);
    expect(small.body.has_more).toBe(true);
  });

  it('an empty tenant is an empty list; a bad `after` or `limit` is a 400', async () => {
    expect((await api('GET', '/v1/memory?tenant_id=other')).body).toEqual({ object: 'list', data: [], first_id: null, last_id: null, has_more: false });
    expect(expectError(await api('GET', '/v1/memory?tenant_id=pages&after=mem_nope'), 400).param).toBe('after');
    expect(expectError(await api('GET', '/v1/memory?tenant_id=pages&limit=101'), 400).param).toBe('limit');
    expect(expectError(await api('GET', '/v1/memory?tenant_id=pages&limit=0'), 400).param).toBe('limit');
  });
});

describe('PATCH /v1/memory/{id}', () => {
  it('changes content: re-embedded and re-indexed at once, with updated_at', async () => {
    const original = await add('tenant-a', 'My favourite colour is green', { source: 'chat' });
    const patched = await api('PATCH', `/v1/memory/${original.id}?tenant_id=tenant-a`, { content: 'I adore sailing boats on the harbour' });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ id: original.id, content: 'I adore sailing boats on the harbour', metadata: { source: 'chat' }, created_at: original.created_at });
    expect(patched.body.updated_at).toBeGreaterThanOrEqual(original.created_at);
    const found = await search({ tenant_id: 'tenant-a', query: 'sailing boats harbour', top_k: 1 });
    expect(found.data[0]).toMatchObject({ id: original.id, content: 'I adore sailing boats on the harbour' });
    // The old words no longer find it by lexical match.
    const old = await search({ tenant_id: 'tenant-a', query: 'favourite colour green', top_k: 5 });
    expect(old.data.find((m) => m.content.includes('green'))).toBeUndefined();
    expect((await api('GET', `/v1/memory/${original.id}?tenant_id=tenant-a`)).body.content).toBe('I adore sailing boats on the harbour');
  });

  it('replaces metadata whole, keeping the content and its vector', async () => {
    const memory = await add('tenant-a', 'The boiler was serviced in March', { source: 'email', year: 2024 });
    const patched = await api('PATCH', `/v1/memory/${memory.id}?tenant_id=tenant-a`, { metadata: { source: 'invoice' } });
    expect(patched.body).toMatchObject({ content: 'The boiler was serviced in March', metadata: { source: 'invoice' } });
    expect(patched.body.metadata.year).toBeUndefined();
    expect((await search({ tenant_id: 'tenant-a', query: 'boiler serviced', top_k: 1 })).data[0].id).toBe(memory.id);
  });

  it('refuses an empty change, unknown fields, another tenant\'s id (404, as for no id) and another key\'s tenant (403)', async () => {
    const memory = await add('tenant-a', 'Patch target');
    const empty = expectError(await api('PATCH', `/v1/memory/${memory.id}?tenant_id=tenant-a`, {}), 400);
    expect(empty.message).toBe("nothing to do: the request body must have at least one of 'content', 'metadata', 'occurred_at'");
    expect(expectError(await api('PATCH', `/v1/memory/${memory.id}?tenant_id=tenant-a`, { tenant_id: 'x' }), 400).code).toBe('unknown_parameter');
    expectError(await api('PATCH', `/v1/memory/${memory.id}?tenant_id=other`, { content: 'x' }), 404, 'memory_not_found');
    expectError(await api('PATCH', `/v1/memory/mem_nope?tenant_id=tenant-a`, { content: 'x' }), 404, 'memory_not_found');
    expectError(await api('PATCH', `/v1/memory/${memory.id}?tenant_id=tenant-b`, { content: 'x' }), 403, 'tenant_not_allowed');
  });
});

describe('DELETE /v1/memory?tenant_id=', () => {
  it('deletes every memory of the tenant and says how many; other tenants keep theirs', async () => {
    for (const c of ['one', 'two', 'three']) await add('wipe', `wipe me ${c}`);
    const keep = await add('other', 'keep me');
    const res = await api('DELETE', '/v1/memory?tenant_id=wipe');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ object: 'memory.deleted', deleted: true, count: 3, receipt: { scope: 'tenant', count: 3 } });
    expect((await api('GET', '/v1/memory?tenant_id=wipe')).body.data).toEqual([]);
    expect((await search({ tenant_id: 'wipe', query: 'wipe me' })).data).toEqual([]);
    expect((await api('GET', `/v1/memory/${keep.id}?tenant_id=other`)).status).toBe(200);
    expect((await api('DELETE', '/v1/memory?tenant_id=wipe')).body.count).toBe(0);
    expectError(await api('DELETE', '/v1/memory?tenant_id=tenant-b'), 403, 'tenant_not_allowed');
  });
});

describe('POST /v1/memory/search with filters', () => {
  it('matches metadata by equality and by $in; a missing key matches only null', async () => {
    await add('tenant-a', 'Flight to Oslo on Monday', { source: 'calendar', priority: 1 });
    await add('tenant-a', 'Flight to Rome on Friday', { source: 'email', priority: 2 });
    await add('tenant-a', 'Flight to Lima next month');
    const bySource = await search({ tenant_id: 'tenant-a', query: 'flight', filters: { source: 'email' } });
    expect(bySource.data.map((m) => m.content)).toEqual(['Flight to Rome on Friday']);
    const byIn = await search({ tenant_id: 'tenant-a', query: 'flight', filters: { priority: { $in: [1, 2] } } });
    expect(byIn.data.map((m) => m.content).sort()).toEqual(['Flight to Oslo on Monday', 'Flight to Rome on Friday']);
    // Strict equality: the string "1" is not the number 1.
    expect((await search({ tenant_id: 'tenant-a', query: 'flight', filters: { priority: '1' } })).data).toEqual([]);
    const unset = await search({ tenant_id: 'tenant-a', query: 'flight to', filters: { source: null }, top_k: 100 });
    expect(unset.data.map((m) => m.content)).toContain('Flight to Lima next month');
    expect(unset.data.every((m) => m.metadata.source === undefined)).toBe(true);
  });

  it('refuses malformed filters', async () => {
    // The refusal names what a filter may be, not the first form's complaint ("expected string").
    const operator = expectError(await api('POST', '/v1/memory/search', { tenant_id: 'tenant-a', query: 'x', filters: { source: { $gt: 1 } } }), 400, 'invalid_value');
    expect(operator.param).toBe('filters.source');
    expect(operator.message).toMatch(/string, number, boolean or null.*\{"\$in": \[\.\.\.\]\}.*no other operators/);
    expect(expectError(await api('POST', '/v1/memory/search', { tenant_id: 'tenant-a', query: 'x', filters: { source: [1] } }), 400).message).toMatch(/\$in/);
    expect(expectError(await api('POST', '/v1/memory/search', { tenant_id: 'tenant-a', query: 'x', filters: { source: { $in: [] } } }), 400).message).toBe("'filters.source.$in' must not be empty");
    expectError(await api('POST', '/v1/memory/search', { tenant_id: 'tenant-a', query: 'x', filters: ['source'] }), 400);
  });

  it('in a tenant large enough for its HNSW index, a narrow filter still returns top_k matches', async () => {
    // 4,200 memories (past the 4,096 at which a tenant moves to HNSW), 12 of them tagged rare.
    for (let batch = 0; batch < 42; batch++) {
      const memories = Array.from({ length: 100 }, (_, i) => {
        const n = batch * 100 + i;
        return { tenant_id: 'big', content: `Note ${n} about the garden, the weather and the shopping list`, metadata: { tag: n % 350 === 0 ? 'rare' : 'common' } };
      });
      const res = await api('POST', '/v1/memory', { memories });
      expect(res.status, res.text).toBe(200);
    }
    const found = await search({ tenant_id: 'big', query: 'garden weather', top_k: 12, filters: { tag: 'rare' } });
    expect(found.data).toHaveLength(12);
    expect(found.data.every((m) => m.metadata.tag === 'rare')).toBe(true);
  });
});

describe('tenant-free endpoints still need a key when keys are configured', () => {
  it('POST /v1/embeddings and GET /v1/models: 401 without a key, 200 with one', async () => {
    const body = { model: 'static-sif-100d', input: 'hello' };
    expectError(await request(svc.baseUrl, 'POST', '/v1/embeddings', body), 401, 'missing_api_key');
    expect((await api('POST', '/v1/embeddings', body)).status).toBe(200);
    expectError(await request(svc.baseUrl, 'GET', '/v1/models'), 401, 'missing_api_key');
    expectError(await request(svc.baseUrl, 'GET', '/v1/models/local-memory', undefined, { authorization: 'Bearer agk_wrong' }), 401, 'invalid_api_key');
    expect((await api('GET', '/v1/models')).body.data.map((m: { id: string }) => m.id)).toContain('local-memory');
  });
});

describe('every change is durable', () => {
  it('updates and tenant deletions survive kill -9 of the enclave', async () => {
    const memory = await add('tenant-a', 'Before the crash');
    expect((await api('PATCH', `/v1/memory/${memory.id}?tenant_id=tenant-a`, { content: 'After the patch', metadata: { v: 2 } })).status).toBe(200);
    for (const c of ['x', 'y']) await add('wipe', `gone ${c}`);
    expect((await api('DELETE', '/v1/memory?tenant_id=wipe')).body.count).toBe(2);
    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    const after = await api('GET', `/v1/memory/${memory.id}?tenant_id=tenant-a`);
    expect(after.body).toMatchObject({ content: 'After the patch', metadata: { v: 2 }, updated_at: expect.any(Number) });
    expect((await search({ tenant_id: 'tenant-a', query: 'after the patch', top_k: 1 })).data[0].id).toBe(memory.id);
    expect((await api('GET', '/v1/memory?tenant_id=wipe')).body.data).toEqual([]);
    expect((await api('GET', '/v1/memory?tenant_id=big&limit=1')).body.has_more).toBe(true);
  });
});
