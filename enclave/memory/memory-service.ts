import { ApiError } from '../../common/errors.js';
import type { AddMemoryInput, QueryMemoryInput, UpdateMemoryInput } from '../../common/schemas.js';
import type { Embedder } from '../embedding/types.js';
import type { MemoryJournal } from './journal.js';
import type { EmbeddingModelId, MemoryEvent, MemoryRecord, RestoredEvent, ScoredMemory } from './types.js';
import { TieredLexical } from '../retrieval/tiered-lexical.js';
import { TermDictionary } from '../retrieval/term-dictionary.js';
import { FUSION_DEPTH, rankHybrid, type Candidate, type Ranker } from '../retrieval/hybrid.js';
import { DEFAULT_TIERS, TieredIndex, type TieredOptions } from '../vectors/tiered-index.js';
import { isZero } from '../vectors/vector-index.js';
import { TenantCentre, centred } from '../retrieval/tenant-centre.js';
import { NO_METER, type MemoryMeter } from './meter.js';
import { admit, DEFAULT_CAPACITY, storedBytes, type Capacity, type Usage } from './admission.js';
import { checkTenantTerms, DEFAULT_TERM_LIMITS, memoryTerms, newTermCount, type TermLimits } from './term-admission.js';
import { lexicalTerms } from '../retrieval/lexical-terms.js';
import { metadataMatcher } from './metadata-filter.js';
import type { Replica, SearchReplicas } from '../retrieval/search-replicas.js';
import { candidatesOf, searchTenant, searchTenantWith, similaritiesById, type RankedHit, type TenantSearch } from '../retrieval/tenant-search.js';
import type { LexicalHit } from '../retrieval/bm25.js';
import { pooledRandomBytes } from '../random-bytes.js';

interface Tenant {
  /**
   * The memories' vectors (flat for small tenants, HNSW for large: vectors/tiered-index.ts),
   * also what snapshots store, so recovery needs no re-embedding. A record restored without
   * a vector is absent here until reembed().
   */
  index: TieredIndex;
  /** The mean of the indexed vectors, which query similarities are measured from (retrieval/tenant-centre.ts). */
  centre: TenantCentre;
  /** BM25 over the same memories, kept in step with `index` and `records`. */
  lexical: TieredLexical;
  records: Map<string, MemoryRecord>;
  /** The large tenant's copy in the search worker, once it is queried often enough. */
  replica?: Replica;
  /** Queries since the tenant was created (counted only while it has no copy). */
  queries: number;
}

export interface MemoryServiceOptions {
  /** Most memories one tenant may hold; adding beyond it is refused with 409. */
  maxMemoriesPerTenant?: number;
  /** Most memories all the tenants of one API key may hold together; beyond, 409. */
  maxMemoriesPerKey?: number;
  /** When a tenant moves from exact search to HNSW, and the graph's parameters. */
  vectorIndex?: TieredOptions;
  /** What the whole enclave agrees to hold (memory/admission.ts); unnamed limits keep their defaults. */
  capacity?: Partial<Capacity>;
  /** Distinct words per memory and per tenant (memory/term-admission.ts). */
  termLimits?: Partial<TermLimits>;
  /** Where large tenants' searches run off the event loop (retrieval/search-replicas.ts); without it, on it. */
  searchReplicas?: SearchReplicas;
  /** Told of every embed and search of a call that passes no meter of its own (GET /metrics). */
  meter?: MemoryMeter;
}

export const DEFAULT_MAX_MEMORIES_PER_TENANT = 100_000;

const ID_PREFIX = Buffer.from('mem_', 'latin1');

/**
 * A new memory id, "mem_" and 32 hex digits, as one flat string. Joining the prefix to the hex
 * with + or a template makes a V8 cons string (two parts) once the result is 13 characters or
 * longer, and every comparison of two such ids then walks both parts: scanning a small
 * tenant's 480 ids for one took 11.5-36 µs against 1.9-2.9 for flat ones (in process), and
 * each id is a key in several maps for as long as its memory lives.
 */
