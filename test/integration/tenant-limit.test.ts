import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, request } from '../helpers/http.js';
import { startService, type RunningService } from '../helpers/service.js';

let svc: RunningService;
beforeAll(async () => {
  svc = await startService({ MAX_MEMORIES_PER_TENANT: '3' });
});
afterAll(async () => {
  await svc?.stop();
});

const add = (tenant_id: string, content: string) => request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id, content });

describe('MAX_MEMORIES_PER_TENANT', () => {
  it('answers 409 memory_limit_reached past the maximum, per tenant, and again after a restart', async () => {
    const results = await Promise.all(['one', 'two', 'three', 'four', 'five'].map((c) => add('full', `note ${c}`)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(3);
    for (const r of results.filter((r) => r.status !== 200)) {
      const err = expectError(r, 409, 'memory_limit_reached');
      expect(err).toMatchObject({ type: 'invalid_request_error', param: 'tenant_id' });
      expect(err.message).toBe("tenant 'full' holds the maximum of 3 memories; delete some before adding more");
    }
    expect((await add('other', 'still room here')).status).toBe(200);

    // The count is of stored memories, so it holds across a restart…
    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    expectError(await add('full', 'after restart'), 409, 'memory_limit_reached');
    // …and a delete makes room.
    const id = results.find((r) => r.status === 200)!.body.id;
    expect((await request(svc.baseUrl, 'DELETE', `/v1/memory/${id}?tenant_id=full`)).status).toBe(200);
    expect((await add('full', 'room again')).status).toBe(200);
    expectError(await add('full', 'and full again'), 409);
  });
});
