import type { BlobConflictError, BlobStore } from '../../common/blob-store.js';
import type { Logger } from '../../common/logger.js';
import type { Ancestry } from '../../protocol/response-signature.js';
import type { EmbeddingModelId, MemoryEvent, ReplayMark, RestoredEvent } from '../memory/types.js';
import type { SavedGraph } from '../vectors/hnsw-index.js';
import type { SupersededError } from './errors.js';
import type { SnapshotEntry, SnapshotTombstone } from './snapshot.js';
import type { StateHead } from './state-head.js';

/** What the durable store (store.ts) is opened with, restores into, and reports: shared by its open and its reading (store-read.ts). */

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
  /** Opened from a read made ahead (DurableStore.prepare) up to this head: only the log after it was read at the open. */
  readAhead?: { seq: number };
}
