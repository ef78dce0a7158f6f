import { BlobConflictError, type BlobStore } from '../../common/blob-store.js';
import type { Ancestry } from '../../protocol/response-signature.js';
import { SHARD_MISS_HEADER, shardOf } from '../../protocol/shards.js';
import type { MemoryJournal, TenantLocks } from '../memory/journal.js';
import type { MemoryEvent, ReplayMark, RestoredEvent } from '../memory/types.js';
import { ApiError, unavailable } from '../../common/errors.js';
import { CorruptStoreError, PreparedLimitError, PreparedStateStale, ShardHeldError, StaleOwnerError } from './errors.js';
import { logGeneration } from './log-file.js';
import { OpenFirst } from './open-first.js';
import { newShardMap, readShardMap, SHARD_FOLDER, SHARD_MAP_NAME, writeShardMap, type ShardMap } from './shard-map.js';
import { SNAPSHOT_NAME } from './snapshot.js';
import { genesisHead, sameHead, type StateHead } from './state-head.js';
import { DurableStore, MEMORY_PREFIX, type PreparedStore, type StoreOptions, type StoreTarget } from './store.js';

/** Shards a service's data is made with when SHARDS is not set. */
export const DEFAULT_SHARDS = 1;

/** SHARDS_OPEN: every shard opened at start (one enclave, `npm start`), or none until the host's placement opens them (a cluster). */
export type OpenShards = 'all' | 'none';

/** How long a shard read ahead (prepareShard) waits for its openShard before it leaves memory, unless the call says otherwise. */
export const PREPARED_TTL_MS = 60_000;

/** The longest a read-ahead may be kept (prepareShard's `keepMs`): a host that stops refreshing standbys frees their memory within it. */
export const PREPARED_KEEP_MAX_MS = 3_600_000;

/** Shards kept read ahead at once when PREPARED_SHARDS_MAX is not set: each holds a shard's memories a second time. */
export const DEFAULT_MAX_PREPARED = 4;

export interface ShardedOptions extends Omit<StoreOptions, 'prefix' | 'storeId' | 'name' | 'shard'> {
  /** SHARDS: the count for a service's new data; if set, it must equal the count its data was made with. */
  shards?: number;
  /** Default 'all'. With 'none', `generation` and `outrank` are not used: each openShard() names its generation. */
  openShards?: OpenShards;
  /** Default PREPARED_TTL_MS. */
  preparedTtlMs?: number;
  /** Shards kept read ahead at once (planned moves, warm standbys); default DEFAULT_MAX_PREPARED. */
  maxPrepared?: number;
}

/** What a shard opened at runtime is held to: freshness across enclaves (enclave/cluster/freshness.ts). */
export type ShardChecks = Pick<StoreOptions, 'acceptHead' | 'confirm'>;

/** What the shards restore into: the memories (MemoryService), which a closed shard's tenants leave. */
export interface ShardTarget extends StoreTarget {
  /** Drops from memory every tenant `belongs` names (vectors, lexical index, search-worker copy, histories). */
  dropTenants?(belongs: (tenantId: string) => boolean): void;
}

const tenantOf = (event: MemoryEvent | RestoredEvent): string | undefined =>
  (event.type === 'delete' || event.type === 'tombstone' ? event.tenant_id : 'record' in event ? event.record.tenant_id : undefined);

/** 503 shard_not_owned for a tenant of a shard this enclave does not hold: the header tells the host where the request belongs. */
export const shardNotHeld = (shard: number, name: string): ApiError =>
  unavailable(`${name} is not held by this enclave (the host routes its tenants to the enclave that owns it); nothing was changed`, 'shard_not_owned', { [SHARD_MISS_HEADER]: String(shard) });

