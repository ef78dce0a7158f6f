import { randomBytes } from 'node:crypto';
import { BlobConflictError, type BlobStore } from '../../common/blob-store.js';
import { sealedReplayed, unavailable } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { MemoryJournal } from '../memory/journal.js';
import type { EmbeddingModelId, MemoryEvent, ReplayMark, RestoredEvent } from '../memory/types.js';
import { describeModel, sameEmbeddingModel } from '../memory/model-change.js';
import { CorruptStoreError, EmbeddingModelChangedError, StaleOwnerError, SupersededError } from './errors.js';
import { GroupCommitLog, type CommitStats } from './group-commit.js';
import { logGeneration, logName, SealedLog, type LogFile } from './log-file.js';
import { decodePayload, encodeEvent, encodeReplayMarked, FORMAT_VERSION, isGeneration, READABLE_FORMATS, type FileMeta } from './payloads.js';
import { ReplayIds } from './replay-ids.js';
import { deriveStorageKey, readSealedLog, readSealedStream, type StorageKey } from './sealed-file.js';
import { readSnapshot, SNAPSHOT_NAME, writeSnapshot, type SealedEntry, type SnapshotEntry, type SnapshotReader, type SnapshotSealing, type SnapshotTombstone } from './snapshot.js';
import { TenantKeys } from './tenant-keys.js';
import { graphGeneration, graphName, readGraphs, writeGraphs, type TenantGraph } from './graph-file.js';
import type { SavedGraph } from '../vectors/hnsw-index.js';
import type { Ancestry } from '../../protocol/response-signature.js';
import { HeadChain } from './head-chain.js';
import { SHARD_MISS_HEADER } from '../../protocol/shards.js';
import { advanceHead, describeHead, genesisHead, sameHead, type StateHead } from './state-head.js';

/** The store's blobs in the host store: memory/snapshot.sealed, memory/log-….sealed. */
export const MEMORY_PREFIX = 'memory/';

export interface StoreOptions {
  /** Where the sealed blobs are kept: the host store. */
  blobs: BlobStore;
  /** The store's blob-name prefix (default MEMORY_PREFIX). */
  prefix?: string;
  /**
   * The id the store must have (a shard's, from the sealed shard map): a store found holding
   * another is refused, and a new one is made with it. Default: whatever is found, or a new one.
   */
  storeId?: string;
  /** How refusals name the store, e.g. "shard 3 (shard-03/)"; default: its prefix. */
  name?: string;
  /** The shard this store is (its index in the shard map): refusals name it to the host (SHARD_MISS_HEADER). */
  shard?: number;
  /**
   * This owner's generation (its fencing token; later handed out by etcd, #38): opening
   * writes it in a fence entry, and a store whose files name a higher one is refused
   * (StaleOwnerError), untouched. Equal is allowed (the same owner restarting). Default 0.
   */
  generation?: number;
  /**
   * Open as the newest owner whatever `generation` is: it is raised to the highest the files
   * name (OWNER_GENERATION unset, one enclave: a clock set back must not lock it out of its
   * own store). An old owner is still stopped by the conditional writes.
   */
  outrank?: boolean;
  /** 32 bytes from a SealingKeySource. */
  sealingKey: Uint8Array;
  /** The model whose vectors are stored (MemoryService.embeddingModel). */
  embedding: EmbeddingModelId;
  /**
   * Opens a store whose files hold vectors of another model: called once its memories are
   * restored without vectors, it must re-embed them all into the target with `embedding`;
   * the store is then rewritten under `embedding`. Without it such a store is refused
   * (EmbeddingModelChangedError), unless it holds no memories.
   */
  reembed?: () => Promise<void>;
  /** Snapshot and compact once the log is larger than this and than the last snapshot. */
  snapshotLogBytes: number;
  /** Default true; false writes and syncs one entry at a time (for comparison). */
  groupCommit?: boolean;
  log?: Logger;
  /** A batch could not be made durable (refused with 503; the next one tries again). */
  onFailure?: (err: Error) => void;
  /** Another writer has written the store since this one read it: every later change is refused (503). */
  onFenced?: (err: BlobConflictError | SupersededError) => void;
  /** A batch was made durable: its entries and the seconds its write and sync took. */
  onCommit?: (entries: number, seconds: number) => void;
  /**
   * The replay ids of sealed requests whose changes the store holds, still in their window:
   * handed over once, when it opens, before any of its tenants is served (the enclave's replay
   * guard learns them, so a recorded envelope sent again is refused at once).
   */
  onReplayIds?: (marks: readonly ReplayMark[]) => void;
  /**
   * Checks the store found before anything is written to it (no tail cut, no fence): throws to
   * refuse it (freshness across enclaves: a copy older than a member witnessed, enclave/cluster/freshness.ts).
   */
  acceptHead?: (found: { storeId: string; head: StateHead; ancestry(known: StateHead): Ancestry }) => void;
  /** Runs once each batch is durable, before it is applied and acknowledged (GroupCommitOptions.confirm). */
  confirm?: (storeId: string, head: StateHead) => Promise<void>;
}

