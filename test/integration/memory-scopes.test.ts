import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, request } from '../helpers/http.js';
import { agentKeys, issueKey } from '../helpers/processes.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { startService, type RunningService } from '../helpers/service.js';
import { exportKeyPair, exportLines } from '../../sdk/memory-export.js';

/**
 * Scopes inside a tenant (user_id, agent_id, run_id, as Mem0 has them): stored with each
 * memory, filtering search, list, delete-all and chat; a key limited to a scope acts only
 * inside it. Over HTTP through both processes, and after the enclave recovers.
 */

let svc: RunningService;
let model: ModelServer;
let dir: string;
let tenantKey: string; // holds the tenant, every scope
let aliceKey: string; // holds the tenant, limited to user_id alice
const as = (key: string) => ({ authorization: `Bearer ${key}` });
const api = (method: string, path: string, body?: unknown, key = tenantKey) => request(svc.baseUrl, method, path, body, as(key));

interface Memory { id: string; content: string; user_id?: string; agent_id?: string; run_id?: string }

const add = async (body: Record<string, unknown>, key = tenantKey): Promise<Memory> => {
  const res = await api('POST', '/v1/memory', { tenant_id: 'home', ...body }, key);
  expect(res.status, res.text).toBe(200);
  return res.body;
};
const contents = (res: { status: number; text: string; body: { data: Memory[] } }) => {
  expect(res.status, res.text).toBe(200);
  return res.body.data.map((m) => m.content).sort();
};
const chat = (body: Record<string, unknown>, key = tenantKey) =>
  request(svc.baseUrl, 'POST', '/v1/chat/completions', body, { ...as(key), 'openai-organization': 'home' });