export const newMemoryId = (): string => Buffer.concat([ID_PREFIX, Buffer.from(pooledRandomBytes(16).toString('hex'), 'latin1')]).toString('latin1');

/** A large tenant's queries before it gets a copy in the search worker (retrieval/search-replicas.ts). */
export const REPLICATE_AFTER_QUERIES = 50;

/**
 * The search worker sends back the first top_k + this many of its ranking: the event loop
 * skips memories deleted while the worker ranked, and ranks a query itself in the rare case
 * that more than this many of them were.
 */
export const RANKING_SPARE = 10;

/** Texts per embed call when re-embedding: large enough for full ONNX runs, small enough for steady progress. */
const REEMBED_BATCH = 64;

/**
 * Every tenant's memories: records, their vectors in an HNSW index and their words in a
 * BM25 index, each per tenant. Lookups always go through the tenant first, so one
 * tenant's ids are simply absent from another's view. Changes go through the journal
 * (durable storage) before they are applied.
 */
export class MemoryService {
  private readonly tenants = new Map<string, Tenant>();
  /** The words small tenants' lexical indexes hold, each once for all of them (retrieval/term-dictionary.ts). */
  private readonly terms = new TermDictionary();
  /** Adds admitted but not yet committed, per tenant: they count towards the maximum. */
  private readonly pending = new Map<string, number>();
  /** New distinct terms of adds and updates admitted but not yet applied, per tenant. */
  private readonly pendingTerms = new Map<string, number>();
  private readonly termLimits: TermLimits;
  private readonly maxPerTenant: number;
  private readonly maxPerKey: number;
  private readonly tiers: TieredOptions;
  private readonly capacity: Capacity;
  private readonly replicas?: SearchReplicas;
  private readonly meter: MemoryMeter;
  /** What is held (applied), and what adds in flight have reserved; tenants are counted from `tenants`. */
  private readonly held = { memories: 0, storedBytes: 0, terms: 0 };
  private readonly reserved: Usage = { tenants: 0, memories: 0, storedBytes: 0, terms: 0 };
  private journal?: MemoryJournal;
  private reembedding = false;
  /** Queries under way now (query() to its answer). */
  private querying = 0;

  constructor(private embedder: Embedder, options: MemoryServiceOptions = {}) {
    this.maxPerTenant = options.maxMemoriesPerTenant ?? DEFAULT_MAX_MEMORIES_PER_TENANT;
    this.maxPerKey = options.maxMemoriesPerKey ?? Infinity;
    this.tiers = options.vectorIndex ?? DEFAULT_TIERS;
    this.capacity = { ...DEFAULT_CAPACITY, ...options.capacity };
    this.termLimits = { ...DEFAULT_TERM_LIMITS, ...options.termLimits };
    this.replicas = options.searchReplicas;
    this.meter = options.meter ?? NO_METER;
  }

  /** Tenants, memories, stored bytes and distinct terms (each tenant's counted apart) held now. */
  get usage(): Usage {
    return { tenants: this.tenants.size, ...this.held };
  }

