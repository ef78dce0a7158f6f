import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, request } from '../helpers/http.js';
import { startService, waitFor, type RunningService } from '../helpers/service.js';

let svc: RunningService;

beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.stop();
});

describe('when the enclave dies', () => {
  it('the proxy answers 503 in the error shape, then recovers by itself when the enclave is back', async () => {
    const ok = await request(svc.baseUrl, 'POST', '/v1/memory', { content: 'before the crash', tenant_id: 'd' });
    expect(ok.status).toBe(200);

    await svc.killEnclave('SIGKILL');
    const down = await request(svc.baseUrl, 'POST', '/v1/memory', { content: 'during the outage', tenant_id: 'd' });
    const err = expectError(down, 503, 'enclave_unavailable');
    expect(err.type).toBe('service_unavailable_error');
    expectError(await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=d&query=x'), 503);
    expectError(await request(svc.baseUrl, 'GET', '/healthz'), 503);
    // Bad input is still refused by the proxy itself, enclave or not.
    expectError(await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: 'd' }), 400);
    expect(svc.proxy.exitCode).toBeNull();

    await svc.startEnclave();
    await waitFor(async () => (await request(svc.baseUrl, 'POST', '/v1/memory', { content: 'after', tenant_id: 'd' })).status === 200, 10_000);
  });
});
