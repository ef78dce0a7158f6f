import { randomBytes } from 'node:crypto';
import { BlobConflictError } from '../../common/blob-store.js';
import { sealedReplayed, unavailable } from '../../common/errors.js';
import type { MemoryJournal } from '../memory/journal.js';
import type { MemoryEvent, ReplayMark } from '../memory/types.js';
import { describeModel } from '../memory/model-change.js';
import { EmbeddingModelChangedError, PreparedStateStale, StaleOwnerError, SupersededError } from './errors.js';
import { GroupCommitLog, type CommitStats } from './group-commit.js';
import { logGeneration, logName, SealedLog, type LogFile } from './log-file.js';
import { encodeEvent, encodeReplayMarked, FORMAT_VERSION, type FileMeta } from './payloads.js';
import { ReplayIds } from './replay-ids.js';
import type { StorageKey } from './sealed-file.js';
import { SNAPSHOT_NAME, writeSnapshot, type SnapshotEntry, type SnapshotReader, type SnapshotSealing, type SnapshotTombstone } from './snapshot.js';
import type { TenantKeys } from './tenant-keys.js';
import { graphGeneration, graphName, writeGraphs, type TenantGraph } from './graph-file.js';
import type { Ancestry } from '../../protocol/response-signature.js';
import { HeadChain } from './head-chain.js';
import { SHARD_MISS_HEADER } from '../../protocol/shards.js';
import { genesisHead, sameHead, type StateHead } from './state-head.js';
import { readStore, readTail, segmentLimit, storedModel, type StoreRead } from './store-read.js';
import type { RecoveryReport, StoreOptions, StoreTarget } from './store-types.js';

export type { RecoveryReport, StoreOptions, StoreTarget } from './store-types.js';
export { segmentLimit } from './store-read.js';

/** The store's blobs in the host store: memory/snapshot.sealed, memory/log-….sealed. */
export const MEMORY_PREFIX = 'memory/';


export interface StoreStats extends CommitStats {
  generation: number;
  logBytes: number;
  snapshots: number;
  lastSnapshotBytes: number;
}

/**
 * The enclave's durable memory: a sealed append-only log with group commit, periodic
 * sealed snapshots that let old logs be deleted, and recovery from both at start.
 *
 * Files, in `dir`:
 *   snapshot.sealed        state as of the start of log `generation` (absent until the first one)
 *   log-<generation>.sealed changes since; during a compaction two logs can exist
 *
 * Snapshot g holds every change of logs < g. Log g+1 is created (durably) before snapshot
 * g+1 is written, and logs < g+1 are deleted only after it is durable, so a crash at any
 * point leaves a snapshot followed by a consecutive run of logs.
 *
 * Every file records the embedding model of its vectors. After a model change the store is
 * rewritten the same way, by a compaction under the new model; until that finishes some
 * file still names the old model, so a crash part-way makes the next start re-embed again.
 *
 * One writer at a time: every write is conditional (appends at the segment's end, a new
 * segment only if absent, the snapshot only at the version this store last saw), and opening
 * fences the last segment. A store that finds another writer has been there (an enclave
 * that opened the same store after it) refuses every later change rather than acknowledge
 * one it could not store.
 */
export class DurableStore implements MemoryJournal {
  private readonly commits: GroupCommitLog;
  private snapshotting?: Promise<void>;
  private snapshots = 0;
  private closed = false;
  /** Set once a conditional write failed, or a confirmation named a newer owner: another writer owns the store now. */
  private fenced?: BlobConflictError | SupersededError;
  /** Replay ids this store logged since it opened (its enclave's replay guard admitted them: a request may log several changes). */
  private readonly replaysSince = new ReplayIds();

