import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../common/errors.js';
import { importedMemory } from '../../enclave/memory/import.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import type { EmbeddingModelId } from '../../enclave/memory/types.js';
import { DurableStore } from '../../enclave/storage/store.js';
import { storeFixture } from '../helpers/store-fixture.js';

/**
 * The store's side of tenant keys (storage/tenant-keys.ts), in one process: what a restarted
 * store holds of a keyed tenant, what each key does to it, and what compaction keeps of it.
 * The attack through the real processes is test/integration/tenant-keys.test.ts.
 */
const fx = storeFixture('tenant-keys');
const sealingKey = randomBytes(32);
const secret = randomBytes(32);

async function start(embedding?: EmbeddingModelId) {
  const memory = new MemoryService(fx.embedder);
  const store = await DurableStore.open({
    blobs: fx.host(), prefix: '', sealingKey, embedding: embedding ?? memory.embeddingModel, snapshotLogBytes: 1 << 30, reembed: async () => {},
  }, memory);
  memory.useJournal(store);
  fx.track(store);
  return { memory, store };
}
const refusal = (run: () => void) => {
  try {
    run();
  } catch (err) {
    return err instanceof ApiError ? `${err.status} ${err.code}` : String(err);
  }
  return 'let through';
};

describe('a keyed tenant in the store', () => {
  it('is held unopened after a restart, refuses calls without its key or with another, opens with it; compactions keep it either way', async () => {
    const a = await start();
    a.memory.admitTenant('k', secret);
    const kept = await a.memory.add({ tenant_id: 'k', content: 'the piano is in the castle' });
    const gone = await a.memory.add({ tenant_id: 'k', content: 'the coffee is on the island' });
    await a.memory.delete('k', gone.id);
    await a.memory.add({ tenant_id: 'plain', content: 'a plain river' });
    // Open: the key is needed on every call, and no other turns it on.
    expect(refusal(() => a.memory.admitTenant('k', undefined))).toBe('423 tenant_locked');
    expect(refusal(() => a.memory.admitTenant('k', randomBytes(32)))).toBe('403 wrong_tenant_key');
    expect(refusal(() => a.memory.admitTenant('plain', secret))).toBe('409 tenant_key_not_enabled');
    await a.store.compact();
    await a.store.close();

    const b = await start();
    // Nothing of it is loaded; a write for it is refused rather than logged in the clear.
    expect(b.memory.get('k', kept.id)).toBeUndefined();
    expect(b.memory.usage).toMatchObject({ tenants: 1, memories: 1 });
    await expect(b.memory.add({ tenant_id: 'k', content: 'written past the lock' })).rejects.toMatchObject({ code: 'tenant_locked' });
    expect(refusal(() => b.memory.admitTenant('k', undefined))).toBe('423 tenant_locked');
    expect(refusal(() => b.memory.admitTenant('k', randomBytes(32)))).toBe('403 wrong_tenant_key');
    // A compaction while it is locked carries it over as it is.
    await b.store.compact();
    await b.store.close();

    const c = await start();
    expect(refusal(() => c.memory.admitTenant('k', secret))).toBe('let through');
    expect(c.memory.get('k', kept.id)?.content).toBe('the piano is in the castle');
    expect(c.memory.get('k', gone.id)).toBeUndefined();
    expect(c.memory.historyOf('k', gone.id)).toMatchObject({ deleted: true });
    expect((await c.memory.query({ tenant_id: 'k', query: 'piano castle', top_k: 1 }))[0].record.id).toBe(kept.id);
    expect(refusal(() => c.memory.admitTenant('k', undefined))).toBe('423 tenant_locked');
  });

  it('keeps, through a compaction while it is locked, the history of memories it deleted before it had a key', async () => {
    const a = await start();
    const early = await a.memory.add({ tenant_id: 'k', content: 'stored before the key' });
    await a.memory.delete('k', early.id);
    a.memory.admitTenant('k', secret);
    await a.memory.add({ tenant_id: 'k', content: 'the piano is in the castle' });
    await a.store.close();
    const b = await start();
    await b.store.compact();
    await b.store.close();
    const c = await start();
    c.memory.admitTenant('k', secret);
    expect(c.memory.historyOf('k', early.id)).toMatchObject({ deleted: true });
  });

  it('moves a tenant stored in the clear under a key as the docs say: export, delete, import with the key', async () => {
    const a = await start();
    await a.memory.add({ tenant_id: 'm', content: 'the piano is in the castle', user_id: 'u1' });
    expect(refusal(() => a.memory.admitTenant('m', secret))).toBe('409 tenant_key_not_enabled');
    const exported = [...a.memory.exportTenant('m')].map(({ record, history }) => importedMemory('m', { type: 'memory', memory: record, history }, 'line', 0));
    await a.memory.deleteAll('m');
    expect(refusal(() => a.memory.admitTenant('m', secret))).toBe('let through');
    expect((await a.memory.importMany('m', exported)).imported).toEqual([exported[0].record.id]);
    await a.store.close();
    const b = await start();
    expect(refusal(() => b.memory.admitTenant('m', undefined))).toBe('423 tenant_locked');
    b.memory.admitTenant('m', secret);
    expect(b.memory.get('m', exported[0].record.id)).toMatchObject({ content: 'the piano is in the castle', user_id: 'u1' });
  });

  it('stays locked, and is refused rather than opened, when the enclave\'s embedding model is not the one its vectors came from', async () => {
    const a = await start();
    a.memory.admitTenant('k', secret);
    await a.memory.add({ tenant_id: 'k', content: 'the piano is in the castle' });
    await a.store.close();
    // The model the store says it holds is another: the store is rewritten, the locked tenant carried over.
    const b = await start({ id: 'another-model', dimension: fx.embedder.dimension, sha256: 'f'.repeat(64) });
    expect(refusal(() => b.memory.admitTenant('k', secret))).toBe('503 storage_unavailable');
    expect(refusal(() => b.memory.admitTenant('k', undefined))).toBe('423 tenant_locked');
  });
});
