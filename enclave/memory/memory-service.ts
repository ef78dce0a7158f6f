import type { AddMemoryInput, QueryMemoryInput, UpdateMemoryInput } from '../../common/schemas.js';
import { badRequest } from '../../common/errors.js';
import type { Embedder } from '../embedding/types.js';
import type { MemoryJournal, TenantLocks } from './journal.js';
import type { ChangeInfo, EmbeddingModelId, MemoryEvent, MemoryRecord, MemoryScope, MemoryVersion, ReplayMark, RestoredEvent, ScoredMemory } from './types.js';
import { inScope, recordMatcher, scopeOf } from './memory-scope.js';
import type { Period } from './memory-time.js';
import { MemoryHistories } from './history.js';
import type { ImportedMemory, ImportItem } from './import.js';
import { TermDictionary } from '../lexical/term-dictionary.js';
import { rankHybrid, type Ranker } from '../retrieval/hybrid.js';
import { DEFAULT_TIERS } from '../vectors/tiered-index.js';
import type { SavedGraph } from '../vectors/hnsw-index.js';
import { NO_METER, type MemoryMeter } from './meter.js';
import { storedBytes, type Usage } from './admission.js';
import { changeLimits, historyLimits, type MemoryServiceOptions } from './memory-options.js';
import { ChangeAdmission } from './change-admission.js';
import { TenantMemories, type UsageChange } from './tenant-memories.js';
import { queryTenant } from './tenant-query.js';
import { newMemoryId } from './memory-ids.js';
import { findDuplicates, type DuplicateOf } from './near-duplicates.js';
import { ChangesInFlight } from './in-flight.js';
import { SingleTextBatcher } from '../embedding/single-text-batcher.js';

/** What an add did: stored a new memory, or updated the one it restates (`previous`: that memory before). */
export type AddOutcome = { record: MemoryRecord; event: 'ADD' } | { record: MemoryRecord; event: 'UPDATE'; previous: MemoryRecord };
import { unreachable } from '../unreachable.js';

/** One tenant's adds, updates (new content) and deletes, made as one change (MemoryService.change). */
export interface ChangePlan {
  adds: Omit<AddMemoryInput, 'tenant_id'>[];
  updates: { id: string; content: string; occurred_at?: string }[];
  deletes: string[];
}

/** What a change did: the memories added, updated (with each one's version before) and deleted (as they were). */
export interface ChangeOutcome {
  added: MemoryRecord[];
  updated: { record: MemoryRecord; previous: MemoryRecord }[];
  deleted: MemoryRecord[];
}

/**
 * Who asks for a change: the Caller's key id (enclave/auth/caller.ts), whether it comes from
 * extraction, and the sealed request it comes in (logged with the change: journal.ts).
 */
export interface ChangeAuthor {
  keyId?: string;
  extracted?: boolean;
  replay?: ReplayMark;
}

const changeBy = (author: ChangeAuthor | undefined, at = Math.floor(Date.now() / 1000)): ChangeInfo =>
  ({ at, key_id: author?.keyId ?? null, extracted: author?.extracted ?? false });

/** A memory as a snapshot keeps it: its vector, the change that made it, and its past versions (memory/history.ts). */
export interface MemoryEntry {
  record: MemoryRecord;
  vector: Float32Array;
  change?: ChangeInfo;
  past?: MemoryVersion[];
}

/**
 * Every tenant's memories (memory/tenant-memories.ts). Lookups always go through the tenant
 * first, so one tenant's ids are simply absent from another's view. Changes are admitted
 * against the limits (reserving what they add), made durable by the journal, then applied.
 */
