import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, request } from '../helpers/http.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { issueKey } from '../helpers/processes.js';
import { startService, type RunningService } from '../helpers/service.js';

/** Finding 1 over HTTP: new tenants past MAX_TENANTS are refused, and a restart replays what was accepted. */
let svc: RunningService;
beforeAll(async () => {
  svc = await startService({ MAX_TENANTS: '3', MAX_MEMORIES: '250' });
});
afterAll(async () => {
  await svc?.stop();
});

// dedupe: false, as a batch may repeat an earlier one's notes: each is counted, not merged.
const batch = (tenant: string, n: number) => ({ memories: Array.from({ length: n }, (_, i) => ({ tenant_id: tenant, content: `note ${i} for ${tenant}`, dedupe: false })) });

describe('the enclave\'s capacity', () => {
  it('answers 503 enclave_capacity_reached for a fourth tenant and for memories past MAX_MEMORIES, and keeps serving', async () => {
    for (const tenant of ['cap-a', 'cap-b', 'cap-c']) expect((await request(svc.baseUrl, 'POST', '/v1/memory', batch(tenant, 80))).status).toBe(200);
    const tenantRefused = expectError(await request(svc.baseUrl, 'POST', '/v1/memory', batch('cap-d', 1)), 503, 'enclave_capacity_reached');
    expect(tenantRefused.message).toMatch(/3 tenants/);
    const memoryRefused = expectError(await request(svc.baseUrl, 'POST', '/v1/memory', batch('cap-a', 11)), 503, 'enclave_capacity_reached');
    expect(memoryRefused.message).toMatch(/240 memories/);
    expect((await request(svc.baseUrl, 'POST', '/v1/memory', batch('cap-a', 10))).status).toBe(200);

    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    const found = await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=cap-a&query=note&top_k=100');
    expect(found.body.data).toHaveLength(90);
    expectError(await request(svc.baseUrl, 'POST', '/v1/memory', batch('cap-d', 1)), 503, 'enclave_capacity_reached');
  });
});

describe('each API key\'s share (MAX_MEMORIES_PER_KEY)', () => {
  let keyed: RunningService;
  let dir: string;
  let greedy: string;
  let other: string;
  let chatty: string;
  let chattier: string;
  let model: ModelServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agent-keyshare-'));
    const file = join(dir, 'keys.json');
    greedy = issueKey(file, ['share-a', 'share-b']);
    other = issueKey(file, ['share-c']);
    chatty = issueKey(file, ['share-d', 'share-e']);
    chattier = issueKey(file, ['share-f']);
    model = await startModelServer();
    keyed = await startService({ API_KEYS_FILE: file, MAX_MEMORIES_PER_KEY: '50', MODEL_BASE_URL: model.url });
  });
  afterAll(async () => {
    await keyed?.stop();
    await model?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('counts every tenant of the key together: 409 key_memory_limit_reached past it, other keys unaffected', async () => {
    const post = (key: string, body: unknown) => request(keyed.baseUrl, 'POST', '/v1/memory', body, { authorization: `Bearer ${key}` });
    expect((await post(greedy, batch('share-a', 30))).status).toBe(200);
    expect((await post(greedy, batch('share-b', 20))).status).toBe(200);
    const refused = expectError(await post(greedy, batch('share-b', 1)), 409, 'key_memory_limit_reached');
    expect(refused.message).toMatch(/hold 50 memories/);
    expect((await post(other, batch('share-c', 40))).status).toBe(200);
  });

  const chat = (key: string, tenant: string) => request(keyed.baseUrl, 'POST', '/v1/chat/completions',
    { model: 'tool-add-50', messages: [{ role: 'user', content: 'remember everything' }] }, { authorization: `Bearer ${key}`, organization_id: tenant });
  const held = async (key: string, tenant: string) =>
    (await request(keyed.baseUrl, 'GET', `/v1/memory?tenant_id=${tenant}&limit=100`, undefined, { authorization: `Bearer ${key}` })).body.data.length as number;

  it('counts memories the chat model saves with add_memory against the key too (hold round two, 5)', async () => {
    expect((await request(keyed.baseUrl, 'POST', '/v1/memory', batch('share-d', 45), { authorization: `Bearer ${chatty}` })).status).toBe(200);
    // The model asks for fifty saves; the key has room for five.
    const answered = await chat(chatty, 'share-e');
    expect(answered.status, answered.text).toBe(200);
    expect(await held(chatty, 'share-e')).toBe(5);
    expect(await held(chatty, 'share-d') + await held(chatty, 'share-e')).toBe(50);
  });

  it('lets one chat request save at most CHAT_TOOL_MAX_ADDS memories, however many calls the model makes', async () => {
    const answered = await chat(chattier, 'share-f');
    expect(answered.status, answered.text).toBe(200);
    expect(await held(chattier, 'share-f')).toBe(10);
  });
});