/** What the store restores into at open and snapshots from later (MemoryService). */
export interface StoreTarget {
  apply(event: RestoredEvent): void;
  entries(): Iterable<SnapshotEntry>;
  /** Deleted memories' histories, without content, kept after the memories. */
  deletedHistories?(): Iterable<SnapshotTombstone>;
  /**
   * The tenants whose vector graphs a snapshot saves beside it (graph-file.ts), each with its
   * save; no change is made until every save has resolved (HnswIndex.save).
   */
  graphs?(): Iterable<[tenantId: string, save: () => Promise<SavedGraph>]>;
  /** At open, before the snapshot's memories: a tenant's saved graph, which they confirm (TieredIndex.restored); throws to refuse it. */
  restoreGraph?(tenantId: string, graph: SavedGraph): void;
  /** After the snapshot's memories: what restored graphs hold that the snapshot did not confirm goes; returns how many. */
  settleGraphs?(tenantIds: readonly string[]): number;
}

export interface RecoveryReport {
  snapshotGeneration: number | null;
  /** The state head recovered (after the last change replayed). */
  head: StateHead;
  logs: number;
  /** Events replayed from the snapshot and the logs. */
  events: number;
  /**
   * Changes that were logged but failed to apply (named by kind, memory id and place in the
   * log; never content): skipped so the enclave still starts. None is expected: everything
   * that can refuse a change is checked before it is logged.
   */
  skipped?: Array<{ change: MemoryEvent['type']; id: string; at: string; reason: string }>;
  /** A torn or corrupt log tail that was cut. */
  cutTail?: { file: string; offset: number; bytes: number };
  /** The files held vectors of another model; `memories` were re-embedded and the store rewritten. */
  modelChange?: { from: EmbeddingModelId; to: EmbeddingModelId; memories: number };
  /** Tenants whose vector graph was opened as saved with the snapshot, not rebuilt; and why a saved one was not used. */
  graphs?: { restored: number; refused?: string };
}

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
   * Opens the store, replaying the snapshot and log segments into `target`; refuses damaged,
   * altered, foreign or out-of-chain blobs with a named reason. The snapshot and the
   * segments are streamed, never held whole, and a segment is read no further than its
   * writer could have written (`max_bytes`): sizes the host lists are never trusted.
   */
  static async open(options: StoreOptions, target: StoreTarget): Promise<DurableStore> {
    // A refused open lets go of the snapshot's stream now, not when it is garbage collected.
    const reading: SnapshotReader[] = [];
    try {
      return await DurableStore.openReading(options, target, reading);
    } finally {
      for (const snapshot of reading) await snapshot.close();
    }
  }

  private static async openReading(options: StoreOptions, target: StoreTarget, reading: SnapshotReader[]): Promise<DurableStore> {
    const { blobs, log } = options;
    const prefix = options.prefix ?? MEMORY_PREFIX;
    const key = deriveStorageKey(options.sealingKey);
    const listed = await blobs.list(prefix);
    const names = listed.map((b) => b.name.slice(prefix.length));
    // The version the snapshot is replaced at: if another writer replaces it after this read, this store's next snapshot is refused.
    const snapshotVersion = listed.find((b) => b.name === prefix + SNAPSHOT_NAME)?.version;
    const chain = new ChainCheck(prefix);

    let start = 1;
    let snapshot: SnapshotReader | undefined;
    // Counted as the snapshot streams in: compaction is timed by what the enclave read, not
    // by the size the host lists (a host listing a huge size would postpone compaction for ever).
    const snapshotBytes = { read: 0 };
    const hasSnapshot = names.includes(SNAPSHOT_NAME);
    if (hasSnapshot) {
      const where = prefix + SNAPSHOT_NAME;
      const chunks = await blobs.read(where);
      if (!chunks) throw new CorruptStoreError(`${where} was listed by the host store but cannot be read`);
      snapshot = await readSnapshot(counted(chunks, snapshotBytes), key, where);
      reading.push(snapshot);
      checkMeta(snapshot.meta, 'snapshot', where);
      chain.file(snapshot.meta, where);
      chain.snapshotHeads(snapshot, where);
      start = snapshot.meta.generation;
    }

    const generations = names.map(logGeneration).filter((g): g is number => g !== undefined).sort((a, b) => a - b);
    const stale = generations.filter((g) => g < start);
    const live = generations.filter((g) => g >= start);
    if (hasSnapshot || live.length > 0) {
      live.forEach((g, i) => {
        if (g !== start + i) {
          throw new CorruptStoreError(`${prefix}${logName(start + i)} is missing (${hasSnapshot ? `${SNAPSHOT_NAME} is followed by` : 'found'} ${live.map(logName).join(', ') || 'no log'})`);
        }
      });
      if (live.length === 0) throw new CorruptStoreError(`${prefix}${logName(start)} is missing (${SNAPSHOT_NAME} is followed by no log)`);
    }

    // First the segments' headers only (their first frame): every file's model and store are
    // known before anything is applied. Then the snapshot is streamed in, and each segment is
    // read, chain-checked and applied in turn, never all of them held at once.
    const metas: Array<{ meta: FileMeta; where: string }> = snapshot ? [{ meta: snapshot.meta, where: prefix + SNAPSHOT_NAME }] : [];
    const segmentMetas: FileMeta[] = [];
    for (const generation of live) {
      const name = prefix + logName(generation);
      const meta = await readSegmentHeader(blobs, name, key);
      checkMeta(meta, 'log', name);
      if (meta.generation !== generation) throw new CorruptStoreError(`${name} holds log ${meta.generation}: it was renamed or copied`);
      chain.file(meta, name);
      metas.push({ meta, where: name });
      segmentMetas.push(meta);
    }
    // Checked before anything is applied: a shard's folder holding another shard's (or another service's) store.
    if (options.storeId !== undefined && chain.storeId !== undefined && chain.storeId !== options.storeId) {
      throw new CorruptStoreError(
        `${options.name ?? prefix} holds store ${chain.storeId}, but the shard map says it is store ${options.storeId} ` +
        '(its blobs were swapped with another shard\'s, or brought from elsewhere)',
      );
    }

    // Vectors from another model cannot be compared with new ones: such a store is restored
    // without its vectors, to be re-embedded, or refused. An empty one simply starts over.
    const changed = metas.find(({ meta }) => !sameEmbeddingModel(storedModel(meta), options.embedding));
    // The memories restored (tenant and id) when the model changed: how many to re-embed.
    const restoredIds = changed ? new Set<string>() : undefined;
    let events = 0;
    const skipped: NonNullable<RecoveryReport['skipped']> = [];
    // A keyed tenant's changes stay sealed until a call brings its key (tenant-keys.ts).
    const locks = new TenantKeys(options.embedding);
    const replays = new ReplayIds();
    const apply = (event: MemoryEvent | SealedEntry, at: string) => {
      events++;
      if (event.type === 'sealed') {
        locks.hold(event.tenant_id, event.payload);
        return;
      }
      try {
        target.apply(changed && (event.type === 'add' || event.type === 'update') ? { ...event, vector: null } : event);
      } catch (err) {
        // Damage (e.g. a change of another shard's tenant in a shard's files) refuses the store.
        if (err instanceof CorruptStoreError) throw err;
        // A change that cannot be applied must not stop every start after it (the enclave
        // would never come up, and nothing could be deleted): skipped, by name, never content.
        const id = event.type === 'delete' || event.type === 'tombstone' ? event.id : event.record.id;
        const reason = err instanceof Error ? `${err.name}: ${err.message}` : 'not an Error';
        skipped.push({ change: event.type, id, at, reason });
        log?.error({ change: event.type, id, at, reason }, 'a stored change failed to apply at recovery; skipped it and went on');
        return;
      }
      if (restoredIds) {
        if (event.type === 'delete') restoredIds.delete(`${event.tenant_id}\0${event.id}`);
        else if (event.type !== 'tombstone') restoredIds.add(`${event.record.tenant_id}\0${event.record.id}`);
      }
    };
    // The snapshot's vector graphs, opened before its memories, which confirm them (graph-file.ts).
    const graphs = snapshot && !changed && !chain.legacy && target.restoreGraph && names.includes(graphName(start))
      ? await restoreGraphs(blobs, prefix, key, snapshot.meta, target, log)
      : undefined;
    if (snapshot) {
      let record = 0;
      for await (const event of snapshot.events) {
        if (event.type === 'replays') event.marks.forEach((mark) => replays.add(mark));
        else apply(event, `${prefix}${SNAPSHOT_NAME} record ${record++}`);
      }
      if (graphs?.tenants.length) {
        const dropped = target.settleGraphs?.(graphs.tenants) ?? 0;
        if (dropped > 0) log?.info({ dropped }, 'restored vector graphs held memories the snapshot does not: removed them');
      }
    }

    let last: { generation: number; header: Buffer; frames: number; validEnd: number; size: number; maxBytes: number } | undefined;
    let cutTail: RecoveryReport['cutTail'];
    for (const [i, generation] of live.entries()) {
      const name = prefix + logName(generation);
      const isLast = i === live.length - 1;
      const chunks = await blobs.read(name);
      if (!chunks) throw new CorruptStoreError(`${name} was listed by the host store but cannot be read`);
      const maxBytes = segmentMetas[i].max_bytes ?? segmentLimit(options.snapshotLogBytes, snapshotBytes.read);
      const file = await readSealedLog(chunks, 'log', key, name, { allowTail: isLast, maxBytes }, (payload, f) => {
        const p = decodePayload(payload, `${name} frame ${f}`);
        if (f === 0) {
          if (p.type !== 'header' || JSON.stringify(p.meta) !== JSON.stringify(segmentMetas[i])) throw new CorruptStoreError(`${name} changed while it was being read`);
          chain.segment(p.meta, name, i === 0 && hasSnapshot ? snapshot!.meta : undefined);
          return;
        }
        // Where a writer took the log over: not a change, and no step of the chain of heads.
        if (p.type === 'fence') {
          chain.owner(p.generation, `${name} frame ${f}`);
          return;
        }
        if (p.type !== 'event' && p.type !== 'sealed') throw new CorruptStoreError(`${name} holds an entry that is not a change`);
        chain.advance(payload);
        if (p.replay) replays.add(p.replay);
        apply(p.type === 'event' ? p.event : p, `${name} frame ${f}`);
      });
      if (file.frames === 0) throw new CorruptStoreError(`${name} changed while it was being read`);
      if (file.tail) cutTail = { file: name, offset: file.tail.offset, bytes: file.tail.bytes };
      // The size the tail is cut from (a conditional truncate): a junk tail is read no further
      // than the segment's limit, so the host's listing is the better guess of where it ends.
      const listedSize = listed.find((b) => b.name === name)?.size ?? 0;
      const size = file.tail ? Math.max(file.validEnd + file.tail.bytes, listedSize) : file.validEnd;
      if (isLast) last = { generation, header: file.header, frames: file.frames, validEnd: file.validEnd, size, maxBytes };
    }
    const modelChange = changed && { from: storedModel(changed.meta), to: options.embedding, memories: restoredIds!.size };
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
    }, heads, snapshotVersion, locks, replays);
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

