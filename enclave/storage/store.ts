import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../common/logger.js';
import type { MemoryEvent, MemoryJournal, RestoredEvent } from '../memory/journal.js';
import { describeModel, sameEmbeddingModel, type EmbeddingModelId } from '../memory/model-change.js';
import { CorruptStoreError, EmbeddingModelChangedError } from './errors.js';
import { fsyncDir } from './fs-utils.js';
import { GroupCommitLog, type CommitStats } from './group-commit.js';
import { logGeneration, logName, SealedLog, type LogFile } from './log-file.js';
import { decodePayload, encodeEvent, FORMAT_VERSION, READABLE_FORMATS, type FileMeta } from './payloads.js';
import { deriveStorageKey, readSealedFile, type StorageKey } from './sealed-file.js';
import { readSnapshot, SNAPSHOT_NAME, writeSnapshot, type SnapshotEntry } from './snapshot.js';

export interface StoreOptions {
  /** The store's own folder (the enclave uses DATA_DIR/memory). */
  dir: string;
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
  /** A write or sync failed: no further change can be made durable until a restart. */
  onFailure?: (err: Error) => void;
}

/** What the store restores into at open and snapshots from later (MemoryService). */
export interface StoreTarget {
  apply(event: RestoredEvent): void;
  entries(): Iterable<SnapshotEntry>;
}

export interface RecoveryReport {
  snapshotGeneration: number | null;
  logs: number;
  /** Events replayed from the snapshot and the logs. */
  events: number;
  /** A torn or corrupt log tail that was cut. */
  cutTail?: { file: string; offset: number; bytes: number };
  /** The files held vectors of another model; `memories` were re-embedded and the store rewritten. */
  modelChange?: { from: EmbeddingModelId; to: EmbeddingModelId; memories: number };
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
 */
export class DurableStore implements MemoryJournal {
  private readonly commits: GroupCommitLog;
  private snapshotting?: Promise<void>;
  private snapshots = 0;
  private closed = false;

  private constructor(
    private readonly options: StoreOptions,
    private readonly key: StorageKey,
    private readonly target: StoreTarget,
    file: LogFile,
    private lastSnapshotBytes: number,
    readonly recovery: RecoveryReport,
  ) {
    this.commits = new GroupCommitLog(file, {
      groupCommit: options.groupCommit ?? true,
      betweenBatches: () => this.maybeCompact(),
      onFailure: (err) => {
        options.log?.fatal({ err: err.message }, 'memory log write failed; no further writes are accepted');
        options.onFailure?.(err);
      },
    });
  }