export class MemoryService {
  private readonly tenants = new Map<string, TenantMemories>();
  /** The words small tenants' lexical indexes hold, each once for all of them (lexical/term-dictionary.ts). */
  private readonly terms = new TermDictionary();
  private readonly admission: ChangeAdmission;
  private readonly newTenant: () => TenantMemories;
  private readonly meter: MemoryMeter;
  /** Every memory's versions, deleted ones' included (without content). */
  private readonly history: MemoryHistories;
  /** Whether an update keeps the version it replaces (so that version still counts against the stored bytes). */
  private readonly keepsPast: boolean;
  /** What the applied changes hold; tenants are counted from `tenants`. */
  private readonly applied: UsageChange = { memories: 0, storedBytes: 0, terms: 0 };
  private journal?: MemoryJournal;
  /** Tenants sealed under keys their clients hold (the journal's; none without one). */
  private locks?: TenantLocks;
  private reembedding = false;
  /** Queries under way now (query() to its answer). */
  private querying = 0;
  /** Changes logged, or being logged, and not yet applied: what a decision made now must also see. */
  private readonly inFlight = new ChangesInFlight();
  /** Single-item adds made at once share an embedder run (embedding/single-text-batcher.ts). */
  private readonly singles = new SingleTextBatcher(() => this.embedder);

  constructor(private embedder: Embedder, options: MemoryServiceOptions = {}) {
    this.admission = new ChangeAdmission(changeLimits(options), this.terms, { tenant: (id) => this.tenants.get(id), usage: () => this.usage });
    this.newTenant = () => new TenantMemories(this.embedder.dimension, options.vectorIndex ?? DEFAULT_TIERS, this.terms, options.searchReplicas);
    this.meter = options.meter ?? NO_METER;
    this.history = new MemoryHistories(historyLimits(options));
    this.keepsPast = historyLimits(options).maxVersions > 1;
  }

  /** Tenants, memories, stored bytes and distinct terms (each tenant's counted apart) held now. */
  get usage(): Usage {
    return { tenants: this.tenants.size, ...this.applied };
  }

  /** From now on every change is made durable in `journal` before it is applied and acknowledged. */
  useJournal(journal: MemoryJournal): void {
    this.journal = journal;
    this.locks = journal.locks;
  }

  /**
   * Every call for a tenant passes here first, with the tenant key its sealed request carried
   * (TenantLocks.admit): refused when the tenant is keyed and the key is missing or wrong; a
   * locked tenant is opened (its changes applied) by the first call with its key.
   */
  admitTenant(tenantId: string, tenantKey: Uint8Array | undefined): void {
    if (!this.locks) {
      if (tenantKey) throw badRequest('this enclave keeps no durable store, so it seals nothing under tenant keys', null, 'invalid_tenant_key');
      return;
    }
    this.locks.admit(tenantId, tenantKey, this.tenants.has(tenantId), (event) => {
      // As at recovery (storage/store.ts): a change that cannot apply is skipped, never half applied.
      try {
        this.apply(event);
      } catch {
        // Nothing to do: apply() left nothing half done.
      }
    });
  }

  /** The model every indexed vector comes from; record it with the memories (model-change.ts). */
  get embeddingModel(): EmbeddingModelId {
    return { id: this.embedder.id, dimension: this.embedder.dimension, sha256: this.embedder.sha256 };
  }

  /** Embeds texts with the model the memories use (POST /v1/embeddings); `meter` is told how long it took. */
  async embed(texts: string[], meter = this.meter): Promise<Float32Array[]> {
    const started = performance.now();
    const vectors = await this.embedder.embed(texts);
    meter.embedded(texts.length, (performance.now() - started) / 1000);
    return vectors;
  }

  /** embed(), with a single text joining the other single texts asked for at the same time. */
  private async embedForAdd(texts: string[], meter: MemoryMeter): Promise<Float32Array[]> {
    if (texts.length !== 1) return this.embed(texts, meter);
    const started = performance.now();
    const vector = await this.singles.embed(texts[0]);
    meter.embedded(1, (performance.now() - started) / 1000);
    return [vector];
  }