/**
 * The enclave's memories in shards: tenants map to a fixed number of shards by a hash of their
 * id (protocol/shards.ts), and each shard is its own DurableStore (store id, chain of heads,
 * snapshots, log segments, group commit) in its own folder of the host store, so that a shard
 * can be opened by another enclave alone. Which stores the shards are is fixed in a sealed map
 * written when the data is made (shard-map.ts); a folder holding another store than the map
 * names, or shard folders without the map, are refused, naming the shard.
 *
 * Shards open and close at runtime (openShard, closeShard: the host's placement, #38 item 2):
 * a shard's tenants are recovered into the running memories when it opens and dropped when it
 * closes. A call for a tenant of a shard not held is refused (503 shard_not_owned, its index in
 * SHARD_MISS_HEADER), and so is a batch of which any part is not held, before anything is written.
 *
 * Data made before shards (memory/snapshot.sealed and memory/log-….sealed) opens as a service
 * of one shard whose store is that one, unchanged: nothing is moved, the map is only added.
 */
export class ShardedStore implements MemoryJournal {
  readonly locks: TenantLocks;
  private readonly shardCache = new Map<string, number>();
  /** The store serving each shard now: undefined while it is not held (never opened, closing or closed). */
  private readonly held: Array<DurableStore | undefined>;
  /** The last store of each shard (serving, closing or closed): what answers name while it is not held. */
  private readonly last: Array<DurableStore | undefined>;
  /** Each shard's open or close under way: they run one at a time per shard. */
  private readonly changing = new Map<number, Promise<unknown>>();
  /**
   * Shards read ahead (prepareShard), not served, each with the timer that drops it. Read and
   * changed only by a task of its shard (oneAtATime), which drops its tenants with it: a shard's
   * tenants are in memory only while it is held, prepared, or being opened or prepared.
   */
  private readonly prepared = new Map<number, { store: PreparedStore; timer: NodeJS.Timeout }>();
  /** Shards whose prepareShard is queued or running: with `prepared`, what counts against maxPrepared. */
  private readonly preparing = new Map<number, number>();
  /** Opens asked for, which read-aheads of other shards step aside for. */
  private readonly openFirst = new OpenFirst();

  private constructor(readonly map: ShardMap, private readonly options: ShardedOptions, private readonly target: ShardTarget) {
    this.held = new Array<DurableStore | undefined>(map.count).fill(undefined);
    this.last = new Array<DurableStore | undefined>(map.count).fill(undefined);
    this.locks = {
      admit: (tenantId, secret, holdsMemories, apply) => {
        // Every call acting for a tenant comes here first: a shard not held, or that another owner
        // took over, is served no more, reads included (they would miss the owner's changes).
        const shard = this.shardOf(tenantId);
        const store = this.held[shard];
        if (!store) throw shardNotHeld(shard, this.shardName(shard));
        store.refuseIfTakenOver();
        store.locks.admit(tenantId, secret, holdsMemories, apply);
      },
      isLocked: (tenantId) => this.held[this.shardOf(tenantId)]?.locks.isLocked(tenantId) ?? false,
    };
  }

