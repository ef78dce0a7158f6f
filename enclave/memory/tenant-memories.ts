import { TieredLexical } from '../lexical/tiered-lexical.js';
import type { TermDictionary } from '../lexical/term-dictionary.js';
import { lexicalTerms } from '../lexical/lexical-terms.js';
import type { Replica, SearchReplicas } from '../search-worker/search-replicas.js';
import type { RankedHit } from '../retrieval/tenant-search.js';
import type { LexicalHit } from '../lexical/lexical-index.js';
import { TenantCentre } from '../retrieval/tenant-centre.js';
import { TieredIndex, type TieredOptions } from '../vectors/tiered-index.js';
import type { SavedGraph } from '../vectors/hnsw-index.js';
import { isZero } from '../vectors/vector-index.js';
import { storedBytes, type Usage } from './admission.js';
import type { Embedder } from '../embedding/types.js';
import type { MemoryRecord } from './types.js';
import { AddOrder } from './add-order.js';

const sameVector = (a: Float32Array, b: Float32Array): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/** A large tenant's queries before it gets a copy in the search worker (search-worker/search-replicas.ts). */
export const REPLICATE_AFTER_QUERIES = 50;

/** What a change did to the enclave's usage (tenants are counted by the service). */
export type UsageChange = Omit<Usage, 'tenants'>;

/** Texts per embed call when re-embedding: large enough for full ONNX runs, small enough for steady progress. */
const REEMBED_BATCH = 64;

const NO_CHANGE: UsageChange = { memories: 0, storedBytes: 0, terms: 0 };

/**
 * One tenant's memories and everything built from them, kept in step: the records (in the
 * order they were added; an update keeps its place), their vectors, the vectors' mean, BM25
 * over their words, and the copy in the search worker once the tenant has one. Every change
 * goes through add, update or delete, which change all of them or (if one fails) none.
 */
export class TenantMemories {
  readonly records = new Map<string, MemoryRecord>();
  /**
   * The memories' vectors (flat for small tenants, HNSW for large: vectors/tiered-index.ts),
   * also what snapshots store, so recovery needs no re-embedding. A record restored without
   * a vector is absent here until reembed().
   */
  index: TieredIndex;
  /** The mean of the indexed vectors, which query similarities are measured from (retrieval/tenant-centre.ts). */
  centre: TenantCentre;
  readonly lexical: TieredLexical;
  /**
   * Which memory was added just before and after each (a hit's neighbouring turns:
   * memory/add-order.ts), built at the first query that asks: it is the records' own order (a
   * Map keeps insertion order, an update keeps its key's place), so a recovery, which replays
   * every add, does not build links for tenants no one queries.
   */
  private links?: AddOrder;
  /** The large tenant's copy in the search worker, once it is queried often enough. */
  private replica?: Replica;
  /** Queries since the tenant was created (counted only while it has no copy). */
  private queries = 0;

  constructor(dimension: number, private readonly tiers: TieredOptions, dictionary: TermDictionary, private readonly replicas?: SearchReplicas) {
    this.index = new TieredIndex(dimension, tiers);
    this.centre = new TenantCentre(dimension);
    this.lexical = new TieredLexical({ dictionary });
  }

  get size(): number {
    return this.records.size;
  }

  get order(): AddOrder {
    if (!this.links) {
      this.links = new AddOrder();
      for (const id of this.records.keys()) this.links.append(id);
    }
    return this.links;
  }

  /**
   * Adds a memory (without a vector: unindexed, for reembed() to index); `terms`: its content's
   * lexical terms when worked out already. The lexical index goes first, as the one part a new
   * word adds to; if the vector index throws, the word is taken out again.
   */
  add(record: MemoryRecord, vector: Float32Array | null, terms?: readonly string[]): UsageChange {
    if (this.records.has(record.id)) return NO_CHANGE;
    const distinct = this.lexical.distinctTerms;
    this.lexical.addTerms(record.id, terms ?? lexicalTerms(record.content));
    try {
      if (vector) this.index.add(record.id, vector);
    } catch (err) {
      this.lexical.remove(record.id, record.content);
      throw err;
    }
    if (vector && !isZero(vector)) this.centre.add(vector);
    this.records.set(record.id, record);
    this.links?.append(record.id);
    if (this.replica) this.replicas!.add(this.replica, record.id, record.content, vector ?? undefined);
    return { memories: 1, storedBytes: storedBytes(record.content, record.metadata), terms: this.lexical.distinctTerms - distinct };
  }

  /** Replaces a memory where it stands; nothing when it is gone. */
  update(record: MemoryRecord, vector: Float32Array | null, terms?: readonly string[]): UsageChange {
    const old = this.records.get(record.id);
    if (!old) return NO_CHANGE;
    const before = this.index.vector(record.id);
    if (record.content === old.content && vector && before && sameVector(before, vector)) {
      // A restatement in the same words (dedupe: the same text added again): only the record
      // changes. Taking the vector out of an HNSW graph and in again cost as much as an add.
      this.records.set(record.id, record);
      return { memories: 0, storedBytes: storedBytes(record.content, record.metadata) - storedBytes(old.content, old.metadata), terms: 0 };
    }
    const distinct = this.lexical.distinctTerms;
    this.lexical.remove(record.id, old.content);
    this.lexical.addTerms(record.id, terms ?? lexicalTerms(record.content));
    // The mean loses the old vector and gains the new one.
    if (before && !isZero(before)) this.centre.remove(before);
    this.index.remove(record.id);
    if (vector) {
      this.index.add(record.id, vector);
      if (!isZero(vector)) this.centre.add(vector);
    }
    this.records.set(record.id, record); // an existing key keeps its place in the order
    if (this.replica) {
      this.replicas!.remove(this.replica, record.id, old.content);
      this.replicas!.add(this.replica, record.id, record.content, vector ?? undefined);
    }
    return {
      memories: 0,
      storedBytes: storedBytes(record.content, record.metadata) - storedBytes(old.content, old.metadata),
      terms: this.lexical.distinctTerms - distinct,
    };
  }