const search = (body: Record<string, unknown>, key = tenantKey) =>
  api('POST', '/v1/memory/search', { tenant_id: 'home', query: 'what does the dog eat', top_k: 10, ...body }, key);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-scopes-'));
  const file = join(dir, 'keys.json');
  tenantKey = issueKey(file, ['home', 'wipe']);
  const issued = agentKeys(['issue', '--file', file, '--tenant', 'home', '--tenant', 'wipe', '--user-id', 'alice']);
  expect(issued.status, issued.stderr).toBe(0);
  aliceKey = issued.stdout.trim();
  model = await startModelServer();
  svc = await startService({ API_KEYS_FILE: file, MODEL_BASE_URL: model.url });
  await add({ content: 'Alice feeds the dog salmon', user_id: 'alice', agent_id: 'vet', run_id: 'r1' });
  const batch = await api('POST', '/v1/memory', {
    memories: [
      { tenant_id: 'home', content: 'Bob feeds the dog biscuits', user_id: 'bob', agent_id: 'vet' },
      { tenant_id: 'home', content: 'The dog eats at noon', agent_id: 'vet' },
    ],
  });
  expect(batch.status, batch.text).toBe(200);
  expect(batch.body.data[0]).toMatchObject({ user_id: 'bob', agent_id: 'vet' });
  expect(batch.body.data[1]).not.toHaveProperty('user_id');
});
afterAll(async () => {
  await svc?.stop();
  await model?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('scopes on add, search and list', () => {
  it('an added memory carries its scopes; one without is tenant-wide (no scope fields)', async () => {
    const m = await add({ content: 'The dog sleeps in the kitchen' });
    expect(m).not.toHaveProperty('user_id');
    expect(m).not.toHaveProperty('run_id');
    const res = await api('GET', `/v1/memory/${m.id}?tenant_id=home`);
    expect(res.body).toMatchObject({ id: m.id, content: 'The dog sleeps in the kitchen' });
    await api('DELETE', `/v1/memory/${m.id}?tenant_id=home`);
  });

  it('search and list filter by any scope, and by several together', async () => {
    expect(contents(await search({ user_id: 'alice' }))).toEqual(['Alice feeds the dog salmon']);
    expect(contents(await search({ agent_id: 'vet' }))).toHaveLength(3);
    expect(contents(await search({ agent_id: 'vet', user_id: 'bob' }))).toEqual(['Bob feeds the dog biscuits']);
    expect(contents(await search({ run_id: 'r1' }))).toEqual(['Alice feeds the dog salmon']);
    expect(contents(await search({ run_id: 'r2' }))).toEqual([]);
    expect(contents(await search({}))).toHaveLength(3);
    expect(contents(await api('GET', '/v1/memory?tenant_id=home&user_id=bob'))).toEqual(['Bob feeds the dog biscuits']);
    expect(contents(await api('GET', '/v1/memory?tenant_id=home&agent_id=vet&query=dog'))).toHaveLength(3);
    expect(contents(await api('GET', '/v1/memory?tenant_id=home&run_id=r1&query=dog'))).toEqual(['Alice feeds the dog salmon']);
  });

  it('a scope id is checked like a tenant id', async () => {
    expect(expectError(await search({ user_id: 'a b' }), 400).param).toBe('user_id');
    expect(expectError(await api('POST', '/v1/memory', { tenant_id: 'home', content: 'x', run_id: '' }), 400).param).toBe('run_id');
  });
});

describe('delete-all with scopes', () => {
  it('deletes only the memories of the scopes named', async () => {
    for (const user_id of ['u1', 'u2']) await add({ tenant_id: 'wipe', content: `memory of ${user_id}`, user_id });
    await add({ tenant_id: 'wipe', content: 'tenant-wide memory' });
    const res = await api('DELETE', '/v1/memory?tenant_id=wipe&user_id=u1');
    expect(res.body).toMatchObject({ deleted: true, count: 1, receipt: { scope: 'scope', where: { user_id: 'u1' } } });
    expect(contents(await api('GET', '/v1/memory?tenant_id=wipe'))).toEqual(['memory of u2', 'tenant-wide memory']);
    expect((await api('DELETE', '/v1/memory?tenant_id=wipe')).body.count).toBe(2);
  });
});

describe('an API key limited to a scope', () => {
  it('stores in its scope whether the request names it or not, and may not name another', async () => {
    const m = await add({ content: 'Alice walks the dog at dawn' }, aliceKey);
    expect(m.user_id).toBe('alice');
    const refused = await api('POST', '/v1/memory', { tenant_id: 'home', content: 'I am Bob now', user_id: 'bob' }, aliceKey);
    expectError(refused, 403);
    const batch = await api('POST', '/v1/memory', { memories: [{ tenant_id: 'home', content: 'fine' }, { tenant_id: 'home', content: 'no', user_id: 'bob' }] }, aliceKey);
    expectError(batch, 403);
    await api('DELETE', `/v1/memory/${m.id}?tenant_id=home`);
  });

  it('sees only its scope: search, list and get of another user\'s memory', async () => {
    expect(contents(await search({}, aliceKey))).toEqual(['Alice feeds the dog salmon']);
    expectError(await search({ user_id: 'bob' }, aliceKey), 403);
    expect(contents(await api('GET', '/v1/memory?tenant_id=home', undefined, aliceKey))).toEqual(['Alice feeds the dog salmon']);
    const bobs = (await search({ user_id: 'bob' })).body.data[0] as Memory;
    expectError(await api('GET', `/v1/memory/${bobs.id}?tenant_id=home`, undefined, aliceKey), 404);
    expectError(await api('PATCH', `/v1/memory/${bobs.id}?tenant_id=home`, { content: 'overwritten' }, aliceKey), 404);
    expectError(await api('DELETE', `/v1/memory/${bobs.id}?tenant_id=home`, undefined, aliceKey), 404);
    expect((await api('GET', `/v1/memory/${bobs.id}?tenant_id=home`)).body.content).toBe('Bob feeds the dog biscuits');
  });

  it('may not export or import (403): both act on the whole tenant, other users\' memories included', async () => {
    const keys = exportKeyPair();
    const res = await fetch(`${svc.baseUrl}/v1/memory/export?tenant_id=home&public_key=${encodeURIComponent(Buffer.from(keys.publicKey).toString('base64'))}`, { headers: as(aliceKey) });
    const sent = new Uint8Array(await res.arrayBuffer());
    if (res.status === 200) {
      // What such an export would hand the key: opened, it must not hold Bob's memory.
      const lines: unknown[] = [];
      for await (const line of exportLines((async function* () { yield sent; })(), keys.secretKey)) lines.push(line);
      expect(JSON.stringify(lines)).not.toMatch(/Bob feeds/);
    }
    expect(res.status).toBe(403);
    const planted = await api('POST', '/v1/memory/import', { tenant_id: 'home', memories: [{ id: 'planted-1', memory: 'Bob now likes cats', user_id: 'bob' }] }, aliceKey);
    expectError(planted, 403);
    expect((await api('GET', '/v1/memory/planted-1?tenant_id=home')).status).toBe(404);
  });

  it('deletes only its scope with delete-all', async () => {
    await add({ tenant_id: 'wipe', content: 'alice in wipe', user_id: 'alice' });
    await add({ tenant_id: 'wipe', content: 'carol in wipe', user_id: 'carol' });
    const wiped = (await api('DELETE', '/v1/memory?tenant_id=wipe', undefined, aliceKey)).body;
    expect(wiped.count).toBe(1);
    // Its receipt says what was deleted: alice's memories, not the tenant's (carol's are kept).
    expect(wiped.receipt).toMatchObject({ scope: 'scope', tenant_id: 'wipe', where: { user_id: 'alice' }, count: 1 });
    expect(contents(await api('GET', '/v1/memory?tenant_id=wipe'))).toEqual(['carol in wipe']);
    await api('DELETE', '/v1/memory?tenant_id=wipe');
  });

  it('chats only with its scope\'s memories', async () => {
    const res = await chat({ model: 'local-memory', messages: [{ role: 'user', content: 'what does the dog eat?' }] }, aliceKey);
    expect(res.status, res.text).toBe(200);
    expect(res.body.choices[0].message.content).toContain('salmon');
    expect(res.body.choices[0].message.content).not.toContain('biscuits');
  });
});

describe('chat takes user_id, agent_id and run_id in the request body', () => {
  const ask = (extra: Record<string, unknown>, model = 'local-memory') =>
    chat({ model, messages: [{ role: 'user', content: 'what does the dog eat?' }], ...extra });

  it('the offline responder answers from the scope named', async () => {
    const bob = await ask({ user_id: 'bob' });
    expect(bob.status, bob.text).toBe(200);
    expect(bob.body.choices[0].message.content).toContain('biscuits');
    expect(bob.body.choices[0].message.content).not.toContain('salmon');
    const all = await ask({}, 'local-memory');
    expect(all.body.choices[0].message.content).toContain('salmon');
    expect(all.body.choices[0].message.content).toContain('biscuits');
  });

  it('the upstream model gets the scope\'s memories and never the scope fields', async () => {
    const res = await ask({ user_id: 'alice', run_id: 'r1' }, 'echo');
    expect(res.status, res.text).toBe(200);
    const sent = model.requests.at(-1)!.body;
    expect(sent).not.toHaveProperty('user_id');
    expect(sent).not.toHaveProperty('run_id');
    const memories = sent.messages.find((m: { role: string; content: string }) => m.role === 'system' && m.content.includes('<memories>'));
    expect(memories.content).toContain('salmon');
    expect(memories.content).not.toContain('biscuits');
  });

  it('a bad scope id is a 400', async () => {
    expect(expectError(await ask({ agent_id: 'no spaces' }), 400).param).toBe('agent_id');
  });
});

describe('durability', () => {
  it('scopes survive kill -9 of the enclave (they are in the journal)', async () => {
    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    expect(contents(await search({ user_id: 'alice' }))).toEqual(['Alice feeds the dog salmon']);
    const alice = (await search({ user_id: 'alice' })).body.data[0] as Memory;
    expect(alice).toMatchObject({ user_id: 'alice', agent_id: 'vet', run_id: 'r1' });
  });
});

describe('extraction (infer: true) with a scoped key', () => {
  it('acts in the key\'s scope: shows the model only that scope\'s memories, stores there, and naming another scope is 403', async () => {
    const conversation = { tenant_id: 'home', infer: true, model: 'any-model', messages: [{ role: 'user', content: 'The dog now eats salmon at noon.' }] };
    expectError(await api('POST', '/v1/memory', { ...conversation, user_id: 'bob' }, aliceKey), 403);
    const before = model.requests.length;
    const res = await api('POST', '/v1/memory', conversation, aliceKey);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject([{ event: 'ADD', memory: 'The dog now eats salmon at noon.' }]);
    const decision = model.requests.slice(before).find((r) => String(r.body.messages[0].content).startsWith('You keep'))!;
    const shown = JSON.parse(decision.body.messages[1].content).memories.map((m: { text: string }) => m.text);
    expect(shown).toContain('Alice feeds the dog salmon');
    expect(shown).not.toContain('Bob feeds the dog biscuits');
    expect(shown).not.toContain('The dog eats at noon');
    const stored = await api('GET', `/v1/memory/${res.body.data[0].id}?tenant_id=home`);
    expect(stored.body).toMatchObject({ user_id: 'alice' });
  });
});
