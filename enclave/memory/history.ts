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
 * What is kept of a memory: for one never changed since its add (most of them), only the
 * change that added it, shared between the memories one batch or one second of one key
 * added (its version is the memory itself); otherwise its versions.
 */
type Kept = ChangeInfo | Entry;
const isEntry = (kept: Kept): kept is Entry => 'versions' in kept;

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
  private readonly tenants = new Map<string, Map<string, Kept>>();
  /** Per tenant, its deleted memories' ids in the order they were deleted (the oldest forgotten first). */
  private readonly deletions = new Map<string, Set<string>>();
  /** The last change info kept: the next add of the same second and key shares it. */
  private last?: ChangeInfo;

  constructor(private readonly limits: HistoryLimits = DEFAULT_HISTORY_LIMITS) {}

  /** The memory's versions, oldest first (`current`: the memory as held now, if it lives); undefined when none is kept. */
  get(tenantId: string, id: string, current: MemoryRecord | undefined): { versions: readonly MemoryVersion[]; deleted: boolean } | undefined {
    const kept = this.tenants.get(tenantId)?.get(id);
    if (!kept) return undefined;
    if (isEntry(kept)) return kept;
    return current && { versions: [{ event: 'add', ...kept, record: current }], deleted: false };
  }

  /** A new memory (or one restored from a snapshot with its `past` versions); returns the bytes its past versions hold. */
  added(record: MemoryRecord, change: ChangeInfo | undefined, past?: readonly MemoryVersion[]): number {
    let bytes = this.drop(record.tenant_id, record.id);
    const kept = past && this.limits.maxVersions > 1 ? past.slice(-(this.limits.maxVersions - 1)) : [];
    const info = this.share(change ?? legacy(record));
    if (kept.length === 0) {
      this.entriesOf(record.tenant_id).set(record.id, info);
      return bytes;
    }
    // With past versions, the current one is the update that followed them.
    for (const v of kept) bytes += versionBytes(v);
    this.entriesOf(record.tenant_id).set(record.id, { versions: [...kept, { event: 'update', ...info, record }], deleted: false });
    return bytes;
  }

  /** A new version of a memory; returns what the versions it now keeps in the past add to the bytes held. */
  updated(record: MemoryRecord, before: MemoryRecord, change: ChangeInfo | undefined): number {
    let bytes = 0;
    const kept = this.tenants.get(record.tenant_id)?.get(record.id);
    let entry: Entry;
    if (kept && isEntry(kept) && !kept.deleted) {
      entry = kept;
    } else {
      // Its add only (or an add that predates history, or a memory restored amid a snapshot): its current version starts it.
      if (kept && isEntry(kept)) bytes += this.drop(record.tenant_id, record.id);
      entry = { versions: [{ event: 'add', ...(kept && !isEntry(kept) ? kept : legacy(before)), record: before }], deleted: false };
      this.entriesOf(record.tenant_id).set(record.id, entry);
    }
    const json = JSON.stringify(record);
    if (entry.versions.some((v) => v.record && JSON.stringify(v.record) === json)) return bytes;
    // The version that was current becomes a past one, and counts from now on.
    bytes += versionBytes(entry.versions.at(-1)!);
    entry.versions.push({ event: 'update', ...(change ?? legacy(record)), record });
    while (entry.versions.length > this.limits.maxVersions) bytes -= versionBytes(entry.versions.shift()!);
    return bytes;
  }

  /**
   * A deleted memory: every version loses its content, and a delete is added. Returns what that
   * changes in the bytes held (negative: the past versions' content goes).
   */
  deleted(tenantId: string, id: string, current: MemoryRecord, change: ChangeInfo | undefined): number {
    const kept = this.tenants.get(tenantId)?.get(id);
    if (kept && isEntry(kept) && kept.deleted) return 0;
    // The current version is the memory itself, counted by the service: only the past ones are freed here.
    const bytes = kept ? this.drop(tenantId, id) : 0;
    const versions = kept && isEntry(kept) ? kept.versions : [{ event: 'add' as const, ...(kept ?? legacy(current)), record: current }];
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
    const kept = this.tenants.get(tenantId)?.get(id);
    return kept && isEntry(kept) && !kept.deleted && kept.versions.length > 1 ? kept.versions.slice(0, -1) : undefined;
  }

  /** The change that made a live memory's current version (its snapshot entry carries it). */
  current(tenantId: string, id: string): ChangeInfo | undefined {
    const kept = this.tenants.get(tenantId)?.get(id);
    if (!kept || !isEntry(kept)) return kept;
    const last = kept.versions.at(-1);
    return last && { at: last.at, key_id: last.key_id, extracted: last.extracted };
  }

  /** Every deleted memory's history (what a snapshot keeps of them). */
  *deletedEntries(): Generator<{ tenant_id: string; id: string; versions: MemoryVersion[] }> {
    for (const [tenantId, ids] of this.deletions) {
      const entries = this.tenants.get(tenantId)!;
      for (const id of ids) yield { tenant_id: tenantId, id, versions: (entries.get(id) as Entry).versions };
    }
  }

  /** One tenant's deleted memories' histories, the oldest deletion first (what its export carries). */
  *deletedOf(tenantId: string): Generator<{ id: string; versions: readonly MemoryVersion[] }> {
    // Looked up afresh at each step: the export streams while the tenant may change.
    for (const id of this.deletions.get(tenantId) ?? []) {
      const kept = this.tenants.get(tenantId)?.get(id);
      if (kept && isEntry(kept) && kept.deleted) yield { id, versions: kept.versions };
    }
  }

  /** Forgets every history of the tenants `belongs` names (their shard closed); returns the bytes that frees (negative). */
  forgetTenants(belongs: (tenantId: string) => boolean): number {
    let bytes = 0;
    for (const [tenantId, entries] of [...this.tenants]) {
      if (!belongs(tenantId)) continue;
      for (const id of [...entries.keys()]) bytes += this.drop(tenantId, id);
    }
    return bytes;
  }

  /** Whether anything is kept of this id in the tenant: a live memory's history or a deleted one's. */
  holds(tenantId: string, id: string): boolean {
    return this.tenants.get(tenantId)?.has(id) ?? false;
  }

  /** `change`, or the last one kept when it says the same (one object for a batch, or a second of one key's adds). */
  private share(change: ChangeInfo): ChangeInfo {
    const last = this.last;
    if (last && last.at === change.at && last.key_id === change.key_id && last.extracted === change.extracted) return last;
    return this.last = { at: change.at, key_id: change.key_id, extracted: change.extracted };
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
    const kept = entries?.get(id);
    if (!kept) return 0;
    entries!.delete(id);
    if (entries!.size === 0) this.tenants.delete(tenantId);
    if (!isEntry(kept)) return 0;
    if (!kept.deleted) return -kept.versions.slice(0, -1).reduce((sum, v) => sum + versionBytes(v), 0);
    const ids = this.deletions.get(tenantId)!;
    ids.delete(id);
    if (ids.size === 0) this.deletions.delete(tenantId);
    return -kept.versions.length * DELETED_VERSION_BYTES;
  }

  private entriesOf(tenantId: string): Map<string, Kept> {
    let entries = this.tenants.get(tenantId);
    if (!entries) this.tenants.set(tenantId, entries = new Map());
    return entries;
  }
}
