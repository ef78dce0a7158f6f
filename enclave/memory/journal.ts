import type { MemoryEvent } from './types.js';

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