  /** Opens the store, replaying the snapshot and logs into `target`; refuses damaged or altered files. */
  static async open(options: StoreOptions, target: StoreTarget): Promise<DurableStore> {
    const { dir, log } = options;
    const key = deriveStorageKey(options.sealingKey);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const names = await readdir(dir);
    // Left by a crash during a snapshot or log creation: never renamed, so never in use.
    for (const name of names.filter((n) => n.endsWith('.tmp'))) await rm(join(dir, name), { force: true });

    const events: MemoryEvent[] = [];
    const metas: Array<{ meta: FileMeta; where: string }> = [];
    let start = 1;
    let snapshotBytes = 0;
    const hasSnapshot = names.includes(SNAPSHOT_NAME);
    if (hasSnapshot) {
      const data = await readFile(join(dir, SNAPSHOT_NAME));
      const snapshot = readSnapshot(data, key, SNAPSHOT_NAME);
      checkMeta(snapshot.meta, 'snapshot', SNAPSHOT_NAME);
      metas.push({ meta: snapshot.meta, where: SNAPSHOT_NAME });
      start = snapshot.meta.generation;
      snapshotBytes = data.length;
      for (const event of snapshot.events) events.push(event);
    }

    const generations = names.map(logGeneration).filter((g): g is number => g !== undefined).sort((a, b) => a - b);
    const stale = generations.filter((g) => g < start);
    const live = generations.filter((g) => g >= start);
    if (hasSnapshot || live.length > 0) {
      live.forEach((g, i) => {
        if (g !== start + i) {
          throw new CorruptStoreError(`${logName(start + i)} is missing (${hasSnapshot ? `${SNAPSHOT_NAME} is followed by` : 'found'} ${live.map(logName).join(', ') || 'no log'})`);
        }
      });
      if (live.length === 0) throw new CorruptStoreError(`${logName(start)} is missing (${SNAPSHOT_NAME} is followed by no log)`);
    }

    let last: { generation: number; header: Buffer; frames: number; validEnd: number } | undefined;
    let cutTail: RecoveryReport['cutTail'];
    for (const generation of live) {
      const name = logName(generation);
      const isLast = generation === live[live.length - 1];
      const file = readSealedFile(await readFile(join(dir, name)), 'log', key, name, { allowTail: isLast });
      const [first, ...rest] = file.payloads.map((p, i) => decodePayload(p, `${name} frame ${i}`));
      if (first?.type !== 'header') throw new CorruptStoreError(`${name} has no log header`);
      checkMeta(first.meta, 'log', name);
      if (first.meta.generation !== generation) throw new CorruptStoreError(`${name} holds log ${first.meta.generation}: it was renamed or copied`);
      metas.push({ meta: first.meta, where: name });
      for (const p of rest) {
        if (p.type !== 'event') throw new CorruptStoreError(`${name} holds an entry that is not a change`);
        events.push(p.event);
      }
      if (file.tail) cutTail = { file: name, offset: file.tail.offset, bytes: file.tail.bytes };
      if (isLast) last = { generation, header: file.header, frames: file.payloads.length, validEnd: file.validEnd };
    }

    // Vectors from another model cannot be compared with new ones: such a store is restored
    // without its vectors, to be re-embedded, or refused. An empty one simply starts over.
    const changed = metas.find(({ meta }) => !sameEmbeddingModel(storedModel(meta), options.embedding));
    const modelChange = changed && { from: storedModel(changed.meta), to: options.embedding, memories: liveIds(events) };
    if (modelChange && modelChange.memories > 0 && !options.reembed) throw new EmbeddingModelChangedError(modelChange.from, modelChange.to, changed.where);
    for (const event of events) target.apply(modelChange && event.type === 'add' ? { ...event, vector: null } : event);
    const file = last
      ? await SealedLog.reopen(join(dir, logName(last.generation)), key, last.header, last.generation, last.frames, last.validEnd)
      : await SealedLog.create(join(dir, logName(start)), key, fileMeta(options, 'log', start));
    if (cutTail) log?.warn(cutTail, 'cut a torn or corrupt tail from the memory log (an interrupted append, or damage after the last good entry)');

    const store = new DurableStore(options, key, target, file, snapshotBytes, {
      snapshotGeneration: hasSnapshot ? start : null,
      logs: live.length,
      events: events.length,
      ...(cutTail ? { cutTail } : {}),
      ...(modelChange ? { modelChange } : {}),
    });
    // Logs a finished compaction had not yet deleted: the snapshot holds their changes.
    if (stale.length > 0) await store.deleteLogsBefore(start);
    if (modelChange) {
      try {
        await store.rewriteUnderNewModel(modelChange);
      } catch (err) {
        await store.close().catch(() => {});
        throw err;
      }
    }
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

  commit(events: readonly MemoryEvent[], apply: () => void): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the memory store is closed'));
    return this.commits.appendAll(events.map(encodeEvent), apply);
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
    await this.commits.exclusive(async () => {
      rotated = await this.rotate();
    });
    await rotated!.snapshot;
  }

  /** Waits for pending writes and any snapshot, then closes the log. */
  async close(): Promise<void> {
    this.closed = true;
    await this.commits.drain();
    await this.snapshotting;
    await this.commits.current.close();
  }

