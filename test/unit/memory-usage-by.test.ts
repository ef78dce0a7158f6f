import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { shardOf } from '../../protocol/shards.js';

/** The counts the Shards RPC reports (enclave/cluster/shard-control.ts): every shard's in one pass, the same as one shard's at a time. */
let model: Embedder;
beforeAll(async () => {
  model = await loadEmbedder({ name: 'static', modelsDir });
});
afterAll(async () => {
  await model?.close();
});

describe('usage by shard', () => {
  it('counts each group\'s tenants and memories as usageOf counts one group\'s', async () => {
    const memory = new MemoryService(model, {});
    const tenants = ['t-a', 't-b', 't-c', 't-d', 't-e', 't-f', 't-g'];
    for (const [i, tenant] of tenants.entries()) {
      for (let k = 0; k <= i; k++) await memory.add({ tenant_id: tenant, content: `memory ${k} of ${tenant}`, dedupe: false });
    }
    const groupOf = (tenantId: string) => shardOf(tenantId, 4);
    const all = memory.usageBy(groupOf);
    for (let shard = 0; shard < 4; shard++) {
      const one = memory.usageOf((tenantId) => groupOf(tenantId) === shard);
      expect(all.get(shard) ?? { tenants: 0, memories: 0 }).toEqual(one);
    }
    expect([...all.values()].reduce((sum, u) => sum + u.memories, 0)).toBe(28);
    expect([...all.values()].reduce((sum, u) => sum + u.tenants, 0)).toBe(7);
  });
});