  private constructor(
    private readonly options: StoreOptions,
    private readonly prefix: string,
    /** Random, chosen when the store was created; every file of the store records it. */
    readonly storeId: string,
    private readonly key: StorageKey,
    private readonly target: StoreTarget,
    file: LogFile,
    private lastSnapshotBytes: number,
    readonly recovery: RecoveryReport,
    /** Every head made durable since `heads.baseSeq` (the store's creation, unless it predates format 4). */
    private readonly heads: HeadChain,
    /** The snapshot's version as this store last saw or wrote it; undefined: there is none. */
    private snapshotVersion: string | undefined,
    /** Tenants sealed under keys their clients hold: how their changes are written, and those held locked. */
    readonly locks: TenantKeys,
    /** Replay ids the files held when it opened: logged by an earlier owner (another enclave, or this one before a restart). */
    private readonly replaysBefore: ReplayIds,
  ) {
    this.commits = new GroupCommitLog(file, {
      groupCommit: options.groupCommit ?? true,
      betweenBatches: () => this.maybeCompact(),
      betweenDue: () => this.compactionDue(),
      onBatch: options.onCommit,
      // A confirmation refused by a newer owner's generation: this store stops for good, as when fenced.
      ...(options.confirm ? { confirm: (head: StateHead) => options.confirm!(storeId, head).catch((err: unknown) => { throw this.fence(err) ? this.takenOverError() : err; }) } : {}),
      refusal: (err) => (err instanceof BlobConflictError ? this.takenOverError() : undefined),
      onFailure: (err) => {
        if (this.fence(err)) return;
        options.log?.error({ err: err.message }, 'memory log write failed; the change was refused (503) and later writes try again');
        options.onFailure?.(err);
      },
    });
  }

  /**
   * Opens the store, replaying the snapshot and log segments into `target` (store-read.ts:
   * damaged, altered, foreign or out-of-chain blobs are refused with a named reason), then
   * writes as its owner: the torn tail cut, a fence with its generation.
   */
  static async open(options: StoreOptions, target: StoreTarget): Promise<DurableStore> {
    return DurableStore.finishOpen(options, target, await DurableStore.readAll(options, target));
  }

  /**
   * Reads the store into `target` as open() does, up to the log's end now, and writes nothing
   * (no tail cut, no fence, no generation): its owner may still be writing it (a planned move,
   * docs/cluster.md). resume() later applies only what was written since, and opens it. A store
   * that open() would rewrite (another embedding model, files from before the chain of heads)
   * is not read ahead (PreparedStateStale). What was applied to `target` is the caller's to drop
   * when it is never resumed, or the read fails.
   */
  static async prepare(options: StoreOptions, target: StoreTarget): Promise<PreparedStore> {
    const read = await DurableStore.readAll(options, target, true);
    if (read.changed || read.chain.legacy) {
      throw new PreparedStateStale(`${options.name ?? read.prefix} is rewritten when it opens (another embedding model, or files from before the chain of heads): it is not read ahead`);
    }
    return new PreparedStore(read);
  }

  /**
   * Opens a store read ahead by prepare(): applies only the log written since (store-read.ts
   * readTail, which first checks the files still continue what was read), then does exactly
   * what open() does after its read: the owner generation checked against every file and fence,
   * `acceptHead` on the head reached, the tail cut, the fence written. PreparedStateStale when
   * the files no longer continue the read: nothing more was applied, nothing written, and the
   * caller opens the store in full instead. A prepared store is resumed once.
   */
  static async resume(prepared: PreparedStore, options: StoreOptions, target: StoreTarget): Promise<DurableStore> {
    return DurableStore.finishOpen(options, target, await DurableStore.readOn(prepared, options));
  }

  /**
   * Reads a store read ahead by prepare() on to the log's end now, as resume() does, and writes
   * nothing: a standby's refresh costs what the owner wrote since, not the whole store. Same
   * refusals as resume() (PreparedStateStale, CorruptStoreError: the caller drops what was
   * applied and reads the store in full). `prepared` is used up; the store returned continues it.
   */
  static async refresh(prepared: PreparedStore, options: StoreOptions): Promise<PreparedStore> {
    return new PreparedStore(await DurableStore.readOn(prepared, options));
  }

  /** A read ahead, continued to the log's end now (store-read.ts readTail), if it is of this store. */
  private static async readOn(prepared: PreparedStore, options: StoreOptions): Promise<StoreRead> {
    const read = prepared.take();
    if ((options.prefix ?? MEMORY_PREFIX) !== read.prefix || (options.storeId !== undefined && read.chain.storeId !== options.storeId)) {
      throw new PreparedStateStale(`${options.name ?? read.prefix} was read ahead as another store`);
    }
    await readTail(options, read);
    return read;
  }

  /** A read, letting go of the snapshot's stream when it ends, refused or not (not when it is garbage collected). */
  private static async readAll(options: StoreOptions, target: StoreTarget, ahead = false): Promise<StoreRead> {
    const reading: SnapshotReader[] = [];
    try {
      return await readStore(options, target, reading, ahead);
    } finally {
      for (const snapshot of reading) await snapshot.close();
    }
  }