/**
 * The most bytes a log segment may hold. Compaction starts a new segment once one passes
 * max(SNAPSHOT_LOG_BYTES, the last snapshot's size), and the next snapshot is at most about
 * the last one plus that segment; four times that leaves room for writes made while a
 * snapshot is written, and for a snapshot that failed and was retried.
 */
export function segmentLimit(snapshotLogBytes: number, lastSnapshotBytes: number): number {
  return 4 * Math.max(snapshotLogBytes, lastSnapshotBytes) + 128 * 1024 * 1024;
}

function logMeta(options: StoreOptions, generation: number, storeId: string, lastSnapshotBytes: number): FileMeta {
  return { ...fileMeta(options, 'log', generation, storeId), max_bytes: segmentLimit(options.snapshotLogBytes, lastSnapshotBytes) };
}

/**
 * Opens the graphs saved with the snapshot into `target`, each tenant's alone: a graph that
 * does not open (seal, snapshot, format, settings) is refused, logged, and its tenant's index
 * rebuilt from the snapshot as if there were none.
 */
async function restoreGraphs(
  blobs: BlobStore, prefix: string, key: StorageKey, snapshot: FileMeta, target: StoreTarget, log?: Logger,
): Promise<NonNullable<RecoveryReport['graphs']> & { tenants: string[] }> {
  const where = prefix + graphName(snapshot.generation);
  let saved: TenantGraph[];
  try {
    const chunks = await blobs.read(where);
    if (!chunks) throw new CorruptStoreError(`${where} was listed by the host store but cannot be read`);
    saved = await readGraphs(chunks, key, where, { store_id: snapshot.store_id!, generation: snapshot.generation, head: snapshot.head! });
  } catch (err) {
    const refused = (err as Error).message;
    log?.warn({ file: where, err: refused }, 'the saved vector graphs were refused: rebuilding every index from the snapshot');
    return { restored: 0, refused, tenants: [] };
  }
  const tenants: string[] = [];
  let refused: string | undefined;
  for (const { tenantId, graph } of saved) {
    try {
      target.restoreGraph!(tenantId, graph);
      tenants.push(tenantId);
    } catch (err) {
      refused = (err as Error).message;
      log?.warn({ file: where, err: refused }, 'a saved vector graph was refused: rebuilding its index from the snapshot');
    }
  }
  return { restored: tenants.length, ...(refused ? { refused } : {}), tenants };
}