  static async open(options: ShardedOptions, target: ShardTarget): Promise<ShardedStore> {
    const map = await ShardedStore.findMap(options);
    const sharded = new ShardedStore(map, options, target);
    if ((options.openShards ?? 'all') === 'none') {
      options.log?.info({ shards: map.count }, 'no shard opened at start (SHARDS_OPEN=none): waiting for the host to open them');
      return sharded;
    }
    try {
      for (let shard = 0; shard < map.count; shard++) await sharded.openAt(shard, options.generation ?? 0, options.outrank ?? false, true);
    } catch (err) {
      await sharded.close().catch(() => {});
      throw err;
    }
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

  /** Whether this enclave serves the shard now (held, and not taken over by a newer owner). */
  holds(shard: number): boolean {
    const store = this.held[shard];
    return store !== undefined && !store.takenOver;
  }

  /** Throws 503 shard_not_owned when the tenant's shard is not held now (a read of a tenant found empty: MemoryService). */
  refuseIfNotHeld(tenantId: string): void {
    const shard = this.shardOf(tenantId);
    if (!this.holds(shard)) throw this.refusal(shard);
  }

  /** The shards served now, in order (held, and not taken over by a newer owner). */
  get open(): number[] {
    return this.held.flatMap((store, shard) => (store && !store.takenOver ? [shard] : []));
  }

  /** The generation the shard is held with; undefined when it is not held. */
  generation(shard: number): number | undefined {
    return this.held[shard]?.ownerGeneration;
  }

  /**
   * Opens shard `shard`'s store as owner `generation` (refused, StaleOwnerError, when its files
   * name a higher one, unless `outrank`), recovering its tenants into the memories; from then on
   * they are served. Nothing of a refused or failed open stays in memory. Already held at that
   * generation: nothing to do. Held at a lower one (or taken over): closed, then opened again.
   */
  openShard(shard: number, generation: number, checks: ShardChecks = {}): Promise<DurableStore> {
    return this.openAt(shard, generation, false, false, checks);
  }

  /**
   * Reads shard `shard`'s store ahead of its openShard, while its owner still serves it (a
   * planned move, docs/cluster.md): its snapshot, saved graphs and log up to their end now, into
   * the memories, writing nothing (no tail cut, no fence, no generation). Its tenants are not
   * served meanwhile (503 shard_not_owned, as for any shard not held); openShard then applies only
   * the log written since, if the files still continue what was read, and opens it in full
   * otherwise. Several shards may be kept read ahead (a warm standby of each: docs/cluster.md), at
   * most `maxPrepared`, each taking its memory a second time in the service: beyond it, refused
   * (PreparedLimitError) before anything is read. A shard prepared again (a standby's refresh) is
   * read on from where its last read ended, only what was written since, as openShard does; where
   * the files no longer continue that read, read again from the start. Its read steps aside while
   * an open of another shard is asked for (open-first.ts). One not opened within `keepMs` (default
   * `preparedTtlMs`, at most PREPARED_KEEP_MAX_MS), or closed, leaves memory. Refused
   * (ShardHeldError) for a shard this enclave serves; a shard held but taken over by a newer owner
   * is let go first.
   */
  prepareShard(shard: number, keepMs?: number): Promise<PreparedStore> {
    this.checkShard(shard);
    const max = this.preparedMax;
    const kept = new Set([...this.prepared.keys(), ...this.preparing.keys()]);
    if (!kept.has(shard) && kept.size >= max) {
      throw new PreparedLimitError(`${this.shardName(shard)} not read ahead: this enclave keeps ${kept.size} shard${kept.size === 1 ? '' : 's'} read ahead already (shards ${[...kept].sort((x, y) => x - y).join(', ')}), its most (PREPARED_SHARDS_MAX ${max})`);
    }
    this.preparing.set(shard, (this.preparing.get(shard) ?? 0) + 1);
    const keep = Math.min(keepMs || (this.options.preparedTtlMs ?? PREPARED_TTL_MS), PREPARED_KEEP_MAX_MS);
    const run = this.oneAtATime(shard, async () => {
      const current = this.held[shard];
      const name = this.shardName(shard);
      if (current && !current.takenOver) throw new ShardHeldError(`${name} is served by this enclave: there is nothing to prepare`);
      if (current) await this.release(shard, current);
      const { prefix, storeId } = this.map.shards[shard];
      const options: StoreOptions = { ...this.options, blobs: this.openFirst.reading(this.options.blobs, shard), prefix, storeId: storeId || undefined, name, shard, reembed: undefined };
      const earlier = this.takePrepared(shard);
      let prepared: PreparedStore | undefined;
      try {
        if (earlier) prepared = await this.readOn(shard, 'reading it again in full', () => DurableStore.refresh(earlier, options));
        prepared ??= await DurableStore.prepare(options, shardTarget(this.target, shard, this.map.count, name, this.shardCache));
      } catch (err) {
        this.drop(shard);
        throw err;
      }
      const timer = setTimeout(() => this.oneAtATime(shard, async () => {
        if (this.prepared.get(shard)?.store === prepared) this.dropPrepared(shard, 'it was not opened in time');
      }).catch(() => {}), keep);
      timer.unref();
      this.prepared.set(shard, { store: prepared, timer });
      this.options.log?.info({ shard, seq: prepared.head.seq, keepMs: keep, ...(prepared.readOnFrom ? { from: prepared.readOnFrom.seq } : {}) }, 'shard read ahead of its open: not served until then');
      return prepared;
    });
    void run.catch(() => {}).finally(() => {
      const left = this.preparing.get(shard)! - 1;
      if (left > 0) this.preparing.set(shard, left);
      else this.preparing.delete(shard);
    });
    return run;
  }

  /** Whether the shard is read ahead now (tests, metrics). */
  isPrepared(shard: number): boolean {
    return this.prepared.has(shard);
  }

  /** The shards read ahead now, in order, each with the head its read reached (the Shards RPC: the host refreshes standbys by it). */
  /** The most shards read ahead at once (maxPrepared). */
  get preparedMax(): number {
    return this.options.maxPrepared ?? DEFAULT_MAX_PREPARED;
  }

  get preparedHeads(): Array<{ shard: number; head: StateHead }> {
    return [...this.prepared].sort(([x], [y]) => x - y).map(([shard, { store }]) => ({ shard, head: store.head }));
  }

  /** The shard's read-ahead, taken for its open (or to drop it): only in a task of the shard. */
  private takePrepared(shard: number): PreparedStore | undefined {
    const prepared = this.prepared.get(shard);
    if (!prepared) return undefined;
    clearTimeout(prepared.timer);
    this.prepared.delete(shard);
    return prepared.store;
  }

  /** Drops the shard's read-ahead and its tenants from memory: only in a task of the shard. */
  private dropPrepared(shard: number, why: string): void {
    if (!this.takePrepared(shard)) return;
    this.drop(shard);
    this.options.log?.info({ shard, why }, 'shard read ahead dropped: its tenants left memory');
  }

  /**
   * Continues a shard's read-ahead (`go`: its open, or its refresh): only the log written since
   * is applied. When the files no longer continue what was read (PreparedStateStale), or a part
   * written since is damaged, what was read goes and the shard is to be read in full (undefined,
   * `then` says so in the log), so the answer is always a full read's. Other refusals (a newer
   * owner, an older copy than witnessed) are a full open's too.
   */
  private async readOn<T>(shard: number, then: string, go: () => Promise<T>): Promise<T | undefined> {
    try {
      return await go();
    } catch (err) {
      if (!(err instanceof PreparedStateStale || err instanceof CorruptStoreError)) throw err;
      this.drop(shard);
      this.options.log?.warn({ shard, err: err.message }, `the shard read ahead does not continue into its files now: dropped it, ${then}`);
      return undefined;
    }
  }

  /**
   * `atStart`: before anything is served, the one time memories stored under another
   * embedding model may be re-embedded (MemoryService.reembed re-embeds every tenant held);
   * at runtime such a shard is refused (EmbeddingModelChangedError).
   */
  private openAt(shard: number, generation: number, outrank: boolean, atStart: boolean, checks: ShardChecks = {}): Promise<DurableStore> {
    this.checkShard(shard);
    return this.openFirst.track(shard, this.oneAtATime(shard, async () => {
      const current = this.held[shard];
      if (current && !current.takenOver && current.ownerGeneration === generation) return current;
      const name = this.shardName(shard);
      if (current && !current.takenOver && generation < current.ownerGeneration) {
        throw new StaleOwnerError(name, generation, current.ownerGeneration, 'this enclave, which holds it,');
      }
      if (current) await this.release(shard, current);
      const { prefix, storeId } = this.map.shards[shard];
      const { count } = this.map;
      const options: StoreOptions = { ...this.options, ...checks, generation, outrank, prefix, storeId: storeId || undefined, name, shard, reembed: atStart ? this.options.reembed : undefined };
      const target = shardTarget(this.target, shard, count, name, this.shardCache);
      let store: DurableStore | undefined;
      try {
        const prepared = this.takePrepared(shard);
        if (prepared) store = await this.readOn(shard, 'opening the shard in full', () => DurableStore.resume(prepared, options, target));
        store ??= await DurableStore.open(options, target);
      } catch (err) {
        // A shard is served whole or not at all: what was replayed before the refusal goes.
        this.drop(shard);
        throw err;
      }
      // The map of data from before shards is written once its store has opened (and has its id).
      if (!storeId) {
        this.map.shards[shard].storeId = store.storeId;
        await writeShardMap(this.options.blobs, this.options.sealingKey, this.map);
        this.options.log?.info({ map: SHARD_MAP_NAME }, 'memory store from before shards opened as one shard; recorded it in the shard map');
      }
      this.held[shard] = store;
      this.last[shard] = store;
      if (count > 1 || this.options.openShards === 'none') this.options.log?.info({ shard, generation: store.ownerGeneration, ...store.recovery }, 'shard recovered');
      return store;
    }));
  }

  /**
   * Stops serving the shard: new calls for its tenants and new changes are refused (503
   * shard_not_owned) at once, the changes already being written are made durable and
   * applied (those acknowledged stay acknowledged), then its tenants leave memory and its
   * store is closed. Not held: nothing to do. Resolves with the store as it was last.
   */
  closeShard(shard: number): Promise<DurableStore | undefined> {
    this.checkShard(shard);
    // No new call or change for the shard from this moment (unless an open of it is still under way: after it).
    const now = this.changing.has(shard) ? undefined : this.held[shard];
    if (now) this.held[shard] = undefined;
    return this.oneAtATime(shard, async () => {
      // Read ahead for a move that is not coming (the host closes what it does not give this enclave).
      if (this.takePrepared(shard)) this.drop(shard);
      const store = now ?? this.held[shard];
      if (store) {
        await this.release(shard, store);
        this.options.log?.info({ shard, generation: store.ownerGeneration, seq: store.head.seq }, 'shard closed: its tenants were dropped from memory');
      }
      return this.last[shard];
    });
  }

  /** The last store of `shard` this enclave held (serving or not); undefined when it never held it. */
  lastStore(shard: number): DurableStore | undefined {
    return this.last[shard];
  }

  /**
   * Each shard's events go to its store. A batch in one shard is written, synced and applied
   * as one; a batch across shards is written to each shard's store at once and each part
   * applied as its store makes it durable, so memory holds what the logs hold even when one
   * shard fails (the call is then refused, as after a crash mid-write, with the other parts kept).
   * A batch with a part in a shard not held is refused whole, before anything is written, and
   * so is one that any of its shards' logs holds the replay id of (each part is logged with it).
   */
  async commit(events: readonly MemoryEvent[], apply: (part?: readonly MemoryEvent[]) => void, replay?: ReplayMark): Promise<void> {
    if (this.map.count === 1) return this.heldStore(0).commit(events, apply, replay);
    const parts = new Map<number, MemoryEvent[]>();
    for (const event of events) {
      const shard = this.shardOf(tenantOf(event)!);
      let part = parts.get(shard);
      if (!part) parts.set(shard, part = []);
      part.push(event);
    }
    if (parts.size === 1) {
      const [shard] = parts.keys();
      return this.heldStore(shard).commit(events, apply, replay);
    }
    const stores = [...parts.keys()].map((shard) => this.heldStore(shard));
    if (replay) for (const store of stores) store.refuseIfReplayed(replay);
    const results = await Promise.allSettled([...parts.values()].map((part, i) => stores[i].commit(part, apply, replay)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** The shard's head: its store's (serving, closing or closed), or its empty store's if this enclave never held it. */
  head(shard: number): StateHead {
    return this.last[shard]?.head ?? genesisHead(this.map.shards[shard].storeId);
  }

  storeId(shard: number): string {
    return this.last[shard]?.storeId ?? this.map.shards[shard].storeId;
  }

  ancestry(shard: number, known: StateHead): Ancestry {
    const store = this.last[shard];
    if (store) return store.ancestry(known);
    return sameHead(known, this.head(shard)) ? 'yes' : 'unknown';
  }

  /** What recovery found (the log line at start): one shard's report as it is; for several, totals and each shard's head. */
  get recovery(): { shards: number } & Record<string, unknown> {
    const reports = this.held.filter((s): s is DurableStore => s !== undefined).map((s) => s.recovery);
    if (reports.length === 1 && this.map.count === 1) return { shards: 1, ...reports[0] };
    const cut = reports.find((r) => r.cutTail)?.cutTail;
    const changed = reports.find((r) => r.modelChange)?.modelChange;
    return {
      shards: this.map.count,
      ...(reports.length < this.map.count ? { open: this.open } : {}),
      events: reports.reduce((n, r) => n + r.events, 0),
      logs: reports.reduce((n, r) => n + r.logs, 0),
      snapshots: reports.filter((r) => r.snapshotGeneration !== null).length,
      heads: reports.map((r) => r.head.seq),
      ...(reports.some((r) => r.graphs) ? { graphsRestored: reports.reduce((n, r) => n + (r.graphs?.restored ?? 0), 0) } : {}),
      ...(cut ? { cutTail: cut } : {}),
      ...(changed ? { modelChange: changed } : {}),
    };
  }

  async close(): Promise<void> {
    for (const { timer } of this.prepared.values()) clearTimeout(timer);
    this.prepared.clear();
    await Promise.all(this.held.map((s) => s?.close()));
  }

  /** Why a call for a tenant of `shard` is refused: taken over by a newer owner, or not held. */
  private refusal(shard: number): ApiError {
    try {
      this.held[shard]?.refuseIfTakenOver();
    } catch (err) {
      if (err instanceof ApiError) return err;
      throw err;
    }
    return shardNotHeld(shard, this.shardName(shard));
  }

  private heldStore(shard: number): DurableStore {
    const store = this.held[shard];
    if (!store) throw shardNotHeld(shard, this.shardName(shard));
    return store;
  }

  private shardName(shard: number): string {
    return `shard ${shard} (${this.map.shards[shard].prefix})`;
  }

  private checkShard(shard: number): void {
    if (!Number.isSafeInteger(shard) || shard < 0 || shard >= this.map.count) {
      throw new RangeError(`there is no shard ${shard}: this service has ${this.map.count} (0 to ${this.map.count - 1})`);
    }
  }

  /** No longer held from now on; its writes in flight finish, then its tenants leave memory. */
  private async release(shard: number, store: DurableStore): Promise<void> {
    this.held[shard] = undefined;
    try {
      await store.close();
    } finally {
      this.drop(shard);
    }
  }

  private drop(shard: number): void {
    this.target.dropTenants?.((tenantId) => this.shardOf(tenantId) === shard);
  }

  private oneAtATime<T>(shard: number, task: () => Promise<T>): Promise<T> {
    const before = this.changing.get(shard) ?? Promise.resolve();
    const run = before.catch(() => {}).then(task);
    const settled = run.catch(() => {});
    this.changing.set(shard, settled);
    void settled.then(() => {
      if (this.changing.get(shard) === settled) this.changing.delete(shard);
    });
    return run;
  }
}

/**
 * One shard's view of the memories: it restores only its own tenants' changes (a change of
 * another shard's tenant in its files is refused, naming both), and snapshots only them.
 */
function shardTarget(target: ShardTarget, index: number, count: number, name: string, cache: Map<string, number>): StoreTarget {
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
    ...(target.graphs ? {
      *graphs() {
        for (const graph of target.graphs!()) if (mine(graph[0])) yield graph;
      },
    } : {}),
    ...(target.restoreGraph ? {
      restoreGraph(tenantId, graph) {
        if (!mine(tenantId)) throw new CorruptStoreError(`${name} holds a graph of a tenant of shard ${shardOf(tenantId, count)}`);
        target.restoreGraph!(tenantId, graph);
      },
    } : {}),
    ...(target.settleGraphs ? { settleGraphs: (tenantIds: readonly string[]) => target.settleGraphs!(tenantIds) } : {}),
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