  /** After the read: refuses an owner older than the store's last, checks the head (acceptHead), then cuts the tail and fences the log. */
  private static async finishOpen(options: StoreOptions, target: StoreTarget, read: StoreRead): Promise<DurableStore> {
    const { blobs, log } = options;
    const { prefix, key, chain, locks, replays, last, cutTail, snapshotBytes, start, hasSnapshot, live, stale, graphs, changed, progress: { events, skipped } } = read;
    const modelChange = changed && { from: storedModel(changed.meta), to: options.embedding, memories: read.restoredIds!.size };
    if (modelChange && modelChange.memories > 0 && !options.reembed) throw new EmbeddingModelChangedError(modelChange.from, modelChange.to, changed.where);

    // Before anything is written (no tail cut, no fence): an owner older than the store's last one leaves it as it is.
    let generation = options.generation ?? 0;
    if (chain.highestOwner && generation < chain.highestOwner.generation) {
      if (!options.outrank) throw new StaleOwnerError(options.name ?? prefix, generation, chain.highestOwner.generation, chain.highestOwner.where);
      generation = chain.highestOwner.generation;
    }
    options = { ...options, generation };
    const storeId = chain.storeId ?? options.storeId ?? randomBytes(16).toString('hex');
    locks.storeId = storeId;
    const head = chain.head ?? genesisHead(storeId);
    // Legacy files carry no chain: it starts at the head they are rewritten from.
    const heads = chain.heads && sameHead(chain.heads.head, head) ? chain.heads : HeadChain.startingAt(head);
    options.acceptHead?.({ storeId, head, ancestry: (known) => heads.ancestry(known) });
    const file = last
      ? await SealedLog.reopen(blobs, prefix + logName(last.generation), key, { ...last, head, owner: generation }, heads)
      : await SealedLog.create(blobs, prefix + logName(start), key, { ...logMeta(options, start, storeId, snapshotBytes.read), head }, heads);
    if (cutTail) log?.warn(cutTail, 'cut a torn or corrupt tail from the memory log (an interrupted append, or damage after the last good entry)');

    const store = new DurableStore(options, prefix, storeId, key, target, file, snapshotBytes.read, {
      snapshotGeneration: hasSnapshot ? start : null,
      logs: live.length,
      events,
      head,
      ...(skipped.length > 0 ? { skipped } : {}),
      ...(cutTail ? { cutTail } : {}),
      ...(modelChange ? { modelChange } : {}),
      ...(graphs ? { graphs: { restored: graphs.restored, ...(graphs.refused ? { refused: graphs.refused } : {}) } } : {}),
      ...(read.readAhead ? { readAhead: read.readAhead } : {}),
    }, heads, read.snapshotVersion, locks, replays);
    // Segments a finished compaction had not yet deleted: the snapshot holds their changes.
    if (stale.length > 0) await store.deleteLogsBefore(start);
    try {
      if (modelChange) await store.rewriteUnderNewModel(modelChange);
      // Files from before the chain: rewritten at once, so every file from now on is chained.
      else if (chain.legacy) {
        log?.info({ format: FORMAT_VERSION }, 'rewriting the memory store in the current format');
        await store.compact();
      }
    } catch (err) {
      await store.close().catch(() => {});
      throw err;
    }
    if (replays.size > 0) options.onReplayIds?.([...replays.live()]);
    return store;
  }

  /** Re-embeds what open() restored without vectors, then replaces every file by ones under the current model. */
  private async rewriteUnderNewModel({ from, to, memories }: NonNullable<RecoveryReport['modelChange']>): Promise<void> {
    const { log } = this.options;
    const models = { from: describeModel(from), to: describeModel(to) };
    if (memories === 0) {
      log?.info(models, 'the store holds no memories: starting it over under the new embedding model');
    } else {
      log?.info({ ...models, memories }, 'embedding model changed: re-embedding every stored memory');
      await this.options.reembed!();
    }
    // A new log and a snapshot under the new model; only then are the old files deleted.
    await this.compact();
    log?.info({ model: to.id, memories }, 'memory store rewritten under the new embedding model');
  }

