import { storedBytes } from './admission.js';
import type { ChangeInfo, MemoryRecord, MemoryVersion } from './types.js';

/** How much history the enclave keeps (MEMORY_HISTORY_VERSIONS, MEMORY_HISTORY_DELETED). */
export interface HistoryLimits {
  /** Versions kept per memory, the current one included; the oldest go first. */
  maxVersions: number;
  /** Deleted memories whose history (without content) one tenant keeps; the oldest deletions go first. */
  maxDeleted: number;
}

export const DEFAULT_HISTORY_LIMITS: HistoryLimits = { maxVersions: 20, maxDeleted: 1000 };

/** What one version of a deleted memory costs against MAX_STORED_BYTES: its times, key id and event, no content. */
export const DELETED_VERSION_BYTES = 64;

/** The change info of a change logged before history was kept: its time from the record, no key. */
const legacy = (record: MemoryRecord | undefined): ChangeInfo => ({ at: record ? record.updated_at ?? record.created_at : 0, key_id: null, extracted: false });

const versionBytes = (version: MemoryVersion): number => (version.record ? storedBytes(version.record.content, version.record.metadata) : DELETED_VERSION_BYTES);

interface Entry {
  versions: MemoryVersion[];
  deleted: boolean;
}

/**
 * Every memory's versions, oldest first: each add and update keeps the record as it left it
 * (all its fields, copied whole, so fields added to records later are kept too); a delete
 * strips the content from every version and adds one saying when and by whom. Bounded per
 * memory and, for deleted memories, per tenant (HistoryLimits). Past versions count against
 * MAX_STORED_BYTES like memories (the current one is the memory itself, counted once): every
 * change returns what it added to the bytes held, for the service's usage.
 *
 * Applying a change twice is harmless (a snapshot and the log after it may repeat one): a
 * version already kept is not added again.
 */
export class MemoryHistories {
  private readonly tenants = new Map<string, Map<string, Entry>>();
  /** Per tenant, its deleted memories' ids in the order they were deleted (the oldest forgotten first). */
  private readonly deletions = new Map<string, Set<string>>();

  constructor(private readonly limits: HistoryLimits = DEFAULT_HISTORY_LIMITS) {}

  /** The memory's versions, oldest first; undefined when none is kept. */
  get(tenantId: string, id: string): { versions: readonly MemoryVersion[]; deleted: boolean } | undefined {
    return this.tenants.get(tenantId)?.get(id);
  }

  /** A new memory (or one restored from a snapshot with its `past` versions); returns the bytes its past versions hold. */
  added(record: MemoryRecord, change: ChangeInfo | undefined, past?: readonly MemoryVersion[]): number {
    let bytes = this.drop(record.tenant_id, record.id);
    const kept = past && this.limits.maxVersions > 1 ? past.slice(-(this.limits.maxVersions - 1)) : [];
    // With past versions, the current one is the update that followed them.
    const version: MemoryVersion = { event: kept.length > 0 ? 'update' : 'add', ...(change ?? legacy(record)), record };
    for (const v of kept) bytes += versionBytes(v);
    this.entriesOf(record.tenant_id).set(record.id, { versions: [...kept, version], deleted: false });
    return bytes;
  }

  /** A new version of a memory; returns what the versions it now keeps in the past add to the bytes held. */
  updated(record: MemoryRecord, before: MemoryRecord, change: ChangeInfo | undefined): number {
    let bytes = 0;
    let entry = this.tenants.get(record.tenant_id)?.get(record.id);
    if (!entry || entry.deleted) {
      // A memory whose add predates history (or was restored amid a snapshot): its current version starts it.
      bytes += this.drop(record.tenant_id, record.id);
      entry = { versions: [{ event: 'add', ...legacy(before), record: before }], deleted: false };
      this.entriesOf(record.tenant_id).set(record.id, entry);
    }
    const json = JSON.stringify(record);
    if (entry.versions.some((v) => v.record && JSON.stringify(v.record) === json)) return bytes;
    // The version that was current becomes a past one, and counts from now on.
    bytes += versionBytes(entry.versions.at(-1)!);
    entry.versions.push({ event: 'update', ...(change ?? legacy(record)), record });
    while (entry.versions.length > this.limits.maxVersions) {
      const dropped = entry.versions.shift()!;
      bytes -= versionBytes(dropped);
    }
    return bytes;
  }

