import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../common/errors.js';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { DEFAULT_MAX_MEMORIES_PER_TENANT } from '../../enclave/memory/memory-options.js';

let embedder: Embedder;
beforeAll(async () => {
  embedder = await loadEmbedder({ name: 'static', modelsDir });
});
afterAll(async () => {
  await embedder?.close();
});

describe('maximum memories per tenant', () => {
  it('defaults to 100,000', () => {
    expect(DEFAULT_MAX_MEMORIES_PER_TENANT).toBe(100_000);
  });

  it('refuses with 409 memory_limit_reached past the maximum, counting adds still in progress', async () => {
    const memory = new MemoryService(embedder, { maxMemoriesPerTenant: 3 });
    const results = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => memory.add({ tenant_id: 'a', content: `note ${i} about apples` })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as ApiError);
    expect(refused).toHaveLength(2);
    for (const err of refused) {
      expect(err).toBeInstanceOf(ApiError);
      expect(err.toBody()).toEqual({
        error: {
          message: "tenant 'a' holds the maximum of 3 memories; delete some before adding more",
          type: 'invalid_request_error', param: 'tenant_id', code: 'memory_limit_reached',
        },
      });
      expect(err.status).toBe(409);
    }
    // Other tenants have their own allowance; deleting makes room again.
    await memory.add({ tenant_id: 'b', content: 'pears' });
    const [first] = [...memory.entries()].filter((e) => e.record.tenant_id === 'a');
    await memory.delete('a', first.record.id);
    await memory.add({ tenant_id: 'a', content: 'room again' });
    await expect(memory.add({ tenant_id: 'a', content: 'one too many' })).rejects.toMatchObject({ status: 409 });
  });

  it('releases the reservation of an add that failed', async () => {
    const memory = new MemoryService(embedder, { maxMemoriesPerTenant: 1 });
    memory.useJournal({ commit: async () => { throw new Error('disk gone'); } });
    await expect(memory.add({ tenant_id: 'a', content: 'x' })).rejects.toThrow('disk gone');
    memory.useJournal({ commit: async (_event, apply) => apply() });
    await expect(memory.add({ tenant_id: 'a', content: 'y' })).resolves.toMatchObject({ content: 'y' });
  });
});