  /**
   * Re-embeds every stored memory from its content with `embedder` and from then on uses it
   * for adds and queries, so vectors of two models never share an index. New indexes are
   * built aside and swapped in at the end: if embedding fails, nothing changes. Meant for
   * start-up, before requests are served (an add racing it would index with the old model).
   */
  async reembed(embedder: Embedder, onProgress?: (done: number, total: number) => void): Promise<void> {
    if (this.reembedding) throw new Error('re-embedding is already running');
    this.reembedding = true;
    try {
      const total = [...this.tenants.values()].reduce((sum, tenant) => sum + tenant.size, 0);
      let done = 0;
      onProgress?.(done, total);
      const rebuilt = new Map<TenantMemories, Awaited<ReturnType<TenantMemories['embedAside']>>>();
      for (const tenant of this.tenants.values()) rebuilt.set(tenant, await tenant.embedAside(embedder, (n) => onProgress?.(done += n, total)));
      for (const [tenant, fresh] of rebuilt) tenant.replaceVectors(fresh.index, fresh.centre);
      this.embedder = embedder;
    } finally {
      this.reembedding = false;
    }
  }

  async add(input: AddMemoryInput, keyTenants?: ReadonlySet<string>, meter = this.meter, author?: ChangeAuthor): Promise<MemoryRecord> {
    const [record] = await this.addMany([input], keyTenants, meter, author);
    return record;
  }

  async addMany(inputs: readonly AddMemoryInput[], keyTenants?: ReadonlySet<string>, meter = this.meter, author?: ChangeAuthor): Promise<MemoryRecord[]> {
    return (await this.remember(inputs, keyTenants, meter, author)).map((outcome) => outcome.record);
  }

  /**
   * Stores memories (of any tenants) in order, embedding all of them in one embedder call. An
   * input with `dedupe: true` that restates a memory of its tenant and scope (near-duplicates.ts)
   * updates that memory instead: its content, occurred_at and (if given) metadata become the
   * input's. Everything that can refuse or fail (the limits, embedding) comes before anything
   * is logged, so a refused batch stores nothing; the batch is then written and synced as one
   * (a failed write stores none of it) before it is applied and acknowledged.
   */
  async remember(inputs: readonly AddMemoryInput[], keyTenants?: ReadonlySet<string>, meter = this.meter, author?: ChangeAuthor): Promise<AddOutcome[]> {
    // Released when the records are applied (then they count as applied) or the add fails.
    const admitted = this.admission.adds(inputs, keyTenants);
    try {
      const vectors = await this.embedForAdd(inputs.map((input) => input.content), meter);
      // Checked before the change is logged: a logged change must always apply on replay.
      for (const vector of vectors) {
        if (vector.length !== this.embedder.dimension) throw new Error(`embedder returned ${vector.length} dimensions, not ${this.embedder.dimension}`);
      }
      const createdAt = Math.floor(Date.now() / 1000);
      const records = inputs.map((input): MemoryRecord => ({
        id: newMemoryId(), object: 'memory', tenant_id: input.tenant_id, content: input.content, metadata: { ...(input.metadata ?? {}) },
        created_at: createdAt, occurred_at: input.occurred_at ?? new Date(createdAt * 1000).toISOString(), ...scopeOf(input),
      }));
      const newMemories = records.map((record, i) => ({ id: record.id, content: record.content, tenant_id: record.tenant_id, scope: scopeOf(record), vector: vectors[i], dedupe: inputs[i].dedupe === true }));
      let duplicates = findDuplicates(newMemories, (id) => this.tenants.get(id), this.inFlight);
      // A restatement of a memory another call is still storing waits for that call, then decides
      // again: if that store failed, an update of it would be logged and applied to nothing.
      for (let waits = this.unappliedTargets(records, duplicates); waits.length > 0; waits = this.unappliedTargets(records, duplicates)) {
        await Promise.allSettled(waits);
        duplicates = findDuplicates(newMemories, (id) => this.tenants.get(id), this.inFlight);
      }
      // From here to the commit nothing waits, so what was decided is what the log gets next.
      // The latest version of each memory the batch changes, so a second restatement builds on the first.
      const latest = new Map<string, MemoryRecord>();
      const outcomes = records.map((record, i): AddOutcome => {
        const of = duplicates[i];
        if (!of) {
          latest.set(record.id, record);
          return { record, event: 'ADD' };
        }
        const before = latest.get(of.id) ?? this.get(record.tenant_id, of.id)!;
        const updated: MemoryRecord = {
          ...before, content: record.content, metadata: inputs[i].metadata ? record.metadata : before.metadata,
          occurred_at: record.occurred_at, updated_at: createdAt,
        };
        latest.set(of.id, updated);
        return { record: updated, event: 'UPDATE', previous: before };
      });
      const change = changeBy(author, createdAt);
      const events = outcomes.map(({ record, event }, i): MemoryEvent => ({ type: event === 'ADD' ? 'add' : 'update', record, vector: vectors[i], change }));
      await this.commit(events, admitted.release, admitted.terms, author?.replay);
      return outcomes;
    } finally {
      admitted.release();
    }
  }