  delete(id: string): UsageChange {
    const record = this.records.get(id);
    if (!record) return NO_CHANGE;
    this.records.delete(id);
    this.links?.remove(id);
    const vector = this.index.vector(id);
    if (vector && !isZero(vector)) this.centre.remove(vector);
    this.index.remove(id);
    const distinct = this.lexical.distinctTerms;
    this.lexical.remove(id, record.content);
    if (this.replica) this.replicas!.remove(this.replica, id, record.content);
    return { memories: -1, storedBytes: -storedBytes(record.content, record.metadata), terms: this.lexical.distinctTerms - distinct };
  }

  /** The memories' vectors by `embedder`, built aside in batches (`onBatch`: how many were done); nothing here changes. */
  async embedAside(embedder: Embedder, onBatch: (count: number) => void): Promise<{ index: TieredIndex; centre: TenantCentre }> {
    const records = [...this.records.values()];
    const index = new TieredIndex(embedder.dimension, this.tiers);
    const centre = new TenantCentre(embedder.dimension);
    for (let start = 0; start < records.length; start += REEMBED_BATCH) {
      const batch = records.slice(start, start + REEMBED_BATCH);
      const embedded = await embedder.embed(batch.map((record) => record.content));
      batch.forEach((record, i) => {
        index.add(record.id, embedded[i]);
        if (!isZero(embedded[i])) centre.add(embedded[i]);
      });
      onBatch(batch.length);
    }
    return { index, centre };
  }

  /** Swaps in vectors of another model (built aside by reembed); the worker's copy holds the old ones, so it goes. */
  replaceVectors(index: TieredIndex, centre: TenantCentre): void {
    this.index = index;
    this.centre = centre;
    this.dropCopy();
  }

  /** Frees what outlives the object: the dictionary's words and the worker's copy. */
  dispose(): void {
    this.lexical.dispose();
    this.dropCopy();
  }

  /**
   * A page of the memories `accept` keeps (undefined: all), newest first: at most `limit`, starting
   * after the memory `after` (undefined: from the newest). Undefined when `after` is not the tenant's.
   */
  page(limit: number, after?: string, accept?: (record: MemoryRecord) => boolean): { data: MemoryRecord[]; hasMore: boolean } | undefined {
    if (after !== undefined && !this.records.has(after)) return undefined;
    let newestFirst = [...this.records.values()].reverse();
    // `after` itself stays in, so a page can go on from it even if it no longer matches.
    if (accept) newestFirst = newestFirst.filter((record) => accept(record) || record.id === after);
    const start = after === undefined ? 0 : newestFirst.findIndex((r) => r.id === after) + 1;
    return { data: newestFirst.slice(start, start + limit), hasMore: start + limit < newestFirst.length };
  }

  /** Every memory with its vector: what a snapshot holds. */
  *entries(): Generator<{ record: MemoryRecord; vector: Float32Array }> {
    for (const [id, record] of this.records) {
      const vector = this.index.vector(id);
      if (!vector) throw new Error(`memory ${id} was restored without a vector and not yet re-embedded`);
      yield { record, vector };
    }
  }

  /** The vector graph as saved (TieredIndex.saveGraph); undefined while the tenant is small. */
  saveGraph(): Promise<SavedGraph> | undefined {
    return this.index.saveGraph();
  }

  /** Opens a saved graph as the tenant's index, before its memories are added (which confirm it: TieredIndex.restored). */
  restoreGraph(graph: SavedGraph): void {
    if (this.records.size > 0) throw new Error('the tenant already holds memories');
    this.index = TieredIndex.restored(graph, this.tiers);
  }

    /** Indexes have moved to their large forms (HNSW, inverted BM25): the only kind the search worker copies. */
  get large(): boolean {
    return this.index.kind === 'hnsw' && this.lexical.kind === 'inverted';
  }

  /** BM25's top hits from the worker's copy; undefined when there is none or it cannot take it now. */
  matchInWorker(query: string, depth: number): Promise<LexicalHit[]> | undefined {
    if (!this.replicas || !this.replica || !this.large) return undefined;
    return this.replicas.match(this.replica, query, depth);
  }

  /**
   * The query searched and ranked by the worker's copy, when `now` and it can take it. The
   * REPLICATE_AFTER_QUERIES-th query of a large tenant starts its copy (and is searched on
   * the event loop): a copy costs memory, so a tenant queried now and then has none.
   */
  searchInWorker(now: boolean, query: string, vector: Float32Array, mean: Float32Array, depth: number, keep: number): Promise<RankedHit[]> | undefined {
    if (!this.replicas || !this.large) return undefined;
    if (!this.replica || this.replica.lost) {
      if (++this.queries < REPLICATE_AFTER_QUERIES) return undefined;
      const records = this.records;
      this.replica = this.replicas.create({
        texts: function* () {
          for (const [id, record] of records) yield [id, record.content];
        },
        vectors: () => this.index.copyRows(),
      });
      return undefined;
    }
    return now ? this.replicas.search(this.replica, query, vector, mean, depth, keep) : undefined;
  }

  private dropCopy(): void {
    if (this.replica) this.replicas!.drop(this.replica);
    this.replica = undefined;
  }
}
