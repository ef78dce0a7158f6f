import { unavailable } from '../../common/errors.js';
import type { LogFile } from './log-file.js';
import type { StateHead } from './state-head.js';

export interface GroupCommitOptions {
  /**
   * true: every entry that arrives while a batch is being written and synced joins the
   * next batch, so one fsync covers many writes. false: one entry per write and fsync
   * (kept to measure the difference).
   */
  groupCommit: boolean;
  /** Runs after each batch, while no batch is in progress; may switchTo() a new file. Must not throw. */
  betweenBatches?: () => Promise<void>;
  /**
   * Whether betweenBatches has work to do now (e.g. a compaction is due). While it has none,
   * the next batch is sent before the last one's onDurable callbacks run. Without it,
   * betweenBatches (if given) runs after every batch, with nothing in flight.
   */
  betweenDue?: () => boolean;
  /** Called when a batch could not be made durable (it was refused with 503; later batches try again). */
  onFailure?: (err: Error) => void;
  /** What a failed batch's callers are refused with, if not 503 storage_unavailable (e.g. the store was taken over). */
  refusal?: (err: Error) => Error | undefined;
  /**
   * Runs once a batch is durable, with the head after it, before the batch is applied and
   * acknowledged (freshness across enclaves: other members witness the head). If it rejects,
   * the batch is still applied (it is in the log) but its callers are refused with its error.
   */
  confirm?: (head: StateHead) => Promise<void>;
  /** Called after each batch is durable, with its entries and how long its write and sync took (metrics). */
  onBatch?: (entries: number, seconds: number) => void;
}

export interface CommitStats {
  /** Entries made durable. */
  commits: number;
  /** Batches written, i.e. fsyncs of the log. */
  syncs: number;
  largestBatch: number;
}

/** A batch sent to the log: its entries, when it was sent, and the write in progress. */
interface Sent {
  batch: Pending[];
  started: number;
  written: Promise<void>;
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
 * queued as one batch (up to MAX_BATCH_BYTES), synced once, then runs each entry's
 * onDurable in order and resolves it. Batches are written one at a time, in order, but the
 * next one is sent before the last one's onDurable callbacks run (applying a batch to the
 * indexes takes the event loop milliseconds), so the host writes and syncs while the
 * enclave applies: an entry is still acknowledged only once its own batch is durable. A batch whose write fails (the host store is down,
 * its disk is full) is refused with 503 and not applied; the log stays usable, because the
 * next append first cuts whatever the failed one may have left (a conditional truncate, log-file.ts).
 */
export class GroupCommitLog {
  private queue: Pending[] = [];
  private tasks: Array<{ run: () => Promise<void>; resolve: () => void; reject: (err: Error) => void }> = [];
  private busy = false;
  private idle: Array<() => void> = [];
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
      let next: Sent | undefined;
      while (next || this.queue.length > 0 || this.tasks.length > 0) {
        if (!next) {
          for (const task of this.tasks.splice(0)) await task.run().then(task.resolve, task.reject);
          if (this.queue.length === 0) continue;
          next = this.send();
        }
        const sent = next;
        next = undefined;
        try {
          await sent.written;
        } catch (err) {
          this.fail(err as Error, sent.batch);
          continue;
        }
        this.stats.syncs++;
        const entries = sent.batch.reduce((n, p) => n + p.payloads.length, 0);
        this.stats.commits += entries;
        this.stats.largestBatch = Math.max(this.stats.largestBatch, entries);
        this.options.onBatch?.(entries, (performance.now() - sent.started) / 1000);
        // The next batch goes out before this one is applied, unless something must run
        // with nothing in flight (a task, or betweenBatches with work to do). Its write only
        // starts now that this one is durable, so the log keeps its order, and what a failed
        // batch may have left is still cut before the next one is written.
        // The head this batch made durable, taken before the next batch can move it.
        const head = this.options.confirm && this.file.head;
        const overlap = this.queue.length > 0 && this.tasks.length === 0 && !(this.options.betweenDue?.() ?? this.options.betweenBatches !== undefined);
        if (overlap) next = this.send();
        let unconfirmed: Error | undefined;
        if (head) {
          await this.options.confirm!(head).catch((err: Error) => {
            unconfirmed = err;
          });
        }
        for (const p of sent.batch) {
          try {
            p.onDurable();
            if (unconfirmed) p.reject(unconfirmed);
            else p.resolve();
          } catch (err) {
            p.reject(err as Error);
          }
        }
        if (!overlap) await this.options.betweenBatches?.();
      }
    } finally {
      // Synchronously after the last check of the queue: an append that finds busy
      // still true is always picked up by the loop above.
      this.busy = false;
      for (const resolve of this.idle.splice(0)) resolve();
    }
  }

  /** Takes the next batch from the queue and starts its write. */
  private send(): Sent {
    const batch = this.options.groupCommit ? this.queue.splice(0, batchLength(this.queue)) : this.queue.splice(0, 1);
    const started = performance.now();
    const written = this.file.append(batch.flatMap((p) => p.payloads));
    // Awaited by the loop once the batch before it is applied; no unhandled rejection meanwhile.
    written.catch(() => {});
    return { batch, started, written };
  }

  private fail(err: Error, batch: Pending[]): void {
    const refusal = this.options.refusal?.(err) ?? unavailable('memory storage is unavailable; the change was not saved', 'storage_unavailable');
    for (const p of batch) p.reject(refusal);
    this.options.onFailure?.(err);
  }
}

/** One message to the host store carries at most about this much. */
export const MAX_BATCH_BYTES = 32 * 1024 * 1024;

/** How many queued entries go in the next batch: all of them, up to MAX_BATCH_BYTES (at least one). */
function batchLength(queue: readonly Pending[]): number {
  let bytes = 0;
  for (let i = 0; i < queue.length; i++) {
    bytes += queue[i].payloads.reduce((n, p) => n + p.length, 0);
    if (bytes > MAX_BATCH_BYTES && i > 0) return i;
  }
  return queue.length;
}