  /**
   * Adds, updates and deletes memories of one tenant as one change, all or nothing: what
   * extraction decided (chat/extraction.ts). Everything is checked before anything is logged
   * (the limits, embedding, and that every memory to update or delete is still the tenant's:
   * undefined when one is gone, and nothing changed); the lot is then journaled as one batch.
   * Adds are stored as they are (the decision already compared them with what is held).
   */
  async change(tenantId: string, plan: ChangePlan, keyTenants?: ReadonlySet<string>, meter = this.meter, author?: ChangeAuthor): Promise<ChangeOutcome | undefined> {
    const before = [...plan.updates.map((u) => u.id), ...plan.deletes].map((id) => this.get(tenantId, id));
    if (before.some((record) => record === undefined)) return undefined;
    const tenant = this.tenants.get(tenantId);
    const adds = plan.adds.map((add) => ({ ...add, tenant_id: tenantId }));
    const admitted = [this.admission.adds(adds, keyTenants)];
    try {
      const updated = plan.updates.map((u, i) => {
        const admission = this.admission.update(tenant!, before[i]!, { content: u.content }, this.keepsPast);
        admitted.push({ terms: [admission.terms ?? []], release: admission.release });
        return admission.terms;
      });
      const texts = [...adds.map((a) => a.content), ...plan.updates.map((u) => u.content)];
      const vectors = texts.length > 0 ? await this.embed(texts, meter) : [];
      for (const vector of vectors) {
        if (vector.length !== this.embedder.dimension) throw new Error(`embedder returned ${vector.length} dimensions, not ${this.embedder.dimension}`);
      }
      // Still the tenant's after the embedding's wait: a memory deleted meanwhile (or whose delete
      // is on its way to the log, to be applied before this) fails the whole change.
      const current = [...plan.updates.map((u) => u.id), ...plan.deletes].map((id) => (this.inFlight.deleting(tenantId, id) ? undefined : this.get(tenantId, id)));
      if (current.some((record) => record === undefined)) return undefined;
      const at = Math.floor(Date.now() / 1000);
      const change = changeBy(author, at);
      const added = adds.map((input): MemoryRecord => ({
        id: newMemoryId(), object: 'memory', tenant_id: tenantId, content: input.content, metadata: { ...(input.metadata ?? {}) },
        created_at: at, occurred_at: input.occurred_at ?? new Date(at * 1000).toISOString(), ...scopeOf(input),
      }));
      const updates = plan.updates.map((u, i): MemoryRecord => ({
        ...current[i]!, content: u.content, updated_at: at, ...(u.occurred_at === undefined ? {} : { occurred_at: u.occurred_at }),
      }));
      const events: MemoryEvent[] = [
        ...added.map((record, i): MemoryEvent => ({ type: 'add', record, vector: vectors[i], change })),
        ...updates.map((record, i): MemoryEvent => ({ type: 'update', record, vector: vectors[adds.length + i], change })),
        ...plan.deletes.map((id): MemoryEvent => ({ type: 'delete', tenant_id: tenantId, id, change })),
      ];
      const terms = [...admitted[0].terms, ...updated.map((t) => t ?? [])];
      await this.commit(events, () => admitted.forEach((a) => a.release()), terms, author?.replay);
      return {
        added,
        updated: updates.map((record, i) => ({ record, previous: current[i]! })),
        deleted: current.slice(plan.updates.length) as MemoryRecord[],
      };
    } finally {
      for (const a of admitted) a.release();
    }
  }

