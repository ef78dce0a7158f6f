import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { BlobStore } from '../../common/blob-store.js';
import { FORMAT_VERSION, type FileMeta } from '../../enclave/storage/payloads.js';
import { deriveStorageKey } from '../../enclave/storage/sealed-file.js';
import { genesisHead } from '../../enclave/storage/state-head.js';
import { readSnapshot, writeSnapshot, type SnapshotEntry } from '../../enclave/storage/snapshot.js';

/**
 * A snapshot is sealed on the enclave's event loop while requests are served. A put that
 * takes each chunk at once (the host store's stream has room) never waits on the loop, so
 * the writer itself must let the loop turn, or every request and commit waits for it.
 */
const key = deriveStorageKey(randomBytes(32));
const storeId = 'ab'.repeat(16);
const meta: FileMeta = {
  store_id: storeId, format: FORMAT_VERSION, kind: 'snapshot', generation: 1, embedding_model: 'test', dimension: 8,
  embedding_sha256: '', created_at: 1_700_000_000, owner_generation: 0, head: genesisHead(storeId),
};
const entries = (n: number): SnapshotEntry[] => Array.from({ length: n }, (_, i) => ({
  record: { id: `mem_${String(i).padStart(32, '0')}`, object: 'memory', tenant_id: `t${i % 50}`, content: `memory number ${i} `.repeat(20), metadata: {}, created_at: 1_700_000_000, occurred_at: '2026-01-01T00:00:00.000Z' },
  vector: Float32Array.from({ length: 8 }, (_, j) => i + j),
}));

/** A host store whose put takes every chunk as soon as it is offered, in microtasks only. */
function eagerHost(): { blobs: BlobStore; chunks: Buffer[] } {
  const chunks: Buffer[] = [];
  const blobs = {
    async put(_name: string, data: Uint8Array | AsyncIterable<Uint8Array>) {
      for await (const chunk of data instanceof Uint8Array ? [data] : data) chunks.push(Buffer.from(chunk));
      return { version: '1' };
    },
  } as unknown as BlobStore;
  return { blobs, chunks };
}

describe('writing a snapshot', () => {
  it('lets the event loop turn between chunks once its slice is used up, and writes every memory', async () => {
    const { blobs, chunks } = eagerHost();
    let turns = 0;
    let counting = true;
    const count = () => {
      if (!counting) return;
      turns++;
      setImmediate(count);
    };
    setImmediate(count);
    // A slice of 0 ms: a turn before every chunk handed over after the first.
    const written = await writeSnapshot(blobs, 'snapshot.sealed', key, meta, entries(3000), undefined, [], {}, undefined, [], 0);
    counting = false;
    expect(chunks.length).toBeGreaterThan(10);
    expect(turns).toBeGreaterThanOrEqual(chunks.length - 2);
    expect(written.count).toBe(3000);

    async function* replay() {
      yield* chunks;
    }
    const reader = await readSnapshot(replay(), key, 'snapshot.sealed');
    let read = 0;
    for await (const event of reader.events) if ('record' in event) read++;
    expect(read).toBe(3000);
  });
});
