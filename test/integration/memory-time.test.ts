import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, request } from '../helpers/http.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * When a memory's content happened (`occurred_at`), beside when it was stored: given on add
 * or PATCH, filtering search and list with `since`/`until`, and given to the model with each
 * memory in chat. Over HTTP through both processes, and after the enclave recovers.
 */

let svc: RunningService;
let model: ModelServer;
const api = (method: string, path: string, body?: unknown) => request(svc.baseUrl, method, path, body);

interface Memory { id: string; content: string; created_at: number; occurred_at: string; updated_at?: number }

const add = async (body: Record<string, unknown>): Promise<Memory> => {
  const res = await api('POST', '/v1/memory', { tenant_id: 'diary', ...body });
  expect(res.status, res.text).toBe(200);
  return res.body;
};
const contents = (res: { status: number; text: string; body: { data: Memory[] } }) => {
  expect(res.status, res.text).toBe(200);
  return res.body.data.map((m) => m.content).sort();
};
const search = (body: Record<string, unknown>) => api('POST', '/v1/memory/search', { tenant_id: 'diary', query: 'trip', top_k: 10, ...body });

let may: Memory;
beforeAll(async () => {
  model = await startModelServer();
  svc = await startService({ MODEL_BASE_URL: model.url });
  may = await add({ content: 'We went on a trip to Porto', occurred_at: '2023-05-08T13:56:00+02:00' });
  const batch = await api('POST', '/v1/memory', {
    memories: [
      { tenant_id: 'diary', content: 'We planned a trip to Rome', occurred_at: '2023-06-20' },
      { tenant_id: 'diary', content: 'The trip to Rome was cancelled', occurred_at: '2023-07-01T09:00:00Z' },
    ],
  });
  expect(batch.status, batch.text).toBe(200);
});
afterAll(async () => {
  await svc?.stop();
  await model?.close();
});

describe('occurred_at', () => {
  it('is kept in UTC as RFC 3339, beside created_at', () => {
    expect(may.occurred_at).toBe('2023-05-08T11:56:00.000Z');
    expect(typeof may.created_at).toBe('number');
    expect(may).not.toHaveProperty('updated_at');
  });

  it('defaults to when the memory was stored', async () => {
    const now = await add({ content: 'A trip happening today' });
    expect(now.occurred_at).toBe(new Date(now.created_at * 1000).toISOString());
    await api('DELETE', `/v1/memory/${now.id}?tenant_id=diary`);
  });

  it('refuses what is not RFC 3339 or names no real time', async () => {
    expect(expectError(await api('POST', '/v1/memory', { tenant_id: 'diary', content: 'x', occurred_at: 'yesterday' }), 400).param).toBe('occurred_at');
    expect(expectError(await api('POST', '/v1/memory', { tenant_id: 'diary', content: 'x', occurred_at: '2023-02-30' }), 400).param).toBe('occurred_at');
    const batch = await api('POST', '/v1/memory', { memories: [{ tenant_id: 'diary', content: 'x' }, { tenant_id: 'diary', content: 'y', occurred_at: '2023-05-08T25:00:00Z' }] });
    expect(expectError(batch, 400).param).toBe('memories.1.occurred_at');
    expect(expectError(await search({ since: '2023-13-01' }), 400).param).toBe('since');
  });

  it('PATCH changes it and sets updated_at', async () => {
    const m = await add({ content: 'A trip to Faro', occurred_at: '2022-01-01' });
    const patched = await api('PATCH', `/v1/memory/${m.id}?tenant_id=diary`, { occurred_at: '2022-02-02T10:00:00Z' });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ content: 'A trip to Faro', occurred_at: '2022-02-02T10:00:00.000Z', created_at: m.created_at });
    expect(typeof patched.body.updated_at).toBe('number');
    await api('DELETE', `/v1/memory/${m.id}?tenant_id=diary`);
  });
});

describe('since and until', () => {
  it('search and list keep what occurred in the period, both ends included', async () => {
    expect(contents(await search({ since: '2023-06-01' }))).toEqual(['The trip to Rome was cancelled', 'We planned a trip to Rome']);
    expect(contents(await search({ until: '2023-06-20' }))).toEqual(['We planned a trip to Rome', 'We went on a trip to Porto']);
    expect(contents(await search({ since: '2023-05-08T11:56:00Z', until: '2023-05-08T11:56:00Z' }))).toEqual(['We went on a trip to Porto']);
    expect(contents(await api('GET', '/v1/memory?tenant_id=diary&since=2023-06-30T00:00:00%2B02:00'))).toEqual(['The trip to Rome was cancelled']);
    expect(contents(await api('GET', '/v1/memory?tenant_id=diary&query=trip&until=2023-05-31'))).toEqual(['We went on a trip to Porto']);
    expect(contents(await search({ since: '2024-01-01' }))).toEqual([]);
  });
});

describe('chat', () => {
  it('gives the model the date each memory occurred', async () => {
    const res = await request(svc.baseUrl, 'POST', '/v1/chat/completions', {
      model: 'echo', messages: [{ role: 'user', content: 'when did we go on the trip to Porto?' }],
    }, { 'openai-organization': 'diary' });
    expect(res.status, res.text).toBe(200);
    const sent = model.requests.at(-1)!.body;
    const memories = sent.messages.find((m: { role: string; content: string }) => m.role === 'system' && m.content.includes('<memories>'));
    expect(memories.content).toMatch(/<memory id="[^"]+" date="2023-05-08">We went on a trip to Porto<\/memory>/);
  });
});

describe('durability', () => {
  it('occurred_at survives kill -9 of the enclave (it is in the journal)', async () => {
    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    const res = await api('GET', `/v1/memory/${may.id}?tenant_id=diary`);
    expect(res.body.occurred_at).toBe('2023-05-08T11:56:00.000Z');
    expect(contents(await search({ until: '2023-05-31' }))).toEqual(['We went on a trip to Porto']);
  });
});