/** Counts the bytes that pass, into `into.read`. */
async function* counted(chunks: AsyncIterable<Buffer>, into: { read: number }): AsyncIterable<Buffer> {
  for await (const chunk of chunks) {
    into.read += chunk.length;
    yield chunk;
  }
}

/** A segment's metadata: its first frame, read without fetching the rest of it. */
async function readSegmentHeader(blobs: BlobStore, name: string, key: StorageKey): Promise<FileMeta> {
  const chunks = await blobs.read(name);
  if (!chunks) throw new CorruptStoreError(`${name} was listed by the host store but cannot be read`);
  const frames = readSealedStream(chunks, 'log', key, name);
  try {
    const first = await frames.next();
    const header = first.done ? undefined : decodePayload(first.value, `${name} frame 0`);
    if (header?.type !== 'header') throw new CorruptStoreError(`${name} has no log header`);
    return header.meta;
  } finally {
    await frames.return(undefined);
  }
}

function checkMeta(meta: FileMeta, kind: FileMeta['kind'], where: string): void {
  if (!READABLE_FORMATS.includes(meta.format)) throw new CorruptStoreError(`${where} has format ${meta.format}; this enclave reads formats ${READABLE_FORMATS.join(', ')}`);
  if (meta.kind !== kind) throw new CorruptStoreError(`${where} is a ${meta.kind}, not a ${kind}`);
  if (!Number.isSafeInteger(meta.generation) || meta.generation < 1) throw new CorruptStoreError(`${where} has no valid generation`);
  if (meta.max_bytes !== undefined && (!Number.isSafeInteger(meta.max_bytes) || meta.max_bytes < 1)) throw new CorruptStoreError(`${where} has no valid size limit`);
}