  private async maybeCompact(): Promise<void> {
    const { size } = this.commits.current;
    if (this.snapshotting || size < Math.max(this.options.snapshotLogBytes, this.lastSnapshotBytes)) return;
    try {
      await this.rotate();
    } catch (err) {
      // Not fatal: the current log stays in use, and the next batch tries again.
      this.options.log?.error({ err: (err as Error).message }, 'could not start a new memory log; compaction postponed');
    }
  }

  /** Only while no batch is in flight (between batches, or exclusive). The snapshot goes on in the background. */
  private async rotate(): Promise<{ snapshot: Promise<void> }> {
    await this.snapshotting;
    const generation = this.commits.current.generation + 1;
    const next = await SealedLog.create(join(this.options.dir, logName(generation)), this.key, fileMeta(this.options, 'log', generation));
    // With no batch in flight, memory holds exactly the changes of logs < generation.
    const entries = Array.from(this.target.entries());
    const previous = this.commits.current;
    this.commits.switchTo(next);
    await previous.close();
    const snapshot = this.snapshot(generation, entries);
    this.snapshotting = snapshot.catch(() => {}).finally(() => {
      this.snapshotting = undefined;
    });
    return { snapshot };
  }

  private async snapshot(generation: number, entries: SnapshotEntry[]): Promise<void> {
    const started = performance.now();
    try {
      this.lastSnapshotBytes = await writeSnapshot(join(this.options.dir, SNAPSHOT_NAME), this.key, fileMeta(this.options, 'snapshot', generation), entries);
      this.snapshots++;
      await this.deleteLogsBefore(generation);
      this.options.log?.info({ generation, memories: entries.length, bytes: this.lastSnapshotBytes, ms: Math.round(performance.now() - started) }, 'memory snapshot written; older logs deleted');
    } catch (err) {
      // The older logs are kept, so recovery still replays everything.
      this.options.log?.error({ err: (err as Error).message, generation }, 'memory snapshot failed; older logs kept');
      throw err;
    }
  }

  private async deleteLogsBefore(generation: number): Promise<void> {
    const names = await readdir(this.options.dir);
    for (const name of names) {
      const g = logGeneration(name);
      if (g !== undefined && g < generation) await rm(join(this.options.dir, name));
    }
    await fsyncDir(this.options.dir);
  }
}

function fileMeta(options: StoreOptions, kind: FileMeta['kind'], generation: number): FileMeta {
  return {
    format: FORMAT_VERSION,
    kind,
    generation,
    embedding_model: options.embedding.id,
    dimension: options.embedding.dimension,
    embedding_sha256: options.embedding.sha256,
    created_at: Math.floor(Date.now() / 1000),
  };
}

function checkMeta(meta: FileMeta, kind: FileMeta['kind'], where: string): void {
  if (!READABLE_FORMATS.includes(meta.format)) throw new CorruptStoreError(`${where} has format ${meta.format}; this enclave reads formats ${READABLE_FORMATS.join(', ')}`);
  if (meta.kind !== kind) throw new CorruptStoreError(`${where} is a ${meta.kind}, not a ${kind}`);
  if (!Number.isSafeInteger(meta.generation) || meta.generation < 1) throw new CorruptStoreError(`${where} has no valid generation`);
}

/** The model a file's vectors come from; format 1 did not record its hash, so it matches no model. */
function storedModel(meta: FileMeta): EmbeddingModelId {
  return { id: meta.embedding_model, dimension: meta.dimension, sha256: meta.embedding_sha256 ?? 'unrecorded' };
}

/** How many memories a run of events leaves. */
function liveIds(events: MemoryEvent[]): number {
  const ids = new Set<string>();
  for (const e of events) {
    if (e.type === 'add') ids.add(`${e.record.tenant_id}\0${e.record.id}`);
    else ids.delete(`${e.tenant_id}\0${e.id}`);
  }
  return ids.size;
}
