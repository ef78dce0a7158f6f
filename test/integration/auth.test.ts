import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, request } from '../helpers/http.js';
import { agentKeys, issueKey } from '../helpers/processes.js';
import { startService, waitFor, type RunningService } from '../helpers/service.js';
import { logsCaughtUp } from '../helpers/log-barrier.js';

let svc: RunningService;
let dir: string;
let file: string;
let keyA: string; // holds alpha
let keyB: string; // holds beta and gamma

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const api = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  request(svc.baseUrl, method, path, body, headers);

/** One call per memory endpoint, for `tenant`, with the given headers. */
const endpoints = (tenant: string, id = 'mem_00000000000000000000000000000000') => [
  ['POST /v1/memory', (h: Record<string, string>) => api('POST', '/v1/memory', { content: 'a note', tenant_id: tenant }, h)],
  ['GET /v1/memory', (h: Record<string, string>) => api('GET', `/v1/memory?tenant_id=${tenant}&query=note`, undefined, h)],
  ['GET /v1/memory/{id}', (h: Record<string, string>) => api('GET', `/v1/memory/${id}?tenant_id=${tenant}`, undefined, h)],
  ['DELETE /v1/memory/{id}', (h: Record<string, string>) => api('DELETE', `/v1/memory/${id}?tenant_id=${tenant}`, undefined, h)],
] as const;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-keys-'));
  file = join(dir, 'keys.json');
  keyA = issueKey(file, ['alpha']);
  keyB = issueKey(file, ['beta', 'gamma']);
  svc = await startService({ API_KEYS_FILE: file });
});
afterAll(async () => {
  await svc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('API keys, checked by the enclave', () => {
  it('the keys file written by agent-keys holds only hashes', () => {
    const text = readFileSync(file, 'utf8');
    expect(keyA).toMatch(/^agk_/);
    expect(text).not.toContain(keyA);
    expect(text).not.toContain(keyB);
    expect(Object.keys(JSON.parse(text)).every((k) => /^sha256:[0-9a-f]{64}$/.test(k))).toBe(true);
  });

  it.each([
    ['no Authorization header', {}, 'missing_api_key'],
    ['an unknown key', bearer('agk_not-a-real-key-0000000000000000'), 'invalid_api_key'],
    ['a key without the Bearer scheme', { authorization: 'placeholder' }, 'invalid_api_key'],
    ['another scheme', { authorization: 'Basic dXNlcjpwYXNz' }, 'invalid_api_key'],
  ])('every memory endpoint answers 401 with %s', async (_name, headers, code) => {
    const h = 'authorization' in headers && headers.authorization === 'placeholder' ? { authorization: keyA } : headers;
    for (const [name, call] of endpoints('alpha')) {
      const res = await call(h as Record<string, string>);
      expect(res.status, name).toBe(401);
      expectError(res, 401, code);
      expect(res.body.error.type).toBe('authentication_error');
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
  });

  it('every memory endpoint answers 403 for a tenant the key does not hold', async () => {
    const secret = await api('POST', '/v1/memory', { content: 'beta secret: the vault code is 4711', tenant_id: 'beta' }, bearer(keyB));
    expect(secret.status).toBe(200);
    for (const [name, call] of endpoints('beta', secret.body.id)) {
      const res = await call(bearer(keyA));
      expect(res.status, name).toBe(403);
      expect(expectError(res, 403, 'tenant_not_allowed').type).toBe('permission_error');
    }
    // The refused DELETE removed nothing.
    expect((await api('GET', `/v1/memory/${secret.body.id}?tenant_id=beta`, undefined, bearer(keyB))).status).toBe(200);
    // Naming its own tenant with another tenant's id finds nothing.
    expectError(await api('GET', `/v1/memory/${secret.body.id}?tenant_id=alpha`, undefined, bearer(keyA)), 404, 'memory_not_found');
  });

  it('a key acts for each tenant it holds, on every endpoint', async () => {
    for (const [key, tenant] of [[keyA, 'alpha'], [keyB, 'beta'], [keyB, 'gamma']] as const) {
      const added = await api('POST', '/v1/memory', { content: `a note for ${tenant}`, tenant_id: tenant }, bearer(key));
      expect(added.status).toBe(200);
      const found = await api('GET', `/v1/memory?tenant_id=${tenant}&query=note`, undefined, bearer(key));
      expect(found.body.data.map((d: { id: string }) => d.id)).toContain(added.body.id);
      expect((await api('GET', `/v1/memory/${added.body.id}?tenant_id=${tenant}`, undefined, bearer(key))).status).toBe(200);
      expect((await api('DELETE', `/v1/memory/${added.body.id}?tenant_id=${tenant}`, undefined, { authorization: `bearer  ${key}` })).status).toBe(200);
    }
  });

  it('attestation and health stay public, so anyone can verify', async () => {
    expect((await api('GET', '/v1/attestation')).status).toBe(200);
    expect((await api('GET', '/v1/attestation', undefined, bearer('agk_junk-junk-junk-junk-junk'))).status).toBe(200);
    expect((await api('GET', '/healthz')).status).toBe(200);
  });

  it('keys never reach the logs', async () => {
    await logsCaughtUp(svc.baseUrl, svc.output);
    expect(svc.output()).not.toContain(keyA);
    expect(svc.output()).not.toContain(keyB);
    expect(svc.output()).toContain('API keys loaded');
  });
});

describe('key management', () => {
  it('a key issued or revoked with agent-keys applies after SIGHUP', async () => {
    const keyC = issueKey(file, ['delta']);
    const add = () => api('POST', '/v1/memory', { content: 'delta note', tenant_id: 'delta' }, bearer(keyC));
    expectError(await add(), 401, 'invalid_api_key');
    svc.enclave.kill('SIGHUP');
    await waitFor(async () => (await add()).status === 200, 10_000, () => svc.output());

    const list = agentKeys(['list', '--file', file]);
    expect(list.status).toBe(0);
    expect(list.stdout.trim().split('\n')).toHaveLength(3);
    expect(list.stdout).toContain('delta');
    expect(list.stdout).not.toContain(keyC);

    expect(agentKeys(['revoke', '--file', file, '--key', keyC]).status).toBe(0);
    svc.enclave.kill('SIGHUP');
    await waitFor(async () => (await add()).status === 401, 10_000, () => svc.output());
    expect((await api('GET', '/v1/memory?tenant_id=alpha&query=x', undefined, bearer(keyA))).status).toBe(200);
  });

  it('revokes by id, and refuses ambiguous or unknown ids', () => {
    const keyD = issueKey(file, ['epsilon']);
    const id = agentKeys(['list', '--file', file]).stdout.split('\n').find((l) => l.includes('epsilon'))!.split(/\s+/)[0];
    expect(agentKeys(['revoke', '--file', file, '--id', 'sha256:0']).status).toBe(2);
    expect(agentKeys(['revoke', '--file', file, '--id', 'ffffffffffffffff']).status).toBe(1);
    expect(agentKeys(['revoke', '--file', file, '--id', id]).status).toBe(0);
    expect(readFileSync(file, 'utf8')).not.toContain('epsilon');
    expect(agentKeys(['revoke', '--file', file, '--key', keyD]).status).toBe(1);
    expect(agentKeys(['issue', '--file', file]).status).toBe(2);
    expect(agentKeys(['issue', '--file', file, '--tenant', 'no/slashes']).status).toBe(1);
  });

  it('a keys file made invalid is refused on reload, and the loaded keys stay', async () => {
    const good = readFileSync(file, 'utf8');
    try {
      writeFileSync(file, '{"oops": ');
      svc.enclave.kill('SIGHUP');
      await waitFor(async () => svc.output().includes('refused on reload'), 10_000, () => svc.output());
      expect((await api('GET', '/v1/memory?tenant_id=alpha&query=x', undefined, bearer(keyA))).status).toBe(200);
    } finally {
      writeFileSync(file, good);
    }
  });
});

describe('API keys on chat completions (offline responder, so the answer shows which memories were used)', () => {
  const chat = (headers: Record<string, string>, stream = false) =>
    api('POST', '/v1/chat/completions', { model: 'local-memory', stream, messages: [{ role: 'user', content: 'what is the launch code' }] }, headers);

  it('needs a key, and a key only reaches its own tenants\' memories', async () => {
    const secret = await api('POST', '/v1/memory', { content: 'alpha secret: the launch code is 1234', tenant_id: 'alpha' }, bearer(keyA));
    expect(secret.status).toBe(200);

    expectError(await chat({}), 401, 'missing_api_key');
    expectError(await chat({}, true), 401, 'missing_api_key');
    // keyB asking for alpha's memories, through either organization header.
    expectError(await chat({ ...bearer(keyB), organization_id: 'alpha' }), 403, 'tenant_not_allowed');
    expectError(await chat({ ...bearer(keyB), 'openai-organization': 'alpha' }, true), 403, 'tenant_not_allowed');

    const own = await chat({ ...bearer(keyA), organization_id: 'alpha' });
    expect(own.status).toBe(200);
    expect(own.body.memory_ids).toContain(secret.body.id);
    // A key holding one tenant uses it without the header.
    expect((await chat(bearer(keyA))).body.memory_ids).toContain(secret.body.id);
    // A key holding several tenants must say which.
    expect(expectError(await chat(bearer(keyB)), 400).param).toBe('organization_id');
    const beta = await chat({ ...bearer(keyB), organization_id: 'beta' });
    expect(beta.status).toBe(200);
    expect(beta.body.memory_ids).not.toContain(secret.body.id);
  });
});