  /**
   * Restores memories of one tenant with their ids (and, from an export of this service, their
   * history, and deleted memories' histories): admitted against the limits like adds, embedded
   * in one call, logged as one batch. A memory whose id the tenant holds live is skipped, and a
   * deleted memory's history whose id it holds anything of (an import run twice restores nothing
   * twice). Returns the ids restored and skipped.
   */
  async importMany(tenantId: string, items: readonly ImportItem[], keyTenants?: ReadonlySet<string>, meter = this.meter, author?: ChangeAuthor): Promise<{ imported: string[]; deleted: string[]; skipped: string[] }> {
    const seen = new Set<string>();
    const fresh: ImportedMemory[] = [];
    const tombstones: MemoryEvent[] = [];
    const skipped: string[] = [];
    for (const item of items) {
      const id = 'deleted' in item ? item.deleted.id : item.record.id;
      // A memory is restored unless it is live (its add replaces a deleted history of its id:
      // export, delete, import brings a tenant back); a deleted history only where nothing of the id is kept.
      const held = 'deleted' in item ? this.get(tenantId, id) !== undefined || this.history.holds(tenantId, id) : this.get(tenantId, id) !== undefined;
      if (held || seen.has(id)) skipped.push(id);
      else if ('deleted' in item) tombstones.push({ type: 'tombstone', tenant_id: tenantId, id, versions: item.deleted.versions });
      else fresh.push(item);
      seen.add(id);
    }
    const deleted = tombstones.map((event) => (event as { id: string }).id);
    if (fresh.length === 0) {
      // A deleted memory's history holds no content: bounded per tenant (MEMORY_HISTORY_DELETED), nothing to admit or embed.
      if (tombstones.length > 0) await this.commit(tombstones, undefined, undefined, author?.replay);
      return { imported: [], deleted, skipped };
    }
    const admitted = this.admission.adds(fresh.map(({ record }) => ({ tenant_id: tenantId, content: record.content, metadata: record.metadata })), keyTenants);
    try {
      const vectors = await this.embed(fresh.map(({ record }) => record.content), meter);
      for (const vector of vectors) {
        if (vector.length !== this.embedder.dimension) throw new Error(`embedder returned ${vector.length} dimensions, not ${this.embedder.dimension}`);
      }
      const now = changeBy(author);
      // An id added meanwhile by another call is not added twice: applying an add of a held id does nothing.
      const events: MemoryEvent[] = fresh.map(({ record, change, past }, i) => ({ type: 'add', record, vector: vectors[i], change: change ?? now, ...(past ? { past } : {}) }));
      // The tombstones after the adds: `terms` (per event) covers the adds only.
      await this.commit([...events, ...tombstones], admitted.release, admitted.terms, author?.replay);
      return { imported: fresh.map(({ record }) => record.id), deleted, skipped };
    } finally {
      admitted.release();
    }
  }

  /**
   * The tenant's top_k memories for the query (memory/tenant-query.ts). `rank` replaces the
   * fusion; only the evaluation passes one (bench/eval/rankers.ts).
   */
  async query(input: QueryMemoryInput, rank: Ranker = rankHybrid, meter = this.meter): Promise<ScoredMemory[]> {
    const started = performance.now();
    this.querying++;
    try {
      const tenant = this.tenantHeld(input.tenant_id);
      if (!tenant || tenant.size === 0) return [];
      return await queryTenant(tenant, input, rank, { embed: async (query) => (await this.embed([query], meter))[0], querying: () => this.querying });
    } finally {
      this.querying--;
      meter.searched((performance.now() - started) / 1000);
    }
  }

  /**
   * A page of the tenant's memories in `scope` (every scope it names) that occurred in `period`, newest first; undefined
   * when `after` is not the tenant's.
   */
  list(tenantId: string, limit: number, after?: string, scope: MemoryScope = {}, period: Period = {}): { data: MemoryRecord[]; hasMore: boolean } | undefined {
    const tenant = this.tenantHeld(tenantId);
    if (!tenant) return after === undefined ? { data: [], hasMore: false } : undefined;
    return tenant.page(limit, after, recordMatcher(scope, period));
  }

