import { BlobConflictError, type BlobStore } from '../../common/blob-store.js';
import type { Ancestry } from '../../protocol/response-signature.js';
import { shardOf } from '../../protocol/shards.js';
import type { MemoryJournal, TenantLocks } from '../memory/journal.js';
import type { MemoryEvent, RestoredEvent } from '../memory/types.js';
import { CorruptStoreError } from './errors.js';
import { logGeneration } from './log-file.js';
import { newShardMap, readShardMap, SHARD_FOLDER, SHARD_MAP_NAME, writeShardMap, type ShardMap } from './shard-map.js';
import { SNAPSHOT_NAME } from './snapshot.js';
import type { StateHead } from './state-head.js';
import { DurableStore, MEMORY_PREFIX, type StoreOptions, type StoreTarget } from './store.js';

/** Shards a service's data is made with when SHARDS is not set. */
export const DEFAULT_SHARDS = 1;

export interface ShardedOptions extends Omit<StoreOptions, 'prefix' | 'storeId' | 'name'> {
  /** SHARDS: the count for a service's new data; if set, it must equal the count its data was made with. */
  shards?: number;
}

const tenantOf = (event: MemoryEvent | RestoredEvent): string | undefined =>
  (event.type === 'delete' || event.type === 'tombstone' ? event.tenant_id : 'record' in event ? event.record.tenant_id : undefined);

/**
 * The enclave's memories in shards: tenants map to a fixed number of shards by a hash of their
 * id (protocol/shards.ts), and each shard is its own DurableStore (store id, chain of heads,
 * snapshots, log segments, group commit) in its own folder of the host store, so that a shard
 * can later be opened by another enclave alone. Which stores the shards are is fixed in a
 * sealed map written when the data is made (shard-map.ts); a folder holding another store
 * than the map names, or shard folders without the map, are refused, naming the shard.
 *
 * Data made before shards (memory/snapshot.sealed and memory/log-….sealed) opens as a service
 * of one shard whose store is that one, unchanged: nothing is moved, the map is only added.
 */
export class ShardedStore implements MemoryJournal {
  readonly locks: TenantLocks;
  private readonly shardCache = new Map<string, number>();

  private constructor(readonly map: ShardMap, readonly stores: readonly DurableStore[]) {
    const of = (tenantId: string) => this.stores[this.shardOf(tenantId)].locks;
    this.locks = {
      admit: (tenantId, secret, holdsMemories, apply) => {
        // Every call acting for a tenant comes here first: a shard another owner took over is
        // served no more, reads included (they would miss the new owner's changes and deletions).
        this.stores[this.shardOf(tenantId)].refuseIfTakenOver();
        of(tenantId).admit(tenantId, secret, holdsMemories, apply);
      },
      isLocked: (tenantId) => of(tenantId).isLocked(tenantId),
    };
  }

  static async open(options: ShardedOptions, target: StoreTarget): Promise<ShardedStore> {
    const { blobs, log } = options;
    const map = await ShardedStore.findMap(options);
    const stores: DurableStore[] = [];
    const cache = new Map<string, number>();
    try {
      for (const [index, { prefix, storeId }] of map.shards.entries()) {
        const name = `shard ${index} (${prefix})`;
        const store = await DurableStore.open({ ...options, prefix, storeId: storeId || undefined, name }, shardTarget(target, index, map.count, name, cache));
        stores.push(store);
        if (map.count > 1) log?.info({ shard: index, ...store.recovery }, 'shard recovered');
      }
    } catch (err) {
      await Promise.allSettled(stores.map((s) => s.close()));
      throw err;
    }
    // The map of data from before shards is written once its store has opened (and has its id).
    if (!map.shards[0].storeId) {
      map.shards[0].storeId = stores[0].storeId;
      await writeShardMap(blobs, options.sealingKey, map);
      log?.info({ map: SHARD_MAP_NAME }, 'memory store from before shards opened as one shard; recorded it in the shard map');
    }
    const sharded = new ShardedStore(map, stores);
    for (const [k, v] of cache) sharded.shardCache.set(k, v);
    return sharded;
  }

  /** The map: read (and checked against SHARDS and the host store's folders), or made for new data. */
  private static async findMap(options: ShardedOptions): Promise<ShardMap> {
    const { blobs, sealingKey, shards, log } = options;
    const found = await readShardMap(blobs, sealingKey);
    const folders = await shardFolders(blobs);
    if (found) {
      if (shards !== undefined && shards !== found.count) {
        throw new CorruptStoreError(`SHARDS is ${shards}, but this service's data was made with ${found.count} shard${found.count === 1 ? '' : 's'} (${SHARD_MAP_NAME}): the count cannot change; unset SHARDS or set it to ${found.count}`);
      }
      const stray = folders.filter((f) => !found.shards.some((s) => s.prefix === f));
      if (stray.length > 0) throw new CorruptStoreError(`${stray.join(', ')} ${stray.length === 1 ? 'is' : 'are'} not among the ${found.count} shard${found.count === 1 ? '' : 's'} of ${SHARD_MAP_NAME}: shards were added, renamed or brought from elsewhere`);
      return found;
    }
    if (folders.length > 0) {
      throw new CorruptStoreError(`the host store holds shards (${folders.slice(0, 3).join(', ')}${folders.length > 3 ? ', …' : ''}) but not ${SHARD_MAP_NAME}, which says how many there are and which store each is: restore it`);
    }
    if (await holdsSingleStore(blobs)) {
      if (shards !== undefined && shards !== 1) log?.warn({ shards }, `the memory store was made before shards: it opens as one shard, and SHARDS=${shards} applies to new data only`);
      return { count: 1, shards: [{ prefix: MEMORY_PREFIX, storeId: '' }] };
    }
    const map = newShardMap(shards ?? DEFAULT_SHARDS);
    try {
      await writeShardMap(blobs, sealingKey, map);
    } catch (err) {
      // Another enclave made the map at the same moment: use its.
      if (!(err instanceof BlobConflictError)) throw err;
      return ShardedStore.findMap(options);
    }
    log?.info({ shards: map.count }, 'new memory store in shards');
    return map;
  }

