import type { MemoryEvent, ReplayMark } from './types.js';

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
   * answer, may keep a prefix: the batch was never acknowledged). A batch whose events are
   * kept in several places (shards) may be applied in parts, each once it is durable
   * (`part`: those events, in order; undefined: all of them); a batch that fails may then have
   * had some parts applied.
   *
   * `replay`: the sealed request the events come in (one id for the whole batch), logged with
   * them. Refused (409 sealed_request_replayed), before anything is written, when a place the
   * events are kept already held it from an earlier owner: its change was applied there once.
   */
  commit(events: readonly MemoryEvent[], apply: (part?: readonly MemoryEvent[]) => void, replay?: ReplayMark): Promise<void>;
  /** Tenants sealed under keys their clients hold; absent: no tenant may have one. */
  readonly locks?: TenantLocks;
  /** Throws (503 shard_not_owned) when the tenant's memories are not kept here now (their shard is closed). */
  refuseIfNotHeld?(tenantId: string): void;
}

/**
 * Tenants whose memories are sealed under a key the client holds (storage/tenant-keys.ts):
 * every call for a tenant passes here with the tenant key its sealed request carried, if any.
 */
export interface TenantLocks {
  /**
   * Lets the call through, or refuses it (ApiError): a keyed tenant needs its key (423
   * without, 403 with another); a key sent for a tenant without one turns it on, if the
   * tenant holds no memories (409 if it does). A locked tenant (after a restart) opens with
   * the right key: its stored changes are handed to `apply`, in order, before this returns.
   */
  admit(tenantId: string, secret: Uint8Array | undefined, holdsMemories: boolean, apply: (event: MemoryEvent) => void): void;
  /** Whether the tenant's stored changes are held unopened (no call has brought its key since the start). */
  isLocked(tenantId: string): boolean;
}
