import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, request } from '../helpers/http.js';
import { startService, type RunningService } from '../helpers/service.js';

/** Finding 1 over HTTP: new tenants past MAX_TENANTS are refused, and a restart replays what was accepted. */
let svc: RunningService;
beforeAll(async () => {
  svc = await startService({ MAX_TENANTS: '3', MAX_MEMORIES: '250' });
});
afterAll(async () => {
  await svc?.stop();
});

const batch = (tenant: string, n: number) => ({ memories: Array.from({ length: n }, (_, i) => ({ tenant_id: tenant, content: `note ${i} for ${tenant}` })) });

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