  /** From now on every change is made durable in `journal` before it is applied and acknowledged. */
  useJournal(journal: MemoryJournal): void {
    this.journal = journal;
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

  /**
   * Re-embeds every stored memory from its content with `embedder`, in batches, and from then
   * on uses it for adds and queries, so vectors of two models never share an index. New
   * indexes are built aside and swapped in at the end: if embedding fails, nothing changes.
   * Meant for start-up, before requests are served (an add racing it would index with the
   * old model).
   */
  async reembed(embedder: Embedder, onProgress?: (done: number, total: number) => void): Promise<void> {
    if (this.reembedding) throw new Error('re-embedding is already running');
    this.reembedding = true;
    try {
      const total = [...this.tenants.values()].reduce((sum, tenant) => sum + tenant.records.size, 0);
      const rebuilt = new Map<Tenant, { index: TieredIndex; centre: TenantCentre }>();
      let done = 0;
      onProgress?.(done, total);
      for (const tenant of this.tenants.values()) {
        const records = [...tenant.records.values()];
        const index = new TieredIndex(embedder.dimension, this.tiers);
        const centre = new TenantCentre(embedder.dimension);
        for (let start = 0; start < records.length; start += REEMBED_BATCH) {
          const batch = records.slice(start, start + REEMBED_BATCH);
          const embedded = await embedder.embed(batch.map((record) => record.content));
          batch.forEach((record, i) => {
            index.add(record.id, embedded[i]);
            if (!isZero(embedded[i])) centre.add(embedded[i]);
          });
          done += batch.length;
          onProgress?.(done, total);
        }
        rebuilt.set(tenant, { index, centre });
      }
      for (const [tenant, fresh] of rebuilt) {
        // A copy holds the old model's vectors: the next query builds a new one.
        if (tenant.replica) this.replicas!.drop(tenant.replica);
        Object.assign(tenant, fresh, { replica: undefined });
      }
      this.embedder = embedder;
    } finally {
      this.reembedding = false;
    }
  }

  async add(input: AddMemoryInput, keyTenants?: ReadonlySet<string>, meter = this.meter): Promise<MemoryRecord> {
    const [record] = await this.addMany([input], keyTenants, meter);
    return record;
  }

  /**
   * Stores memories (of any tenants) in order, embedding all of them in one embedder call.
   * Everything that can refuse or fail (the per-tenant maximum, embedding) comes before
   * anything is logged, so a refused batch stores nothing; the batch is then written and
   * synced as one (a failed write stores none of it) before it is applied and acknowledged.
   */
  async addMany(inputs: readonly AddMemoryInput[], keyTenants?: ReadonlySet<string>, meter = this.meter): Promise<MemoryRecord[]> {
    const perTenant = new Map<string, number>();
    for (const input of inputs) perTenant.set(input.tenant_id, (perTenant.get(input.tenant_id) ?? 0) + 1);
    // The key's share: everything its tenants hold (adds in flight included) counts.
    if (keyTenants && this.maxPerKey !== Infinity) {
      let held = 0;
      for (const tenantId of keyTenants) held += (this.tenants.get(tenantId)?.records.size ?? 0) + (this.pending.get(tenantId) ?? 0);
      if (held + inputs.length > this.maxPerKey) {
        throw new ApiError('key_memory_limit_reached',
          `the tenants of this API key hold ${held} memories; adding ${inputs.length} would pass the key's maximum of ${this.maxPerKey}; delete some before adding more`);
      }
    }
    for (const [tenantId, count] of perTenant) {
      const held = (this.tenants.get(tenantId)?.records.size ?? 0) + (this.pending.get(tenantId) ?? 0);
      if (held + count > this.maxPerTenant) {
        const message = held >= this.maxPerTenant
          ? `tenant '${tenantId}' holds the maximum of ${this.maxPerTenant} memories; delete some before adding more`
          : `tenant '${tenantId}' holds ${held} memories; adding ${count} would pass its maximum of ${this.maxPerTenant}`;
        throw new ApiError('memory_limit_reached', message, { param: 'tenant_id' });
      }
    }
    // Words: each memory's, then each tenant's new ones (adds in flight counted), before any work.
    const termLists = inputs.map((input, i) => memoryTerms(input.content, this.termLimits.maxTermsPerMemory, inputs.length > 1 ? i : undefined));
    const newTerms = new Map<string, number>();
    for (const tenantId of perTenant.keys()) {
      const lexical = this.tenants.get(tenantId)?.lexical;
      const fresh = newTermCount(termLists.filter((_, i) => inputs[i].tenant_id === tenantId), (term) => lexical?.holds(term) ?? false);
      checkTenantTerms(tenantId, (lexical?.distinctTerms ?? 0) + (this.pendingTerms.get(tenantId) ?? 0), fresh, this.termLimits.maxTermsPerTenant);
      newTerms.set(tenantId, fresh);
    }
    // The enclave's capacity, checked like the tenant's maximum: before any work is done.
    const adding: Usage = {
      tenants: [...perTenant.keys()].filter((t) => !this.tenants.has(t) && !this.pending.has(t)).length,
      memories: inputs.length,
      storedBytes: inputs.reduce((sum, input) => sum + storedBytes(input.content, input.metadata), 0),
      terms: [...newTerms.values()].reduce((sum, n) => sum + n, 0),
    };
    admit(this.committed(), adding, this.capacity);
    for (const [tenantId, count] of perTenant) bump(this.pending, tenantId, count);
    for (const [tenantId, count] of newTerms) bump(this.pendingTerms, tenantId, count);
    this.reserve(adding, 1);
    // Every word numbered now, before the add is logged: applying it (now, or at a replay)
    // then adds nothing to the dictionary's map, so it cannot fail there.
    const numbered = this.holdTerms(termLists);
    // The reservation ends the moment the records are applied (then they count as held),
    // or when the add fails: never both, so a tenant near its maximum is not counted twice.
    let reserved = true;
    const release = () => {
      if (!reserved) return;
      reserved = false;
      this.reserve(adding, -1);
      for (const [tenantId, count] of perTenant) bump(this.pending, tenantId, -count);
      for (const [tenantId, count] of newTerms) bump(this.pendingTerms, tenantId, -count);
      for (const n of numbered) this.terms.release(n);
    };
    try {
      const vectors = await this.embed(inputs.map((input) => input.content), meter);
      // Checked before the change is logged: a logged change must always apply on replay.
      for (const vector of vectors) {
        if (vector.length !== this.embedder.dimension) throw new Error(`embedder returned ${vector.length} dimensions, not ${this.embedder.dimension}`);
      }
      const createdAt = Math.floor(Date.now() / 1000);
      const records = inputs.map((input): MemoryRecord => ({
        id: newMemoryId(),
        object: 'memory',
        tenant_id: input.tenant_id,
        content: input.content,
        metadata: { ...(input.metadata ?? {}) },
        created_at: createdAt,
      }));
      await this.commit(records.map((record, i) => ({ type: 'add', record, vector: vectors[i] })), release, termLists);
      return records;
    } finally {
      release();
    }
  }

  /**
   * The tenant's top_k memories for the query: the vector (HNSW) ranking and the lexical
   * (BM25) ranking fused by a convex combination of their scores (see retrieval/hybrid.ts).
   * `rank` replaces the fusion; only the evaluation passes one (bench/eval/rankers.ts).
   */
  async query(input: QueryMemoryInput, rank: Ranker = rankHybrid, meter = this.meter): Promise<ScoredMemory[]> {
    const started = performance.now();
    this.querying++;
    try {
      return await this.ranked(input, rank, meter);
    } finally {
      this.querying--;
      meter.searched((performance.now() - started) / 1000);
    }
  }

  private async ranked(input: QueryMemoryInput, rank: Ranker, meter: MemoryMeter): Promise<ScoredMemory[]> {
    const tenant = this.tenant(input.tenant_id, false);
    if (!tenant || tenant.records.size === 0) return [];
    const depth = Math.max(input.top_k, FUSION_DEPTH);
    // A filter needs the records, which only the event loop holds; other rankings are the evaluation's.
    const plain = !input.filters && rank === rankHybrid;
    // Caught now: if embedding fails, nothing awaits it (a worker failing meanwhile must not
    // become an unhandled rejection); undefined hits mean search here.
    const matching = plain ? this.matchElsewhere(tenant, input.query, depth)?.catch(() => undefined) : undefined;
    const [vector] = await this.embed([input.query], meter);
    const mean = tenant.centre.mean();
    if (matching) {
      const searched = await searchTenantWith(tenant.index, tenant.lexical, input.query, centred(vector, mean), depth, matching);
      if (searched) return held(tenant, this.rankHere(tenant, input, vector, mean, depth, rank, searched), input.top_k);
    } else if (plain) {
      const keep = input.top_k + RANKING_SPARE;
      const remote = await this.searchElsewhere(tenant, input.query, vector, mean, depth, keep)?.catch(() => undefined);
      const results = remote && held(tenant, remote, input.top_k);
      // More of the worker's first `keep` deleted meanwhile than the spare: rank here.
      if (results && (results.length === input.top_k || remote.length < keep)) return results;
    }
    return held(tenant, this.rankHere(tenant, input, vector, mean, depth, rank), input.top_k);
  }

  /**
   * A query's searches and ranking on the event loop: what the worker does for a large
   * tenant's unfiltered queries. `searched`: the searches, when they were done apart.
   */
  private rankHere(tenant: Tenant, input: QueryMemoryInput, vector: Float32Array, mean: Float32Array, depth: number, rank: Ranker, searched?: TenantSearch): RankedHit[] {
    // A filter is applied inside both searches, so each still returns its depth of matches.
    const accept = input.filters ? metadataMatcher(input.filters) : undefined;
    const accepts = accept && ((id: string) => accept(tenant.records.get(id)!.metadata));
    // Similarity from the tenant's mean, not the origin: the index finds the neighbours of the
    // moved query, and each is scored exactly from the mean (retrieval/tenant-centre.ts).
    searched ??= searchTenant(tenant.index, tenant.lexical, input.query, centred(vector, mean), depth, accepts);
    const score = tenant.index.scorer(vector, mean);
    const similarity = (id: string) => score(id) ?? 0;
    const candidates = candidatesOf(searched, similaritiesById(searched, similarity), (id) => tenant.records.has(id));
    // HNSW may stop short under a narrow filter: then score every matching memory exactly.
    if (accepts && candidates.size < input.top_k && tenant.records.size > candidates.size) {
      const exact: Candidate[] = [];
      for (const id of tenant.records.keys()) {
        if (!candidates.has(id) && accepts(id)) exact.push({ id, vector: similarity(id) });
      }
      exact.sort((x, y) => y.vector - x.vector);
      let vectorRank = candidates.size;
      for (const c of exact.slice(0, depth)) candidates.set(c.id, { ...c, vectorRank: ++vectorRank });
    }
    return rank([...candidates.values()], { lexicalIdeal: searched.cost.idealScore ?? 0 });
  }

  /**
   * A large tenant's query searched and ranked in the search worker, when there is one, it
   * can take it now, and other queries are under way (alone, a query is answered sooner here,
   * with only its BM25 search there: matchElsewhere). The REPLICATE_AFTER_QUERIES-th
   * query of a large tenant starts its copy there (and is searched here): a copy costs
   * memory, so a tenant queried now and then has none.
   */
  private searchElsewhere(tenant: Tenant, query: string, vector: Float32Array, mean: Float32Array, depth: number, keep: number): Promise<RankedHit[]> | undefined {
    if (!this.replicas || !large(tenant)) return undefined;
    if (!tenant.replica || tenant.replica.lost) {
      if (++tenant.queries < REPLICATE_AFTER_QUERIES) return undefined;
      tenant.replica = this.replicas.create({
        texts: function* () {
          for (const [id, record] of tenant.records) yield [id, record.content];
        },
        vectors: () => tenant.index.copyRows(),
      });
      return undefined;
    }
    return this.querying > 1 ? this.replicas.search(tenant.replica, query, vector, mean, depth, keep) : undefined;
  }

  /**
   * A large tenant's query alone: its copy in the search worker finds BM25's top hits (they
   * need no embedding) while the event loop embeds the query and searches the vectors, so
   * the two searches take the time of the longer, not of both (the other core is mostly idle
   * with one query in flight). Undefined when there is no copy or it cannot take it now.
   */
  private matchElsewhere(tenant: Tenant, query: string, depth: number): Promise<LexicalHit[]> | undefined {
    if (!this.replicas || !tenant.replica || this.querying !== 1 || !large(tenant)) return undefined;
    return this.replicas.match(tenant.replica, query, depth);
  }

  /**
   * A page of the tenant's memories, newest first: at most `limit`, starting after the
   * memory `after` (undefined: from the newest). Undefined when `after` is not the tenant's.
   */
  list(tenantId: string, limit: number, after?: string): { data: MemoryRecord[]; hasMore: boolean } | undefined {
    const tenant = this.tenant(tenantId, false);
    if (!tenant) return after === undefined ? { data: [], hasMore: false } : undefined;
    if (after !== undefined && !tenant.records.has(after)) return undefined;
    // Records are kept in the order they were added (an update keeps its place).
    const newestFirst = [...tenant.records.values()].reverse();
    const start = after === undefined ? 0 : newestFirst.findIndex((r) => r.id === after) + 1;
    return { data: newestFirst.slice(start, start + limit), hasMore: start + limit < newestFirst.length };
  }

  /**
   * Changes a memory's content and/or metadata (metadata is replaced whole). New content is
   * embedded and indexed at once; the change is journaled like an add. Undefined when the
   * memory is gone (deleted while the new content was being embedded).
   */
  async update(tenantId: string, id: string, change: UpdateMemoryInput, meter = this.meter): Promise<MemoryRecord | undefined> {
    const before = this.get(tenantId, id);
    if (!before) return undefined;
    const content = change.content ?? before.content;
    // Growing a memory counts against the stored bytes like an add: checked before any work,
    // and reserved until the change is applied, so concurrent updates cannot pass it together.
    const growth = Math.max(0, storedBytes(content, change.metadata ?? before.metadata) - storedBytes(before.content, before.metadata));
    // New words count like an add's (the old content's are not subtracted: it may stay).
    const terms = change.content === undefined ? undefined : memoryTerms(content, this.termLimits.maxTermsPerMemory);
    const lexical = this.tenant(tenantId, false)!.lexical;
    const fresh = terms ? newTermCount([terms], (term) => lexical.holds(term)) : 0;
    checkTenantTerms(tenantId, lexical.distinctTerms + (this.pendingTerms.get(tenantId) ?? 0), fresh, this.termLimits.maxTermsPerTenant);
    const adding: Usage = { tenants: 0, memories: 0, storedBytes: growth, terms: fresh };
    admit(this.committed(), adding, this.capacity);
    this.reserve(adding, 1);
    bump(this.pendingTerms, tenantId, fresh);
    const numbered = terms ? this.holdTerms([terms]) : [];
    try {
      const [vector] = change.content === undefined
        ? [this.tenant(tenantId, false)!.index.vector(id) ?? (await this.embed([content], meter))[0]]
        : await this.embed([content], meter);
      const current = this.get(tenantId, id);
      if (!current) return undefined;
      const record: MemoryRecord = {
        ...current,
        content,
        metadata: { ...(change.metadata ?? current.metadata) },
        updated_at: Math.floor(Date.now() / 1000),
      };
      await this.commit([{ type: 'update', record, vector }], undefined, terms && [terms]);
      return this.get(tenantId, id);
    } finally {
      this.reserve(adding, -1);
      bump(this.pendingTerms, tenantId, -fresh);
      for (const n of numbered) this.terms.release(n);
    }
  }

  get(tenantId: string, id: string): MemoryRecord | undefined {
    return this.tenant(tenantId, false)?.records.get(id);
  }

  async delete(tenantId: string, id: string): Promise<boolean> {
    if (!this.get(tenantId, id)) return false;
    await this.commit([{ type: 'delete', tenant_id: tenantId, id }]);
    return true;
  }

  /** Deletes every memory of a tenant, as one journaled batch; returns how many there were. */
  async deleteAll(tenantId: string): Promise<number> {
    const tenant = this.tenant(tenantId, false);
    if (!tenant) return 0;
    const events: MemoryEvent[] = [...tenant.records.keys()].map((id) => ({ type: 'delete', tenant_id: tenantId, id }));
    await this.commit(events);
    return events.length;
  }

  /**
   * Applies a change: after the journal made it durable, or when replaying stored changes
   * at start. Idempotent, since a snapshot and the log after it may repeat a change.
   * An add without a vector keeps the record unindexed, for reembed() to index.
   */
  apply(event: RestoredEvent): void {
    this.applyEvent(event);
  }

  /**
   * apply(), with the content's lexical terms when they were worked out (and numbered) before
   * the change was logged. The lexical index goes first, as the one part a new word adds to;
   * if anything after it throws, it is taken out again, so a change that fails to apply
   * leaves nothing half done (a replay skips such a change by name: storage/store.ts).
   */
  private applyEvent(event: RestoredEvent, terms?: readonly string[]): void {
    if (event.type === 'add') {
      const { record, vector } = event;
      const tenant = this.tenant(record.tenant_id, true)!;
      if (tenant.records.has(record.id)) return;
      const distinct = tenant.lexical.distinctTerms;
      tenant.lexical.addTerms(record.id, terms ?? lexicalTerms(record.content));
      try {
        if (vector) tenant.index.add(record.id, vector);
      } catch (err) {
        tenant.lexical.remove(record.id, record.content);
        if (tenant.records.size === 0) this.forget(record.tenant_id, tenant);
        throw err;
      }
      if (vector && !isZero(vector)) tenant.centre.add(vector);
      tenant.records.set(record.id, record);
      if (tenant.replica) this.replicas!.add(tenant.replica, record.id, record.content, vector ?? undefined);
      this.held.memories++;
      this.held.storedBytes += storedBytes(record.content, record.metadata);
      this.held.terms += tenant.lexical.distinctTerms - distinct;
    } else if (event.type === 'update') {
      const { record, vector } = event;
      const tenant = this.tenant(record.tenant_id, false);
      const old = tenant?.records.get(record.id);
      if (!tenant || !old) return;
      const distinct = tenant.lexical.distinctTerms;
      tenant.lexical.remove(record.id, old.content);
      tenant.lexical.addTerms(record.id, terms ?? lexicalTerms(record.content));
      this.held.terms += tenant.lexical.distinctTerms - distinct;
      // The tenant's mean loses the old vector and gains the new one.
      const before = tenant.index.vector(record.id);
      if (before && !isZero(before)) tenant.centre.remove(before);
      tenant.index.remove(record.id);
      if (vector) {
        tenant.index.add(record.id, vector);
        if (!isZero(vector)) tenant.centre.add(vector);
      }
      tenant.records.set(record.id, record); // an existing key keeps its place in the order
      if (tenant.replica) {
        this.replicas!.remove(tenant.replica, record.id, old.content);
        this.replicas!.add(tenant.replica, record.id, record.content, vector ?? undefined);
      }
      this.held.storedBytes += storedBytes(record.content, record.metadata) - storedBytes(old.content, old.metadata);
    } else {
      const tenant = this.tenant(event.tenant_id, false);
      const record = tenant?.records.get(event.id);
      if (!tenant || !record) return;
      tenant.records.delete(event.id);
      this.held.memories--;
      this.held.storedBytes -= storedBytes(record.content, record.metadata);
      const vector = tenant.index.vector(event.id);
      if (vector && !isZero(vector)) tenant.centre.remove(vector);
      tenant.index.remove(event.id);
      const distinct = tenant.lexical.distinctTerms;
      tenant.lexical.remove(event.id, record.content);
      this.held.terms += tenant.lexical.distinctTerms - distinct;
      if (tenant.replica) this.replicas!.remove(tenant.replica, event.id, record.content);
      if (tenant.records.size === 0) this.forget(event.tenant_id, tenant);
    }
  }

  /** A tenant with nothing left costs nothing: no empty indexes kept per tenant ever seen. */
  private forget(tenantId: string, tenant: Tenant): void {
    this.tenants.delete(tenantId);
    tenant.lexical.dispose();
    if (tenant.replica) this.replicas!.drop(tenant.replica);
  }

  /** What is held and reserved: what admission adds to. */
  private committed(): Usage {
    const usage = this.usage;
    return {
      tenants: usage.tenants + this.reserved.tenants,
      memories: usage.memories + this.reserved.memories,
      storedBytes: usage.storedBytes + this.reserved.storedBytes,
      terms: usage.terms + this.reserved.terms,
    };
  }

  /** Reserves (sign 1) or gives back (sign -1) what a change in flight will add. */
  private reserve(adding: Usage, sign: 1 | -1): void {
    this.reserved.tenants += sign * adding.tenants;
    this.reserved.memories += sign * adding.memories;
    this.reserved.storedBytes += sign * adding.storedBytes;
    this.reserved.terms += sign * adding.terms;
  }

  /** Holds every distinct term of `lists` in the dictionary (numbering the new ones); the numbers, to release. */
  private holdTerms(lists: ReadonlyArray<readonly string[]>): number[] {
    const held = new Set<string>();
    const numbers: number[] = [];
    for (const terms of lists) {
      for (const term of terms) {
        if (held.has(term)) continue;
        held.add(term);
        numbers.push(this.terms.acquire(term));
      }
    }
    return numbers;
  }

  /** Every memory with its vector: what a snapshot holds. */
  *entries(): Generator<{ record: MemoryRecord; vector: Float32Array }> {
    for (const tenant of this.tenants.values()) {
      for (const [id, record] of tenant.records) {
        const vector = tenant.index.vector(id);
        if (!vector) throw new Error(`memory ${id} was restored without a vector and not yet re-embedded`);
        yield { record, vector };
      }
    }
  }

  /** Logs `events`, then applies them; `terms[i]`: the lexical terms of event i's content, when worked out. */
  private async commit(events: MemoryEvent[], applied?: () => void, terms?: ReadonlyArray<readonly string[]>): Promise<void> {
    const apply = () => {
      events.forEach((event, i) => this.applyEvent(event, terms?.[i]));
      applied?.();
    };
    if (this.journal) await this.journal.commit(events, apply);
    else apply();
  }

  private tenant(id: string, create: boolean): Tenant | undefined {
    let tenant = this.tenants.get(id);
    if (!tenant && create) {
      tenant = {
        index: new TieredIndex(this.embedder.dimension, this.tiers),
        centre: new TenantCentre(this.embedder.dimension),
        lexical: new TieredLexical({ dictionary: this.terms }),
        records: new Map(),
        queries: 0,
      };
      this.tenants.set(id, tenant);
    }
    return tenant;
  }
}

/** Adds `delta` to a per-tenant count, dropping it at 0. */
function bump(counts: Map<string, number>, tenantId: string, delta: number): void {
  const count = (counts.get(tenantId) ?? 0) + delta;
  if (count === 0) counts.delete(tenantId);
  else counts.set(tenantId, count);
}

/**
 * The first `topK` of a ranking whose memories the tenant still holds, with their records:
 * the tenant may have changed while the worker ranked, and a ranking's order does not depend
 * on the other candidates, so skipping what is gone keeps the rest in order.
 */
function held(tenant: Tenant, ranked: RankedHit[], topK: number): ScoredMemory[] {
  const results: ScoredMemory[] = [];
  for (const hit of ranked) {
    const record = tenant.records.get(hit.id);
    if (!record) continue;
    results.push({ record, score: hit.fused, scores: { vector: hit.vector, lexical: hit.lexical ?? null, fused: hit.fused } });
    if (results.length === topK) break;
  }
  return results;
}

/** A tenant whose indexes have moved to their large forms (HNSW, inverted BM25): the only kind the search worker copies. */
function large(tenant: Tenant): boolean {
  return tenant.index.kind === 'hnsw' && tenant.lexical.kind === 'inverted';
}
