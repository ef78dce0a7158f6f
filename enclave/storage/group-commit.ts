import { unavailable, type ApiError } from '../../common/errors.js';
import type { LogFile } from './log-file.js';

export interface GroupCommitOptions {
  /**
   * true: every entry that arrives while a batch is being written and synced joins the
   * next batch, so one fsync covers many writes. false: one entry per write and fsync
   * (kept to measure the difference).
   */
  groupCommit: boolean;
  /** Runs after each batch, while no batch is in progress; may switchTo() a new file. Must not throw. */
  betweenBatches?: () => Promise<void>;
  /** Called once if a write or sync fails: the file's state is then unknown. */
  onFailure?: (err: Error) => void;
}

export interface CommitStats {
  /** Entries made durable. */
  commits: number;
  /** Batches written, i.e. fsyncs of the log. */
  syncs: number;
  largestBatch: number;
}

interface Pending {
  /** Entries that are written together, in one write and sync, and settle together. */
  payloads: Uint8Array[];
  onDurable: () => void;
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * The single writer of the log. Callers append and wait; the loop writes whatever has
 * queued as one batch, syncs once, then runs each entry's onDurable in order and
 * resolves it. After a failed write or sync nothing more is accepted: the kernel may have
 * dropped the unsynced pages, so only a restart (which re-reads the log) is safe.
 */
export class GroupCommitLog {
  private queue: Pending[] = [];
  private tasks: Array<{ run: () => Promise<void>; resolve: () => void; reject: (err: Error) => void }> = [];
  private busy = false;
  private idle: Array<() => void> = [];
  private failure?: ApiError;
  readonly stats: CommitStats = { commits: 0, syncs: 0, largestBatch: 0 };

  constructor(private file: LogFile, private readonly options: GroupCommitOptions) {}

  get current(): LogFile {
    return this.file;
  }

  /** Replaces the file appended to; only from betweenBatches, when nothing is in flight. */
  switchTo(file: LogFile): void {
    this.file = file;
  }

  append(payload: Uint8Array, onDurable: () => void): Promise<void> {
    return this.appendAll([payload], onDurable);
  }

  /**
   * Appends entries that belong together (a batch of memories): they go out in the same
   * write and sync, so a failure refuses all of them, and onDurable runs once for all.
   */
  appendAll(payloads: Uint8Array[], onDurable: () => void): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.queue.push({ payloads, onDurable, resolve, reject });
      if (!this.busy) void this.run();
    });
  }

  /**
   * Runs `task` between batches, with no write in flight and none starting until it ends
   * (e.g. switching to a new log while capturing the state it continues from).
   */
  exclusive(task: () => Promise<void>): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.tasks.push({ run: task, resolve, reject });
      if (!this.busy) void this.run();
    });
  }

  /** Resolves once every entry appended so far is settled. */
  drain(): Promise<void> {
    if (!this.busy) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  private async run(): Promise<void> {
    this.busy = true;
    try {
      while ((this.queue.length > 0 || this.tasks.length > 0) && !this.failure) {
        for (const task of this.tasks.splice(0)) await task.run().then(task.resolve, task.reject);
        if (this.queue.length === 0) continue;
        const batch = this.options.groupCommit ? this.queue.splice(0) : this.queue.splice(0, 1);
        try {
          await this.file.append(batch.flatMap((p) => p.payloads));
        } catch (err) {
          this.fail(err as Error, batch);
          break;
        }
        this.stats.syncs++;
        const entries = batch.reduce((n, p) => n + p.payloads.length, 0);
        this.stats.commits += entries;
        this.stats.largestBatch = Math.max(this.stats.largestBatch, entries);
        for (const p of batch) {
          try {
            p.onDurable();
            p.resolve();
          } catch (err) {
            p.reject(err as Error);
          }
        }
        await this.options.betweenBatches?.();
      }
    } finally {
      // Synchronously after the last check of the queue: an append that finds busy
      // still true is always picked up by the loop above.
      this.busy = false;
      for (const resolve of this.idle.splice(0)) resolve();
    }
  }

  private fail(err: Error, batch: Pending[]): void {
    this.failure = unavailable('memory storage failed; the change was not saved', 'storage_unavailable');
    for (const p of [...batch, ...this.queue.splice(0), ...this.tasks.splice(0)]) p.reject(this.failure);
    this.options.onFailure?.(err);
  }
}
