import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { DurableStore, type StoreOptions } from '../../enclave/storage/store.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';

interface Closable {
  close(): Promise<void>;
}

/**
 * The set-up of the durable store's unit tests, in one place: the static embedder once per
 * file, a fresh folder per test, and after each test every store it opened closed, then every
 * host store on the folder (FsBlobStore keeps the segments it appends to open), then the folder
 * removed. Call it at the top of a test file.
 */
export function storeFixture(name: string) {
  let embedder: Embedder | undefined;
  let dir = '';
  const stores: Closable[] = [];
  const hosts: FsBlobStore[] = [];
  let shared: { dir: string; host: FsBlobStore } | undefined;

  beforeAll(async () => {
    embedder = await loadEmbedder({ name: 'static', modelsDir });
  });
  afterAll(async () => {
    await embedder?.close();
  });
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), `${name}-`));
  });
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close().catch(() => {});
    for (const host of hosts.splice(0)) await host.close().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });

  return {
    get embedder(): Embedder {
      if (!embedder) throw new Error('the embedder is loaded before the first test');
      return embedder;
    },
    /** This test's folder: the host store's. */
    get dir(): string {
      return dir;
    },
    /** A host store on this test's folder (as a host store process serves it), closed after the test. */
    host(): FsBlobStore {
      const host = new FsBlobStore(dir);
      hosts.push(host);
      return host;
    },
    /** This test's one host store, the same on every call (as one host store process serves a folder: its conditions hold within it). */
    sharedHost(): FsBlobStore {
      if (!shared || shared.dir !== dir) shared = { dir, host: this.host() };
      return shared.host;
    },
    /** A memory service and its durable store on this test's folder (no prefix, compaction only when asked), closed after the test. */
    async open(sealingKey: Uint8Array, options: Partial<StoreOptions> = {}): Promise<{ memory: MemoryService; store: DurableStore }> {
      const memory = new MemoryService(this.embedder);
      const store = await DurableStore.open({
        blobs: this.host(), prefix: '', sealingKey, embedding: memory.embeddingModel, snapshotLogBytes: 1 << 30, ...options,
      }, memory);
      memory.useJournal(store);
      this.track(store);
      return { memory, store };
    },
    /** Closes `store` after the test unless the test closed it (`stopped`). */
    track<T extends Closable>(store: T): T {
      stores.push(store);
      return store;
    },
    /** Closes `store` now; it is not closed again after the test. */
    async stop(store: Closable): Promise<void> {
      await store.close();
      const at = stores.indexOf(store);
      if (at >= 0) stores.splice(at, 1);
    },
  };
}
