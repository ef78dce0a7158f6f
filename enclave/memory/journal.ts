import type { MemoryRecord } from './memory-service.js';

/** A change to the memory store: what the durable log records and replays. */
export type MemoryEvent =
  | { type: 'add'; record: MemoryRecord; vector: Float32Array }
  /** A new version of a stored memory (same id and tenant), replacing it where it stands. */
  | { type: 'update'; record: MemoryRecord; vector: Float32Array }
  | { type: 'delete'; tenant_id: string; id: string };

/**
 * A change as restored at start. An add whose vector came from another embedding model is
 * restored without it (`vector: null`): the record is kept and is re-embedded before use.
 */
export type RestoredEvent = MemoryEvent | { type: 'add'; record: MemoryRecord; vector: null } | { type: 'update'; record: MemoryRecord; vector: null };

/**
 * Where MemoryService makes its changes durable (enclave/storage/ implements it).
 * `commit` calls `apply` once the event is on disk, in log order, and resolves after it:
 * so a change is visible and acknowledged only once it would survive a crash, and what
 * the log holds is exactly what memory holds whenever no commit is in progress.
 */
export interface MemoryJournal {
  /**
   * Events that belong together (a batch) are written and synced together and applied
   * together: a failed write applies none of them (a crash during the write, before the
   * answer, may keep a prefix: the batch was never acknowledged).
   */
  commit(events: readonly MemoryEvent[], apply: () => void): Promise<void>;
}