  /**
   * Changes a memory's content, metadata (replaced whole) and/or occurred_at. New content is
   * embedded and indexed at once; the change is journaled like an add. Undefined when the
   * memory is gone (deleted while the new content was being embedded).
   */
  async update(tenantId: string, id: string, change: UpdateMemoryInput, meter = this.meter, author?: ChangeAuthor): Promise<MemoryRecord | undefined> {
    const before = this.get(tenantId, id);
    if (!before) return undefined;
    const tenant = this.tenants.get(tenantId)!;
    const content = change.content ?? before.content;
    const admitted = this.admission.update(tenant, before, change, this.keepsPast);
    try {
      const [vector] = change.content === undefined ? [tenant.index.vector(id) ?? (await this.embed([content], meter))[0]] : await this.embed([content], meter);
      const current = this.get(tenantId, id);
      if (!current) return undefined;
      const at = Math.floor(Date.now() / 1000);
      const record: MemoryRecord = {
        ...current, content, metadata: { ...(change.metadata ?? current.metadata) }, updated_at: at,
        ...(change.occurred_at === undefined ? {} : { occurred_at: change.occurred_at }),
      };
      await this.commit([{ type: 'update', record, vector, change: changeBy(author, at) }], undefined, admitted.terms && [admitted.terms], author?.replay);
      return this.get(tenantId, id);
    } finally {
      admitted.release();
    }
  }

  get(tenantId: string, id: string): MemoryRecord | undefined {
    return this.tenantHeld(tenantId)?.records.get(id);
  }

  /** The memory's versions, oldest first (a deleted one's without content); undefined when none is kept. */
  historyOf(tenantId: string, id: string): { versions: readonly MemoryVersion[]; deleted: boolean } | undefined {
    return this.history.get(tenantId, id, this.get(tenantId, id));
  }

  async delete(tenantId: string, id: string, author?: ChangeAuthor): Promise<boolean> {
    if (!this.get(tenantId, id)) return false;
    await this.commit([{ type: 'delete', tenant_id: tenantId, id, change: changeBy(author) }], undefined, undefined, author?.replay);
    return true;
  }

  /** Deletes every memory of a tenant in `scope`, as one journaled batch; returns how many there were. */
  async deleteAll(tenantId: string, scope: MemoryScope = {}, author?: ChangeAuthor): Promise<number> {
    const tenant = this.tenantHeld(tenantId);
    if (!tenant) return 0;
    const change = changeBy(author);
    const events: MemoryEvent[] = [];
    for (const record of tenant.records.values()) if (inScope(record, scope)) events.push({ type: 'delete', tenant_id: tenantId, id: record.id, change });
    if (events.length === 0) return 0;
    await this.commit(events, undefined, undefined, author?.replay);
    return events.length;
  }

  /**
   * Applies a change: after the journal made it durable, or when replaying stored changes at
   * start. Idempotent, since a snapshot and the log after it may repeat a change. An add
   * without a vector keeps the record unindexed, for reembed() to index. `terms`: the content's
   * lexical terms when they were worked out (and numbered) before the change was logged. A
   * change that fails to apply leaves nothing half done (a replay skips it by name: storage/store.ts).
   */
  apply(event: RestoredEvent, terms?: readonly string[]): void {
    switch (event.type) {
      case 'add': {
        const tenant = this.tenantFor(event.record.tenant_id);
        try {
          const change = tenant.add(event.record, event.vector, terms);
          // A repeated add (already applied) changes nothing, its history included.
          if (change.memories > 0) change.storedBytes += this.history.added(event.record, event.change, event.past);
          this.count(change);
        } catch (err) {
          if (tenant.size === 0) this.forget(event.record.tenant_id, tenant);
          throw err;
        }
        return;
      }
      case 'update': {
        const tenant = this.tenants.get(event.record.tenant_id);
        const before = tenant?.records.get(event.record.id);
        if (!tenant || !before) return;
        const change = tenant.update(event.record, event.vector, terms);
        this.count({ ...change, storedBytes: change.storedBytes + this.history.updated(event.record, before, event.change) });
        return;
      }
      case 'delete': {
        const tenant = this.tenants.get(event.tenant_id);
        const record = tenant?.records.get(event.id);
        if (!tenant || !record) return;
        const change = tenant.delete(event.id);
        this.count({ ...change, storedBytes: change.storedBytes + this.history.deleted(event.tenant_id, event.id, record, event.change) });
        if (tenant.size === 0) this.forget(event.tenant_id, tenant);
        return;
      }
      case 'tombstone':
        // Only if the memory is not back (the snapshot may have read it before its deletion and the log re-adds it).
        if (!this.get(event.tenant_id, event.id)) this.count({ memories: 0, storedBytes: this.history.restoreDeleted(event.tenant_id, event.id, event.versions), terms: 0 });
        return;
      default:
        unreachable(event, 'memory event');
    }
  }

