import type { BlobStore } from '../../common/blob-store.js';

/**
 * Shard opens before read-aheads, on one enclave: a read-ahead (a standby's read or refresh, a
 * planned move's) steps aside, between the chunks it reads, while an open of another shard is
 * asked for, since that open is what the shard's clients wait for and both would share the
 * enclave's CPU. A read-ahead of a shard whose own open is asked for does not step aside: that
 * open waits for it (ShardedStore runs a shard's tasks one at a time) and continues from it.
 */
export class OpenFirst {
  /** Opens asked for and not settled, by shard (queued behind a task of the shard, or running). */
  private readonly opening = new Map<number, number>();
  private waiting: Array<() => void> = [];

  /** Counts `open` (of `shard`) as asked for until it settles. */
  track<T>(shard: number, open: Promise<T>): Promise<T> {
    this.opening.set(shard, (this.opening.get(shard) ?? 0) + 1);
    const settled = () => {
      const left = this.opening.get(shard)! - 1;
      if (left > 0) this.opening.set(shard, left);
      else this.opening.delete(shard);
      const waiting = this.waiting;
      this.waiting = [];
      for (const wake of waiting) wake();
    };
    open.then(settled, settled);
    return open;
  }

  /** Whether a read-ahead of `shard` steps aside now. */
  yields(shard: number): boolean {
    return this.opening.size > 0 && !this.opening.has(shard);
  }

  /** Resolves once a read-ahead of `shard` need not step aside. */
  async clear(shard: number): Promise<void> {
    while (this.yields(shard)) await new Promise<void>((wake) => this.waiting.push(wake));
  }

  /** `blobs` as a read-ahead of `shard` reads them: each chunk only once clear(shard). */
  reading(blobs: BlobStore, shard: number): BlobStore {
    const clear = () => this.clear(shard);
    return {
      list: (prefix) => blobs.list(prefix),
      async read(name, from) {
        const chunks = await blobs.read(name, from);
        if (!chunks) return undefined;
        return (async function* () {
          for await (const chunk of chunks) {
            await clear();
            yield chunk;
          }
        })();
      },
      // A read-ahead writes nothing (DurableStore.prepare).
      put: () => readOnly(),
      append: () => readOnly(),
      truncate: () => readOnly(),
      delete: () => readOnly(),
      release: () => readOnly(),
      close: () => readOnly(),
    };
  }
}

const readOnly = (): Promise<never> => Promise.reject(new Error('a read-ahead writes nothing to the host store'));
