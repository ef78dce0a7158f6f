import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../enclave/auth/keys-file.js';
import { expectError, request } from '../helpers/http.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { issueKey } from '../helpers/processes.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * Issue 37, item 1: every change to a memory is a version, GET /v1/memory/{id}/history lists
 * them oldest first (signed like every answer), a deleted memory's history keeps no content,
 * and all of it survives a restart, from the log and from a snapshot (a small
 * SNAPSHOT_LOG_BYTES compacts often), through both processes.
 */

let svc: RunningService;
let model: ModelServer;
let dir: string;
let keyA: string;
let keyB: string;
const idOf = (key: string) => hashApiKey(key).subarray(0, 16).toString('hex');
const api = (key: string, method: string, path: string, body?: unknown) => request(svc.baseUrl, method, path, body, { authorization: `Bearer ${key}` });

interface Version { object: string; version: number; event: string; at: number; key_id: string | null; extracted: boolean; memory: Record<string, unknown> | null }
interface History { object: string; id: string; tenant_id: string; deleted: boolean; deleted_at: number | null; data: Version[] }

const history = async (key: string, tenant: string, id: string): Promise<History> => {
  const res = await api(key, 'GET', `/v1/memory/${id}/history?tenant_id=${tenant}`);
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get('x-tee-signature')).toBeTruthy();
  expect(res.headers.get('x-tee-tenant')).toBe(tenant);
  return res.body as History;
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-history-'));
  const file = join(dir, 'keys.json');
  keyA = issueKey(file, ['hist', 'hist-cap']);
  keyB = issueKey(file, ['hist']);
  issueKey(file, ['elsewhere']);
  model = await startModelServer();
  svc = await startService({ API_KEYS_FILE: file, SNAPSHOT_LOG_BYTES: '4096', MEMORY_HISTORY_VERSIONS: '3', MODEL_BASE_URL: model.url, MODEL_NAMES: 'tool-add' });
});
afterAll(async () => {
  await svc?.stop();
  await model?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('GET /v1/memory/{id}/history', () => {
  let id: string;
  let deletedId: string;

  it('lists every version oldest first: what it held, when, by which key', async () => {
    const added = await api(keyA, 'POST', '/v1/memory', { tenant_id: 'hist', content: 'I live in Lyon', metadata: { source: 'chat' } });
    id = added.body.id;
    const patched = await api(keyB, 'PATCH', `/v1/memory/${id}?tenant_id=hist`, { content: 'I live in Marseille' });
    expect(patched.status, patched.text).toBe(200);
    const h = await history(keyA, 'hist', id);
    expect(h).toMatchObject({ object: 'list', id, tenant_id: 'hist', deleted: false, deleted_at: null });
    // The add's answer also says what the add did (event: ADD); the version is the memory itself.
    const { event: _event, ...addedMemory } = added.body;
    expect(h.data).toEqual([
      { object: 'memory.version', version: 1, event: 'add', at: added.body.created_at, key_id: idOf(keyA), extracted: false, memory: addedMemory },
      { object: 'memory.version', version: 2, event: 'update', at: patched.body.updated_at, key_id: idOf(keyB), extracted: false, memory: patched.body },
    ]);
  });

  it('a memory the chat model saves (add_memory) is authored by the chat caller\'s key', async () => {
    const chat = await request(svc.baseUrl, 'POST', '/v1/chat/completions', { model: 'tool-add', messages: [{ role: 'user', content: 'my locker code is 4417' }] },
      { authorization: `Bearer ${keyB}`, organization_id: 'hist' });
    expect(chat.status, chat.text).toBe(200);
    const found = await api(keyB, 'GET', '/v1/memory?tenant_id=hist&query=locker%20code%204417&top_k=1');
    expect(found.body.data[0].content).toBe('my locker code is 4417 (saved by the model)');
    expect((await history(keyB, 'hist', found.body.data[0].id)).data).toEqual([expect.objectContaining({ event: 'add', key_id: idOf(keyB), extracted: false })]);
  });

  it('keeps at most MEMORY_HISTORY_VERSIONS versions, the oldest going first', async () => {
    for (const city of ['Nice', 'Brest']) expect((await api(keyA, 'PATCH', `/v1/memory/${id}?tenant_id=hist`, { content: `I live in ${city}` })).status).toBe(200);
    const h = await history(keyA, 'hist', id);
    expect(h.data.map((v) => v.memory?.content)).toEqual(['I live in Marseille', 'I live in Nice', 'I live in Brest']);
  });

  it('a deleted memory\'s history says deleted, when and by whom, and keeps no content', async () => {
    deletedId = (await api(keyA, 'POST', '/v1/memory', { tenant_id: 'hist', content: 'my bank PIN is four-nine-two-one' })).body.id;
    expect((await api(keyA, 'PATCH', `/v1/memory/${deletedId}?tenant_id=hist`, { content: 'my bank PIN is seven-seven-one-oh' })).status).toBe(200);
    const deleted = await api(keyB, 'DELETE', `/v1/memory/${deletedId}?tenant_id=hist`);
    expect(deleted.status).toBe(200);
    const res = await api(keyA, 'GET', `/v1/memory/${deletedId}/history?tenant_id=hist`);
    expect(res.text).not.toMatch(/PIN|four-nine|seven-seven/); // words: digits can occur in the times
    const h = res.body as History;
    expect(h.deleted).toBe(true);
    expect(h.data.map((v) => [v.event, v.memory])).toEqual([['add', null], ['update', null], ['delete', null]]);
    expect(h.data[2]).toMatchObject({ key_id: idOf(keyB), at: h.deleted_at });
    expect(h.deleted_at).toBeGreaterThan(0);
    // The memory itself is gone.
    expectError(await api(keyA, 'GET', `/v1/memory/${deletedId}?tenant_id=hist`), 404);
  });

  it('another tenant\'s memory or an unknown id answers 404; a key without the tenant 403', async () => {
    expectError(await api(keyA, 'GET', '/v1/memory/mem_0000/history?tenant_id=hist'), 404);
    expectError(await api(keyA, 'GET', `/v1/memory/${id}/history?tenant_id=hist-cap`), 404);
    expectError(await api(keyB, 'GET', `/v1/memory/${id}/history?tenant_id=hist-cap`), 403);
  });

  it('survives a SIGKILL and restart, after compactions (snapshot) and from the log', async () => {
    // Enough writes to pass SNAPSHOT_LOG_BYTES several times, so the histories above are in a snapshot.
    for (let i = 0; i < 30; i++) expect((await api(keyA, 'POST', '/v1/memory', { tenant_id: 'hist-cap', content: `filler memory ${i} ${'x'.repeat(200)}` })).status).toBe(200);
    // And one change after the last snapshot, in the log only.
    expect((await api(keyA, 'PATCH', `/v1/memory/${id}?tenant_id=hist`, { metadata: { source: 'restart' } })).status).toBe(200);
    const before = [await history(keyA, 'hist', id), await history(keyA, 'hist', deletedId)];
    expect(svc.output()).toMatch(/memory snapshot written/);

    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    expect([await history(keyA, 'hist', id), await history(keyA, 'hist', deletedId)]).toEqual(before);
    expect(before[0].data.map((v) => v.event)).toEqual(['update', 'update', 'update']);
    expect(before[0].data.at(-1)!.memory).toMatchObject({ content: 'I live in Brest', metadata: { source: 'restart' } });
  });
});