  /**
   * Drops every tenant `belongs` names from memory, with what it costs (vectors, lexical index
   * and its words, search-worker copy, histories), and from the usage: their shard was closed
   * (storage/sharded-store.ts), and its store keeps them for whichever enclave opens it next.
   */
  dropTenants(belongs: (tenantId: string) => boolean): void {
    for (const [tenantId, tenant] of [...this.tenants]) {
      if (!belongs(tenantId)) continue;
      let bytes = 0;
      for (const record of tenant.records.values()) bytes += storedBytes(record.content, record.metadata);
      this.count({ memories: -tenant.size, storedBytes: -bytes, terms: -tenant.lexical.distinctTerms });
      this.forget(tenantId, tenant);
    }
    this.count({ memories: 0, storedBytes: this.history.forgetTenants(belongs), terms: 0 });
  }

  /** Tenants and memories held of the tenants `belongs` names (a shard's, for the host's placement: counts only). */
  usageOf(belongs: (tenantId: string) => boolean): { tenants: number; memories: number } {
    let tenants = 0;
    let memories = 0;
    for (const [tenantId, tenant] of this.tenants) {
      if (!belongs(tenantId)) continue;
      tenants++;
      memories += tenant.size;
    }
    return { tenants, memories };
  }

  /** Tenants and memories held, by the group `groupOf` puts each tenant in (its shard), in one pass over the tenants. */
  usageBy(groupOf: (tenantId: string) => number): Map<number, { tenants: number; memories: number }> {
    const usage = new Map<number, { tenants: number; memories: number }>();
    for (const [tenantId, tenant] of this.tenants) {
      const group = groupOf(tenantId);
      const counts = usage.get(group);
      if (counts) {
        counts.tenants++;
        counts.memories += tenant.size;
      } else usage.set(group, { tenants: 1, memories: tenant.size });
    }
    return usage;
  }

  /** Every memory with its vector and history: what a snapshot holds. */
  *entries(): Generator<MemoryEntry> {
    for (const tenant of this.tenants.values()) {
      for (const entry of tenant.entries()) {
        const { tenant_id, id } = entry.record;
        const change = this.history.current(tenant_id, id);
        const past = this.history.past(tenant_id, id);
        yield past ? { ...entry, change, past } : change ? { ...entry, change } : entry;
      }
    }
  }

  /**
   * The tenant's memories, oldest first, each with its history (versions as kept), one at a
   * time: an export streams them (api/export-route.ts). Changes made meanwhile may or may not
   * be in it.
   */
  *exportTenant(tenantId: string): Generator<{ record: MemoryRecord; history: readonly MemoryVersion[] }> {
    const tenant = this.tenantHeld(tenantId);
    if (!tenant) return;
    for (const record of tenant.records.values()) yield { record, history: this.history.get(tenantId, record.id, record)?.versions ?? [] };
  }

  /** The tenant's deleted memories' histories (no content), oldest deletion first: an export ends with them. */
  exportDeleted(tenantId: string): Generator<{ id: string; versions: readonly MemoryVersion[] }> {
    this.tenantHeld(tenantId);
    return this.history.deletedOf(tenantId);
  }

  /** Every deleted memory's history (no content): what a snapshot keeps of them. */
  *deletedHistories(): Generator<Extract<MemoryEvent, { type: 'tombstone' }>> {
    for (const deleted of this.history.deletedEntries()) yield { type: 'tombstone', ...deleted };
  }

