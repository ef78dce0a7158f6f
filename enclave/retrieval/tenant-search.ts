import type { VectorIndex } from '../vectors/vector-index.js';
import type { LexicalHit, LexicalIndex, SearchCost } from '../lexical/lexical-index.js';
import type { Candidate } from './hybrid.js';

/** A hybrid query's two searches: the vector search's ids, best first; BM25's top hits and its scores of those ids. */
export interface TenantSearch<H extends LexicalHit = LexicalHit> {
  ids: string[];
  hits: H[];
  /** BM25 score of each of `ids`, in that order (0: no query term). */
  lexicalScores: Float64Array;
  cost: SearchCost;
}

/** One memory of a query's ranking, with what its place is made of (retrieval/hybrid.ts). */
export interface RankedHit {
  id: string;
  fused: number;
  /** Cosine similarity from the tenant's mean; 0 when either vector is missing or zero. */
  vector: number;
  /** BM25 score; undefined when no query term matched. */
  lexical?: number;
}

/** What the lexical side offers: TieredLexical on the event loop, Bm25Index in the search worker. */
type LexicalSearch = Pick<LexicalIndex, 'searchWith'>;

/**
 * The two searches of a hybrid query, wherever they run (memory/tenant-query.ts on the
 * event loop, search-worker/search-worker.ts on its copy): `depth` neighbours of `moved` (the
 * query moved to the tenant's mean), then BM25's top `depth` and its scores of those.
 */
export function searchTenant(vectors: Pick<VectorIndex, 'search'>, lexical: LexicalSearch, query: string, moved: Float32Array, depth: number, accept?: (id: string) => boolean): TenantSearch {
  const ids = vectors.search(moved, depth, accept).map(({ id }) => id);
  const cost: SearchCost = { terms: 0, postingsRead: 0, postingsHeld: 0 };
  const { hits, askedScores } = lexical.searchWith(query, depth, ids, cost, accept);
  return { ids, hits, lexicalScores: askedScores, cost };
}

/**
 * searchTenant() with BM25's top hits found elsewhere (the search worker): the vector search
 * runs here while `matching` is under way, then BM25 here scores its finds (its `cost` says
 * what the query's terms are worth here). Undefined when `matching` failed (it resolves
 * undefined), for the caller to search here instead.
 */
export async function searchTenantWith(vectors: Pick<VectorIndex, 'search'>, lexical: LexicalSearch, query: string, moved: Float32Array, depth: number, matching: Promise<LexicalHit[] | undefined>): Promise<TenantSearch | undefined> {
  const ids = vectors.search(moved, depth).map(({ id }) => id);
  const hits = await matching;
  if (!hits) return undefined;
  const cost: SearchCost = { terms: 0, postingsRead: 0, postingsHeld: 0 };
  const { askedScores } = lexical.searchWith(query, 0, ids, cost);
  return { ids, hits, lexicalScores: askedScores, cost };
}

/**
 * The candidates of both searches, each scored by both sides whichever found it: the vector
 * side's finds carry their BM25 score even below the lexical top `depth`, and a memory only
 * BM25 found still gets its similarity, so the depth decides which memories are considered,
 * never how one is scored. `similarity` is the exact cosine from the tenant's mean; `held`
 * leaves out what the tenant no longer holds (the event loop knows; the worker does not, and
 * the event loop skips such memories in its ranking afterwards, which keeps the same order).
 * Every candidate has the same fields in the same order (one object shape for the engine).
 */
export function candidatesOf<H extends LexicalHit>(searched: TenantSearch<H>, similarity: Similarities<H>, held?: (id: string) => boolean): Map<string, Candidate> {
  const candidates = new Map<string, Candidate>();
  searched.ids
    .map((id, j) => ({ id, score: similarity.found(j), lexical: searched.lexicalScores[j] }))
    .filter(({ id }) => !held || held(id))
    .sort((x, y) => y.score - x.score)
    .forEach(({ id, score, lexical }, i) => candidates.set(id, { id, vector: score, vectorRank: i + 1, lexical: lexical > 0 ? lexical : undefined, lexicalRank: undefined }));
  searched.hits.forEach((hit, i) => {
    const { id, score } = hit;
    const candidate = candidates.get(id);
    if (candidate) {
      candidate.lexical = score;
      candidate.lexicalRank = i + 1;
    } else if (!held || held(id)) {
      candidates.set(id, { id, vector: similarity.matched(hit), vectorRank: undefined, lexical: score, lexicalRank: i + 1 });
    }
  });
  return candidates;
}

/**
 * A candidate's similarity for candidatesOf: a vector find's by its place in `ids`, a memory
 * only BM25 found by its hit. The search worker's copy scores both by label, with no lookup by id.
 */
export interface Similarities<H extends LexicalHit = LexicalHit> {
  found(j: number): number;
  matched(hit: H): number;
}

/** Similarities by id (the event loop's indexes). */
export function similaritiesById(searched: TenantSearch, similarity: (id: string) => number): Similarities {
  return { found: (j) => similarity(searched.ids[j]), matched: (hit) => similarity(hit.id) };
}