  /**
   * `replay`: the sealed request the events come in. Refused (409) if the store held its id
   * when it opened: an enclave whose replay guard never saw the request (the shard moved, or it
   * restarted) would otherwise apply it again. Logged with the first event, in the same entry,
   * so the id is durable exactly when a change of the batch is.
   */
  commit(events: readonly MemoryEvent[], apply: (part?: readonly MemoryEvent[]) => void, replay?: ReplayMark): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the memory store is closed'));
    if (this.fenced) return Promise.reject(this.takenOverError());
    const payloads: Uint8Array[] = events.map((event) => this.locks.encode(event));
    if (replay) {
      try {
        this.refuseIfReplayed(replay);
      } catch (err) {
        return Promise.reject(err as Error);
      }
      this.replaysSince.add(replay);
      if (payloads.length > 0) payloads[0] = encodeReplayMarked(replay, payloads[0]);
    }
    return this.commits.appendAll(payloads, () => apply(events));
  }

  /** Throws 409 sealed_request_replayed when the store held the request's replay id when it opened (commit). */
  refuseIfReplayed(replay: ReplayMark): void {
    if (this.replaysBefore.has(replay.id)) throw sealedReplayed();
  }

  /** The replay ids the store keeps now, those of earlier owners and its own, each until its window ends. */
  liveReplayIds(): ReplayMark[] {
    const marks = new Map<string, ReplayMark>();
    for (const ids of [this.replaysBefore, this.replaysSince]) for (const mark of ids.live()) marks.set(mark.id, mark);
    return [...marks.values()];
  }

  /** The state head after the last durable change (what signed responses carry). */
  get head(): StateHead {
    return this.commits.current.head;
  }

  /**
   * Whether `known` is this store's head or an ancestor of it (x-tee-ancestor), in O(1):
   * `unknown` only for heads before the oldest one kept (a store that predates format 4).
   */
  ancestry(known: StateHead): Ancestry {
    return this.heads.ancestry(known);
  }

  /** Heads kept and the memory they take (metrics, tests). */
  headChain(): { from: number; heads: number; bytes: number } {
    return { from: this.heads.baseSeq, heads: this.heads.length, bytes: this.heads.bytes };
  }

  stats(): StoreStats {
    return {
      ...this.commits.stats,
      generation: this.commits.current.generation,
      logBytes: this.commits.current.size,
      snapshots: this.snapshots,
      lastSnapshotBytes: this.lastSnapshotBytes,
    };
  }

  /**
   * Starts a new log, snapshots the state it continues from, and deletes the older logs.
   * Rejects if the snapshot fails (the older logs are then kept, and recovery still works).
   */
  async compact(): Promise<void> {
    let rotated: { snapshot: Promise<void> } | undefined;
    try {
      await this.commits.exclusive(async () => {
        rotated = await this.rotate();
      });
      await rotated!.snapshot;
    } catch (err) {
      this.fence(err);
      throw err;
    }
  }

  /** Waits for pending writes and any snapshot, then closes the log. */
  async close(): Promise<void> {
    this.closed = true;
    await this.commits.drain();
    await this.snapshotting;
    await this.commits.current.close();
  }

  /** This owner's generation (raised at open to the last owner's when `outrank`). */
  get ownerGeneration(): number {
    return this.options.generation ?? 0;
  }

  /** Whether the store was taken over by another writer (and is from now on). */
  get takenOver(): boolean {
    return this.fenced !== undefined;
  }

  /** Throws 503 shard_not_owned once the store was taken over. */
  refuseIfTakenOver(): void {
    if (this.fenced) throw this.takenOverError();
  }

  /** How refusals and log lines name this store (a DurableStore opened alone has no name and may have no prefix). */
  private get storeName(): string {
    return this.options.name ?? (this.prefix || 'the memory store');
  }

  private takenOverError(): Error {
    const refusal = this.fenced instanceof SupersededError
      ? superseded(this.storeName, this.fenced)
      : takenOver(this.storeName, this.options.generation ?? 0);
    return this.options.shard === undefined ? refusal : refusal.withHeaders({ [SHARD_MISS_HEADER]: String(this.options.shard) });
  }

  /** A failed write: if a condition failed (or a newer owner was named), this store stops writing for good. */
  private fence(err: unknown): boolean {
    if (!(err instanceof BlobConflictError || err instanceof SupersededError)) return false;
    if (!this.fenced) {
      this.fenced = err;
      const why = err instanceof SupersededError ? 'a member of the service has seen a newer owner of the memory store' : 'another writer has written the memory store since this enclave opened it';
      this.options.log?.error({ store: this.storeName, generation: this.options.generation ?? 0, err: err.message }, `${why}: this enclave no longer owns it and refuses every change to it from now on (503 shard_not_owned)`);
      this.options.onFenced?.(err);
    }
    return true;
  }

  /** Whether the log has grown enough for a new segment and snapshot, and one can start. */
  private compactionDue(): boolean {
    const { size } = this.commits.current;
    return !this.fenced && !this.snapshotting && size >= Math.max(this.options.snapshotLogBytes, this.lastSnapshotBytes);
  }

  private async maybeCompact(): Promise<void> {
    if (!this.compactionDue()) return;
    try {
      await this.rotate();
    } catch (err) {
      if (this.fence(err)) return;
      // Not fatal: the current log stays in use, and the next batch tries again.
      this.options.log?.error({ err: (err as Error).message }, 'could not start a new memory log; compaction postponed');
    }
  }

  /** Only while no batch is in flight (between batches, or exclusive). The snapshot goes on in the background. */
  private async rotate(): Promise<{ snapshot: Promise<void> }> {
    await this.snapshotting;
    // No new segment while another writer appends to this one (its changes would be left behind it).
    await this.commits.current.confirm();
    const generation = this.commits.current.generation + 1;
    // With no batch in flight, the current segment's head is the state the snapshot captures.
    const head = this.commits.current.head;
    const next = await SealedLog.create(this.options.blobs, this.prefix + logName(generation), this.key, { ...logMeta(this.options, generation, this.storeId, this.lastSnapshotBytes), head }, this.heads);
    // With no batch in flight, memory holds exactly the changes of logs < generation. The
    // snapshot reads it as it goes, not as a copy: changes made meanwhile (which log
    // `generation` holds too) may or may not be in it, and replaying that log after the
    // snapshot gives the same state either way, since applying a change twice is harmless.
    // Tenants locked now are written as their held entries only: one that opens meanwhile has
    // its memories in neither the target's entries (skipped) nor twice, and its later changes are in log `generation`.
    const locked = this.locks.lockedEntries();
    const entries = filter(this.target.entries(), (entry) => !locked.has(entry.record.tenant_id));
    // What memory holds of a locked tenant's deleted memories was logged before it had a key, in
    // the clear: taken now, before it can open, and written as it was (its keyed ones are in `held`).
    const beforeKey = new Set(locked.size === 0 ? [] : filter(this.target.deletedHistories?.() ?? [], (tombstone) => locked.has(tombstone.tenant_id)));
    const deleted = concat(filter(this.target.deletedHistories?.() ?? [], (tombstone) => !locked.has(tombstone.tenant_id)), beforeKey);
    const held = [...locked.values()].flat();
    // The ids of the changes the snapshot folds in (the log's marks): the next owner refuses their requests too.
    const replays = this.liveReplayIds();
    const graphs = await this.saveGraphs();
    const previous = this.commits.current;
    this.commits.switchTo(next);
    await previous.close();
    const encode = (event: MemoryEvent) => (event.type === 'tombstone' && beforeKey.has(event) ? encodeEvent(event) : this.locks.encode(event));
    const snapshot = this.snapshot(generation, head, entries, deleted, { encode, held }, previous, replays, graphs);
    this.snapshotting = snapshot.catch(() => {}).finally(() => {
      this.snapshotting = undefined;
    });
    return { snapshot };
  }

  private async snapshot(
    generation: number, head: StateHead, entries: Iterable<SnapshotEntry>, deleted: Iterable<SnapshotTombstone>, sealing: SnapshotSealing, previous: LogFile,
    replays: readonly ReplayMark[], graphs: readonly TenantGraph[],
  ): Promise<void> {
    const started = performance.now();
    try {
      const meta = { ...fileMeta(this.options, 'snapshot', generation, this.storeId), head };
      // The chain of heads up to the snapshot's: a restarted enclave still places any head a client saw.
      const heads = { first: this.heads.baseSeq, pieces: this.heads.prefixes(head.seq) };
      const replaces = this.snapshotVersion === undefined ? { ifAbsent: true } : { ifVersion: this.snapshotVersion };
      const written = await writeSnapshot(this.options.blobs, this.prefix + SNAPSHOT_NAME, this.key, meta, entries, heads, deleted, replaces, sealing, replays);
      this.snapshotVersion = written.version;
      this.lastSnapshotBytes = written.bytes;
      this.snapshots++;
      if (graphs.length > 0) await this.writeGraphs(generation, head, graphs);
      // The older segments go only if none was written by another writer since (the snapshot does not hold its changes).
      await previous.confirm();
      await previous.close();
      await this.deleteLogsBefore(generation);
      this.options.log?.info({ generation, memories: written.count, bytes: this.lastSnapshotBytes, ms: Math.round(performance.now() - started) }, 'memory snapshot written; older logs deleted');
    } catch (err) {
      if (this.fence(err)) throw err;
      // The older logs are kept, so recovery still replays everything.
      this.options.log?.error({ err: (err as Error).message, generation }, 'memory snapshot failed; older logs kept');
      throw err;
    }
  }

  /** Deletes the log segments, and the graphs of snapshots, older than `generation`. */
  private async deleteLogsBefore(generation: number): Promise<void> {
    for (const { name } of await this.options.blobs.list(this.prefix)) {
      const file = name.slice(this.prefix.length);
      const g = logGeneration(file) ?? graphGeneration(file);
      if (g !== undefined && g < generation) await this.options.blobs.delete(name);
    }
  }

  /**
   * The vector graphs of the tenants large enough to have one, saved now, with no batch in
   * flight: what memory holds at the snapshot's head. A tenant sealed under a key its client
   * holds has none saved: the graph holds its vectors, and would be sealed under the enclave's
   * key only. A failure costs only the shortcut (the next open rebuilds).
   */
  private async saveGraphs(): Promise<TenantGraph[]> {
    const graphs: TenantGraph[] = [];
    try {
      for (const [tenantId, save] of this.target.graphs?.() ?? []) {
        if (this.locks.isKeyed(tenantId)) continue;
        graphs.push({ tenantId, graph: await save() });
      }
    } catch (err) {
      this.options.log?.warn({ err: (err as Error).message }, 'could not save the vector graphs: this snapshot goes without them (the next open rebuilds them)');
      return [];
    }
    return graphs;
  }

  /** After the snapshot: its graphs beside it, named with its generation. */
  private async writeGraphs(generation: number, head: StateHead, graphs: readonly TenantGraph[]): Promise<void> {
    const started = performance.now();
    try {
      const bytes = await writeGraphs(this.options.blobs, this.prefix + graphName(generation), this.key, { store_id: this.storeId, generation, head }, graphs);
      this.options.log?.info({ generation, tenants: graphs.length, bytes, ms: Math.round(performance.now() - started) }, 'vector graphs saved with the snapshot');
    } catch (err) {
      this.options.log?.warn({ generation, err: (err as Error).message }, 'could not store the vector graphs: the next open rebuilds them');
    }
  }
}