  /** Large tenants' vector graphs, each with its save: what a snapshot keeps beside it (storage/graph-file.ts). */
  *graphs(): Generator<[string, () => Promise<SavedGraph>]> {
    for (const [tenantId, tenant] of this.tenants) {
      tenant.index.finishPromotion();
      if (tenant.index.kind === 'hnsw') yield [tenantId, () => tenant.saveGraph()!];
    }
  }

  /** At recovery, before the tenant's memories: its index opened from a saved graph, which they confirm. */
  restoreGraph(tenantId: string, graph: SavedGraph): void {
    const tenant = this.tenantFor(tenantId);
    try {
      tenant.restoreGraph(graph);
    } catch (err) {
      if (tenant.size === 0) this.forget(tenantId, tenant);
      throw err;
    }
  }

  /** After the snapshot's memories: what the restored graphs hold and the snapshot did not confirm goes. */
  settleGraphs(tenantIds: readonly string[]): number {
    let dropped = 0;
    for (const tenantId of tenantIds) {
      const tenant = this.tenants.get(tenantId);
      if (!tenant) continue;
      dropped += tenant.index.settle();
      if (tenant.size === 0) this.forget(tenantId, tenant);
    }
    return dropped;
  }

  private count(change: UsageChange): void {
    for (const what of ['memories', 'storedBytes', 'terms'] as const) this.applied[what] += change[what];
  }

  /** A tenant with nothing left costs nothing: no empty indexes kept per tenant ever seen. */
  private forget(tenantId: string, tenant: TenantMemories): void {
    this.tenants.delete(tenantId);
    tenant.dispose();
  }

  /**
   * Logs `events`, then applies them; `terms[i]`: the lexical terms of event i's content, when
   * worked out; `replay`: the sealed request they come in, logged with them.
   */
  private async commit(events: MemoryEvent[], applied?: () => void, terms?: ReadonlyArray<readonly string[]>, replay?: ReplayMark): Promise<void> {
    let settle!: () => void;
    const end = this.inFlight.begin(events, new Promise<void>((resolve) => (settle = resolve)));
    try {
      await this.logAndApply(events, applied, terms, replay);
    } finally {
      end();
      settle();
    }
  }

  private async logAndApply(events: MemoryEvent[], applied?: () => void, terms?: ReadonlyArray<readonly string[]>, replay?: ReplayMark): Promise<void> {
    let left = events.length;
    const apply = (part: readonly MemoryEvent[] = events) => {
      // Whole (one store), or in parts (a batch across shards): each event keeps its own terms.
      const at = part === events ? undefined : new Map(events.map((event, i) => [event, i]));
      part.forEach((event, i) => this.apply(event, terms?.[at ? at.get(event)! : i]));
      left -= part.length;
      if (left <= 0) applied?.();
    };
    if (this.journal) await this.journal.commit(events, apply, replay);
    else apply(events);
  }

  /**
   * What remember() must wait for before it decides again: the changes storing the memories it
   * would restate that are not applied yet (not this batch's own).
   */
  private unappliedTargets(records: readonly MemoryRecord[], duplicates: readonly (DuplicateOf | undefined)[]): Promise<void>[] {
    const own = new Set(records.map((record) => record.id));
    const waits = new Set<Promise<void>>();
    duplicates.forEach((of, i) => {
      if (!of || own.has(of.id) || this.get(records[i].tenant_id, of.id)) return;
      for (const unapplied of this.inFlight.withContent(records[i].tenant_id, records[i].content)) if (unapplied.record.id === of.id) waits.add(unapplied.settled);
    });
    return [...waits];
  }

  /**
   * The tenant's memories, or undefined when it holds none; but first, when it holds none here,
   * a refusal (503 shard_not_owned) if its shard has left this enclave since the call was
   * admitted (storage/sharded-store.ts closeShard): "nothing" would be a false answer, signed.
   */
  private tenantHeld(tenantId: string): TenantMemories | undefined {
    const tenant = this.tenants.get(tenantId);
    if (!tenant) this.journal?.refuseIfNotHeld?.(tenantId);
    return tenant;
  }

  private tenantFor(id: string): TenantMemories {
    let tenant = this.tenants.get(id);
    if (!tenant) this.tenants.set(id, tenant = this.newTenant());
    return tenant;
  }
}
