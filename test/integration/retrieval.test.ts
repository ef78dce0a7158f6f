import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { limits } from '../../common/limits.js';
import { expectError, request } from '../helpers/http.js';
import { startService, type RunningService } from '../helpers/service.js';

let svc: RunningService;
const api = (method: string, path: string, body?: unknown) => request(svc.baseUrl, method, path, body);
const query = (tenant: string, q: string, topK = 5) =>
  api('GET', `/v1/memory?tenant_id=${encodeURIComponent(tenant)}&query=${encodeURIComponent(q)}&top_k=${topK}`);
const addBatch = (memories: unknown[]) => api('POST', '/v1/memory', { memories });

// An ops agent's memories: several tickets and invoices whose numbers differ by a digit or two,
// so word vectors (which know none of the numbers) cannot tell them apart.
const OPS = [
  'Ticket ZX-4417: the dark mode toggle does not persist after logout.',
  'Ticket ZX-4471: payment webhook retries are duplicating charges for EU customers.',
  'Ticket ZX-4520: upgrade Node.js from 18 to 20 in the billing service.',
  'Ticket ZX-4388: CSV export times out for accounts with more than 100k rows.',
  'Invoice 88231 from Cloudflare is still unpaid and due on 30 September.',
  'Invoice 88213 from Hetzner for the dedicated servers was settled on 15 August.',
  'Invoice 88123 from Datadog was disputed last week.',
  'The weekly engineering sync is on Tuesdays at 10:00.',
  'Kofi is the expert on the legacy PHP monolith.',
];

beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.stop();
});

describe('batch ingest: POST /v1/memory with {"memories": [...]}', () => {
  it('stores every memory and answers a list of the records, in order', async () => {
    const res = await addBatch(OPS.map((content, i) => ({ content, tenant_id: 'ops', metadata: { source: 'import', line: i } })));
    expect(res.status, res.text).toBe(200);
    expect(res.body.object).toBe('list');
    expect(res.body.data).toHaveLength(OPS.length);
    res.body.data.forEach((record: { id: string; content: string; tenant_id: string; metadata: object }, i: number) => {
      expect(record).toMatchObject({ object: 'memory', content: OPS[i], tenant_id: 'ops', metadata: { source: 'import', line: i } });
      expect(record.id).toMatch(/^mem_[0-9a-f]{32}$/);
    });
    const fetched = await api('GET', `/v1/memory/${res.body.data[1].id}?tenant_id=ops`);
    expect(fetched.body.content).toBe(OPS[1]);
  });

  it('accepts items for several tenants and keeps them apart', async () => {
    const res = await addBatch([
      { content: 'Tenant one likes green tea', tenant_id: 'batch-one' },
      { content: 'Tenant two likes black coffee', tenant_id: 'batch-two' },
    ]);
    expect(res.status).toBe(200);
    const one = await query('batch-one', 'what do they drink');
    expect(one.body.data.map((d: { content: string }) => d.content)).toEqual(['Tenant one likes green tea']);
  });

  it('refuses the whole batch when one item is invalid, naming its index, and stores nothing', async () => {
    const res = await addBatch([
      { content: 'Atomic batch memory one, ticket QQ-9001', tenant_id: 'atomic' },
      { content: 'Atomic batch memory two', tenant_id: 'atomic' },
      { content: '   ', tenant_id: 'atomic' },
    ]);
    const error = expectError(res, 400, 'invalid_value');
    expect(error.param).toBe('memories.2.content');
    expect(error.message).toContain('memories.2.content');

    const missing = expectError(await addBatch([{ content: 'ok', tenant_id: 'atomic' }, { content: 'no tenant' }]), 400, 'missing_required_parameter');
    expect(missing.param).toBe('memories.1.tenant_id');
    const unknown = expectError(await addBatch([{ content: 'x', tenant_id: 'atomic', colour: 'red' }]), 400, 'unknown_parameter');
    expect(unknown.param).toBe('memories.0.colour');

    const after = await query('atomic', 'QQ-9001 atomic batch memory');
    expect(after.status).toBe(200);
    expect(after.body.data).toEqual([]);
  });

  it(`refuses an empty batch and one over ${limits.maxBatchMemories} memories`, async () => {
    expectError(await addBatch([]), 400, 'empty_array');
    const tooMany = Array.from({ length: limits.maxBatchMemories + 1 }, (_, i) => ({ content: `memory ${i}`, tenant_id: 'big' }));
    const error = expectError(await addBatch(tooMany), 400, 'array_above_max_length');
    expect(error.message).toContain(String(limits.maxBatchMemories));
    expect((await query('big', 'memory')).body.data).toEqual([]);
  });

  it(`accepts a full batch of ${limits.maxBatchMemories}`, async () => {
    const full = Array.from({ length: limits.maxBatchMemories }, (_, i) => ({ content: `Note number ${i} about the garden`, tenant_id: 'full' }));
    const res = await addBatch(full);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toHaveLength(limits.maxBatchMemories);
    expect((await query('full', 'Note number 57 about the garden', 1)).body.data[0].content).toBe('Note number 57 about the garden');
  });

  it('refuses a body mixing the single and batch forms', async () => {
    const res = await api('POST', '/v1/memory', { content: 'x', tenant_id: 'mixed', memories: [{ content: 'y', tenant_id: 'mixed' }] });
    expectError(res, 400, 'unknown_parameter');
  });
});