function* filter<T>(items: Iterable<T>, keep: (item: T) => boolean): Generator<T> {
  for (const item of items) if (keep(item)) yield item;
}

function* concat<T>(...lists: Array<Iterable<T>>): Generator<T> {
  for (const list of lists) yield* list;
}

/** What every change is refused with once another owner took the store over: the proxy (#38 item 2) re-routes on the code. */
const takenOver = (store: string, generation: number) =>
  unavailable(`${store} is no longer owned by this enclave (owner generation ${generation}): another owner has written it since; the change was not saved`, 'shard_not_owned');

/** Every change once a member of the service named a newer owner generation (SupersededError): the one in flight is in this copy, not acknowledged. */
const superseded = (store: string, err: SupersededError) =>
  unavailable(`${store} is no longer owned by this enclave (owner generation ${err.generation}): ${err.message}; the change was not acknowledged`, 'shard_not_owned');

function fileMeta(options: StoreOptions, kind: FileMeta['kind'], generation: number, storeId: string): FileMeta {
  return {
    store_id: storeId,
    format: FORMAT_VERSION,
    kind,
    generation,
    embedding_model: options.embedding.id,
    dimension: options.embedding.dimension,
    embedding_sha256: options.embedding.sha256,
    created_at: Math.floor(Date.now() / 1000),
    owner_generation: options.generation ?? 0,
  };
}

function logMeta(options: StoreOptions, generation: number, storeId: string, lastSnapshotBytes: number): FileMeta {
  return { ...fileMeta(options, 'log', generation, storeId), max_bytes: segmentLimit(options.snapshotLogBytes, lastSnapshotBytes) };
}

/** A store read ahead by DurableStore.prepare, not yet served: resumed once (DurableStore.resume), or dropped. */
export class PreparedStore {
  private used = false;

  /** Set when this read continued an earlier one (a refresh): the head that one had reached. */
  readonly readOnFrom?: { seq: number };

  constructor(private readonly read: StoreRead) {
    if (read.readAhead) this.readOnFrom = { ...read.readAhead };
  }

  /** The head the read reached (the genesis of an empty store). */
  get head(): StateHead {
    return this.read.end?.head ?? this.read.chain.head ?? genesisHead(this.read.chain.storeId ?? '');
  }

  take(): StoreRead {
    if (this.used) throw new PreparedStateStale('a store read ahead is resumed once');
    this.used = true;
    return this.read;
  }
}