  /**
   * A deleted memory: every version loses its content, and a delete is added. Returns what that
   * changes in the bytes held (negative: the past versions' content goes).
   */
  deleted(tenantId: string, id: string, current: MemoryRecord, change: ChangeInfo | undefined): number {
    const entry = this.tenants.get(tenantId)?.get(id);
    if (entry?.deleted) return 0;
    // The current version is the memory itself, counted by the service: only the past ones are freed here.
    const bytes = entry ? this.drop(tenantId, id) : 0;
    const versions = entry?.versions ?? [{ event: 'add', ...legacy(current), record: current }];
    const stripped: MemoryVersion[] = versions.map(({ record: _content, ...rest }) => rest);
    stripped.push({ event: 'delete', ...(change ?? { at: 0, key_id: null, extracted: false }) });
    return bytes + this.keepDeleted(tenantId, id, stripped.slice(-this.limits.maxVersions));
  }

  /** A deleted memory's history, from a snapshot; returns the bytes it holds. */
  restoreDeleted(tenantId: string, id: string, versions: MemoryVersion[]): number {
    const bytes = this.drop(tenantId, id);
    return bytes + this.keepDeleted(tenantId, id, versions.map(({ record: _content, ...rest }) => rest).slice(-this.limits.maxVersions));
  }

  /** A live memory's versions before its current one (what its snapshot entry carries). */
  past(tenantId: string, id: string): MemoryVersion[] | undefined {
    const entry = this.tenants.get(tenantId)?.get(id);
    return entry && !entry.deleted && entry.versions.length > 1 ? entry.versions.slice(0, -1) : undefined;
  }

  /** The change that made a live memory's current version (its snapshot entry carries it). */
  current(tenantId: string, id: string): ChangeInfo | undefined {
    const last = this.tenants.get(tenantId)?.get(id)?.versions.at(-1);
    return last && { at: last.at, key_id: last.key_id, extracted: last.extracted };
  }

  /** Every deleted memory's history (what a snapshot keeps of them). */
  *deletedEntries(): Generator<{ tenant_id: string; id: string; versions: MemoryVersion[] }> {
    for (const [tenantId, ids] of this.deletions) {
      const entries = this.tenants.get(tenantId)!;
      for (const id of ids) yield { tenant_id: tenantId, id, versions: entries.get(id)!.versions };
    }
  }

  private keepDeleted(tenantId: string, id: string, versions: MemoryVersion[]): number {
    this.entriesOf(tenantId).set(id, { versions, deleted: true });
    let ids = this.deletions.get(tenantId);
    if (!ids) this.deletions.set(tenantId, ids = new Set());
    ids.add(id);
    let bytes = versions.length * DELETED_VERSION_BYTES;
    for (const oldest of ids) {
      if (ids.size <= this.limits.maxDeleted) break;
      bytes += this.drop(tenantId, oldest);
    }
    return bytes;
  }

  /** Forgets a memory's history; returns the bytes that frees (negative). Only past versions count while it lives. */
  private drop(tenantId: string, id: string): number {
    const entries = this.tenants.get(tenantId);
    const entry = entries?.get(id);
    if (!entry) return 0;
    entries!.delete(id);
    if (entries!.size === 0) this.tenants.delete(tenantId);
    if (!entry.deleted) return -entry.versions.slice(0, -1).reduce((sum, v) => sum + versionBytes(v), 0);
    const ids = this.deletions.get(tenantId)!;
    ids.delete(id);
    if (ids.size === 0) this.deletions.delete(tenantId);
    return -entry.versions.length * DELETED_VERSION_BYTES;
  }

  private entriesOf(tenantId: string): Map<string, Entry> {
    let entries = this.tenants.get(tenantId);
    if (!entries) this.tenants.set(tenantId, entries = new Map());
    return entries;
  }
}
