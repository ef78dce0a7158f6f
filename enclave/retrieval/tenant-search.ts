import type { VectorIndex } from '../vectors/vector-index.js';
import type { LexicalHit, LexicalResult, SearchCost } from './bm25.js';

/** A hybrid query's two searches: the vector search's ids, best first; BM25's top hits and its scores of those ids. */
export interface TenantSearch {
  ids: string[];
  hits: LexicalHit[];
  /** BM25 score of each of `ids`, in that order (0: no query term). */
  also: Float64Array;
  cost: SearchCost;
}

/** What the lexical side offers: TieredLexical on the event loop, Bm25Index in the search worker. */
interface LexicalSearch {
  searchWith(query: string, k: number, also: readonly string[], cost?: SearchCost, accept?: (id: string) => boolean): LexicalResult;
}

/**
 * The two searches of a hybrid query, wherever they run (memory/memory-service.ts on the
 * event loop, retrieval/search-worker.ts on its copy): `depth` neighbours of `moved` (the
 * query moved to the tenant's mean), then BM25's top `depth` and its scores of those.
 */
export function searchTenant(vectors: Pick<VectorIndex, 'search'>, lexical: LexicalSearch, query: string, moved: Float32Array, depth: number, accept?: (id: string) => boolean): TenantSearch {
  const ids = vectors.search(moved, depth, accept).map(({ id }) => id);
  const cost: SearchCost = { terms: 0, postingsRead: 0, postingsHeld: 0 };
  const { hits, also } = lexical.searchWith(query, depth, ids, cost, accept);
  return { ids, hits, also, cost };
}
