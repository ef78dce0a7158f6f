import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { DurableStore } from '../../enclave/storage/store.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';

/** A log written before memories had scopes or occurred_at (test/fixtures/store-before-scopes/README.md) still recovers. */

const FIXTURE = join(import.meta.dirname, '../fixtures/store-before-scopes');
let embedder: Embedder;
let dir: string;

beforeAll(async () => {
  embedder = await loadEmbedder({ name: 'static', modelsDir });
  dir = mkdtempSync(join(tmpdir(), 'store-before-scopes-'));
  cpSync(FIXTURE, dir, { recursive: true });
});
afterAll(async () => {
  await embedder?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function open() {
  const memory = new MemoryService(embedder);
  const store = await DurableStore.open({ blobs: new FsBlobStore(dir), prefix: '', sealingKey: Buffer.alloc(32, 7), embedding: memory.embeddingModel, snapshotLogBytes: 1 << 30 }, memory);
  memory.useJournal(store);
  return { memory, store };
}

describe('a store written before scopes', () => {
  it('recovers every memory, each read as having no scope, and goes on with scoped ones', async () => {
    const first = await open();
    expect(first.store.recovery).toMatchObject({ events: 5 });
    const records = first.memory.list('old', 10)!.data;
    expect(records.map((r) => r.content)).toEqual(['We live in Porto now', 'The dog is called Rex']);
    for (const record of records) for (const field of ['user_id', 'agent_id', 'run_id', 'occurred_at']) expect(record).not.toHaveProperty(field);
    // Without occurred_at, a record's created_at stands in for since and until.
    const storedAt = new Date(records[0].created_at * 1000).toISOString();
    expect(await first.memory.query({ tenant_id: 'old', query: 'dog', top_k: 5, until: storedAt })).toHaveLength(2);
    expect(await first.memory.query({ tenant_id: 'old', query: 'dog', top_k: 5, since: '2099-01-01T00:00:00.000Z' })).toEqual([]);
    const [top] = await first.memory.query({ tenant_id: 'old', query: 'what is the dog called', top_k: 1 });
    expect(top.record.content).toBe('The dog is called Rex');
    // A memory without a scope is in none: a scoped search or list does not find it.
    expect(await first.memory.query({ tenant_id: 'old', query: 'dog', top_k: 5, user_id: 'alice' })).toEqual([]);
    expect(first.memory.list('old', 10, undefined, { user_id: 'alice' })!.data).toEqual([]);

    await first.memory.add({ tenant_id: 'old', content: 'Alice has a cat', user_id: 'alice' });
    await first.store.close();
    const second = await open();
    expect(second.memory.list('old', 10, undefined, { user_id: 'alice' })!.data.map((r) => r.content)).toEqual(['Alice has a cat']);
    expect(second.memory.list('old', 10)!.data).toHaveLength(3);
    await second.store.close();
  });
});