  get count(): number {
    return this.map.count;
  }

  shardOf(tenantId: string): number {
    let shard = this.shardCache.get(tenantId);
    if (shard === undefined) this.shardCache.set(tenantId, shard = shardOf(tenantId, this.map.count));
    return shard;
  }

  /**
   * Each shard's events go to its store. A batch in one shard is written, synced and applied
   * as one; a batch across shards is written to each shard's store at once and each part
   * applied as its store makes it durable, so memory holds what the logs hold even when one
   * shard fails (the call is then refused, as after a crash mid-write, with the other parts kept).
   */
  async commit(events: readonly MemoryEvent[], apply: (part?: readonly MemoryEvent[]) => void): Promise<void> {
    if (this.map.count === 1) return this.stores[0].commit(events, apply);
    const parts = new Map<number, MemoryEvent[]>();
    for (const event of events) {
      const shard = this.shardOf(tenantOf(event)!);
      let part = parts.get(shard);
      if (!part) parts.set(shard, part = []);
      part.push(event);
    }
    if (parts.size === 1) {
      const [shard] = parts.keys();
      return this.stores[shard].commit(events, apply);
    }
    const results = await Promise.allSettled([...parts].map(([shard, part]) => this.stores[shard].commit(part, apply)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  head(shard: number): StateHead {
    return this.stores[shard].head;
  }

  storeId(shard: number): string {
    return this.stores[shard].storeId;
  }

  ancestry(shard: number, known: StateHead): Ancestry {
    return this.stores[shard].ancestry(known);
  }

  /** What recovery found (the log line at start): one shard's report as it is; for several, totals and each shard's head. */
  get recovery(): { shards: number } & Record<string, unknown> {
    const reports = this.stores.map((s) => s.recovery);
    if (reports.length === 1) return { shards: 1, ...reports[0] };
    const cut = reports.find((r) => r.cutTail)?.cutTail;
    const changed = reports.find((r) => r.modelChange)?.modelChange;
    return {
      shards: this.map.count,
      events: reports.reduce((n, r) => n + r.events, 0),
      logs: reports.reduce((n, r) => n + r.logs, 0),
      snapshots: reports.filter((r) => r.snapshotGeneration !== null).length,
      heads: reports.map((r) => r.head.seq),
      ...(cut ? { cutTail: cut } : {}),
      ...(changed ? { modelChange: changed } : {}),
    };
  }

  async close(): Promise<void> {
    await Promise.all(this.stores.map((s) => s.close()));
  }
}

/**
 * One shard's view of the memories: it restores only its own tenants' changes (a change of
 * another shard's tenant in its files is refused, naming both), and snapshots only them.
 */
function shardTarget(target: StoreTarget, index: number, count: number, name: string, cache: Map<string, number>): StoreTarget {
  if (count === 1) return target;
  const mine = (tenantId: string) => {
    let shard = cache.get(tenantId);
    if (shard === undefined) cache.set(tenantId, shard = shardOf(tenantId, count));
    return shard === index;
  };
  return {
    apply(event) {
      const tenant = tenantOf(event);
      if (tenant !== undefined && !mine(tenant)) throw new CorruptStoreError(`${name} holds a change of a tenant of shard ${shardOf(tenant, count)}`);
      target.apply(event);
    },
    *entries() {
      for (const entry of target.entries()) if (mine(entry.record.tenant_id)) yield entry;
    },
    ...(target.deletedHistories ? {
      *deletedHistories() {
        for (const tombstone of target.deletedHistories!()) if (mine(tombstone.tenant_id)) yield tombstone;
      },
    } : {}),
  };
}

/** The shard folders the host store holds (`shard-03/`, …), whatever the map says. */
async function shardFolders(blobs: BlobStore): Promise<string[]> {
  const folders = new Set<string>();
  for (const { name } of await blobs.list(SHARD_FOLDER)) {
    const slash = name.indexOf('/');
    if (slash > 0) folders.add(name.slice(0, slash + 1));
  }
  return [...folders].sort();
}

/** Whether the host store holds a store made before shards: a snapshot or log segment directly in memory/. */
async function holdsSingleStore(blobs: BlobStore): Promise<boolean> {
  return (await blobs.list(MEMORY_PREFIX)).some(({ name }) => {
    const file = name.slice(MEMORY_PREFIX.length);
    return file === SNAPSHOT_NAME || logGeneration(file) !== undefined;
  });
}