/** The model a file's vectors come from; format 1 did not record its hash, so it matches no model. */
function storedModel(meta: FileMeta): EmbeddingModelId {
  return { id: meta.embedding_model, dimension: meta.dimension, sha256: meta.embedding_sha256 ?? 'unrecorded' };
}

/**
 * Checks that the files form one chain: all from the same store, each segment starting at
 * the state head where its predecessor (or the snapshot it continues) ends. Files from
 * before format 3 carry no chain; a store holding them is accepted and rewritten.
 */
class ChainCheck {
  storeId?: string;
  /** The head after everything checked so far; undefined while it is unknown (legacy files). */
  head?: StateHead;
  /** Every head since the first one known, up to `head` (from the snapshot, then the segments). */
  heads?: HeadChain;
  legacy = false;
  /** The highest owner generation any file or fence names, and where (undefined: none does). */
  highestOwner?: { generation: number; where: string };
  private previous?: string;

  constructor(private readonly prefix: string) {}

  /** Any file: it must belong to this store. */
  file(meta: FileMeta, where: string): void {
    this.owner(meta.owner_generation, where);
    if (meta.format < 3) {
      this.legacy = true;
      return;
    }
    if (typeof meta.store_id !== 'string' || !meta.head) throw new CorruptStoreError(`${where} has no store id or state head`);
    this.storeId ??= meta.store_id;
    if (meta.store_id !== this.storeId) throw new CorruptStoreError(`${where} belongs to another store (store ${meta.store_id}; this store is ${this.storeId})`);
  }