describe('hybrid retrieval over HTTP', () => {
  it('finds the memory that mentions ticket ZX-4471 first', async () => {
    const res = await query('ops', 'ZX-4471');
    expect(res.status).toBe(200);
    expect(res.body.data[0].content).toContain('ZX-4471');
  });

  it('finds the memory about invoice 88213 first for "was invoice 88213 settled"', async () => {
    const res = await query('ops', 'was invoice 88213 settled');
    expect(res.body.data[0].content).toContain('88213');
  });

  it('still ranks by meaning when no rare token is asked for', async () => {
    const res = await query('ops', 'who knows the old PHP code?');
    expect(res.body.data[0].content).toContain('Kofi');
  });

  it('reports the score and its parts, in decreasing score order', async () => {
    const res = await query('ops', 'was invoice 88213 settled', 9);
    const data = res.body.data as { score: number; scores: { vector: number; lexical: number | null; fused: number } }[];
    expect(data.length).toBeGreaterThan(3);
    for (const hit of data) {
      expect(hit.score).toBe(hit.scores.fused);
      expect(hit.scores.vector).toBeGreaterThanOrEqual(-1);
      expect(hit.scores.vector).toBeLessThanOrEqual(1);
    }
    expect([...data.map((d) => d.score)].sort((a, b) => b - a)).toEqual(data.map((d) => d.score));
    expect(data[0].scores.lexical).toBeGreaterThan(0);
    expect(data.some((d) => d.scores.lexical === null)).toBe(true); // matched no query term
  });

  it('stops finding a deleted memory by its rare token', async () => {
    const added = await api('POST', '/v1/memory', { content: 'Ticket KX-7788 is about the broken printer', tenant_id: 'del' });
    await api('POST', '/v1/memory', { content: 'The office plants need water', tenant_id: 'del' });
    expect((await query('del', 'KX-7788')).body.data[0].id).toBe(added.body.id);
    expect((await api('DELETE', `/v1/memory/${added.body.id}?tenant_id=del`)).status).toBe(200);
    const after = await query('del', 'KX-7788');
    expect(after.body.data.map((d: { id: string }) => d.id)).not.toContain(added.body.id);
  });

  it('does not find another tenant\'s memory by its rare token', async () => {
    await api('POST', '/v1/memory', { content: 'Unrelated memory about lunch', tenant_id: 'other-tenant' });
    const res = await query('other-tenant', 'ZX-4471');
    expect(res.status).toBe(200);
    expect(res.body.data.every((d: { content: string }) => !d.content.includes('ZX-4471'))).toBe(true);
  });
});