  /** A snapshot's chain of heads (format 4), which must end at its head. */
  snapshotHeads(snapshot: SnapshotReader, where: string): void {
    const { meta, heads } = snapshot;
    if (meta.format < 4 || !meta.head) return;
    const chain = heads && HeadChain.fromPrefixes(heads.first, heads.pieces, meta.head);
    if (!chain) throw new CorruptStoreError(`${where} has no chain of heads ending at its state ${describeHead(meta.head)}`);
    this.heads = chain;
  }

  /** A log segment, in order: it must start where the previous one (or the snapshot) ended. */
  segment(meta: FileMeta, where: string, snapshot: FileMeta | undefined): void {
    const after = snapshot ? `${this.prefix}${SNAPSHOT_NAME}` : this.previous;
    this.previous = where;
    if (meta.format < 3) {
      this.head = undefined;
      this.heads = undefined;
      return;
    }
    const expected = snapshot ? snapshot.head : after === undefined ? genesisHead(this.storeId!) : this.head;
    if (expected && !sameHead(meta.head, expected)) {
      throw new CorruptStoreError(
        `${where} does not continue ${after ?? 'an empty store'}: it starts at state ${describeHead(meta.head)} but that ends at ${describeHead(expected)} ` +
        '(a segment was dropped, cut short, swapped, replaced by an older copy, or brought from elsewhere)',
      );
    }
    this.head = meta.head;
    // No snapshot chain (a new store's first segment, or a format 3 snapshot): it starts here.
    if (!this.heads || !sameHead(this.heads.head, meta.head!)) this.heads = meta.head ? HeadChain.startingAt(meta.head) : undefined;
  }

  /** An owner generation a file or a fence names. */
  owner(generation: number | undefined, where: string): void {
    if (generation === undefined) return;
    if (!isGeneration(generation)) throw new CorruptStoreError(`${where} names no valid owner generation`);
    if (!this.highestOwner || generation > this.highestOwner.generation) this.highestOwner = { generation, where };
  }

  advance(payload: Uint8Array): void {
    if (!this.head) return;
    this.head = advanceHead(this.head, payload);
    this.heads?.push(this.head);
  }
}
