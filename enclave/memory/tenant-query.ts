import type { QueryMemoryInput } from '../../common/schemas.js';
import { FUSION_DEPTH, rankHybrid, type Candidate, type Ranker } from '../retrieval/hybrid.js';
import { lendToNeighbours, type NeighbourSource } from '../retrieval/neighbour-lending.js';
import { favourNamedSpeakers } from '../retrieval/speaker-match.js';
import { sameSession } from './add-order.js';
import { centred } from '../retrieval/tenant-centre.js';
import { candidatesOf, searchTenant, searchTenantWith, similaritiesById, type RankedHit, type TenantSearch } from '../retrieval/tenant-search.js';
import { recordMatcher, scopeOf } from './memory-scope.js';
import type { TenantMemories } from './tenant-memories.js';
import type { SearchCost } from '../lexical/lexical-index.js';
import type { MemoryRecord, ScoredMemory } from './types.js';

/**
 * Where a query is searched and ranked:
 * - `event-loop`: both searches and the ranking here. Small tenants, filtered queries (a
 *   filter or scope needs the records, which only the event loop holds), the evaluation's rankings,
 *   and every query the worker cannot take.
 * - `split`: a large tenant's query alone: the worker's copy finds BM25's top hits (they need
 *   no embedding) while the event loop embeds the query and searches the vectors, so the two
 *   searches take the time of the longer, not of both; ranked here.
 * - `worker`: a large tenant's query while others are under way: searched and ranked in the
 *   worker, the event loop only looking up the winners' records.
 */
export type QueryPath = 'event-loop' | 'split' | 'worker';

/**
 * The search worker sends back the first top_k + this many of its ranking: the event loop
 * skips memories deleted while the worker ranked, and ranks a query itself in the rare case
 * that more than this many of them were.
 */
export const RANKING_SPARE = 10;

export interface QueryContext {
  /** The query's vector (the one await: the tenant may change meanwhile). */
  embed(query: string): Promise<Float32Array>;
  /** Queries under way now, this one included. */
  querying(): number;
}

/**
 * The tenant's top_k memories for the query: the vector (HNSW) ranking and the lexical (BM25)
 * ranking fused by `rank` (retrieval/hybrid.ts), on the path the load calls for.
 */
export async function queryTenant(tenant: TenantMemories, input: QueryMemoryInput, rank: Ranker, context: QueryContext): Promise<ScoredMemory[]> {
  const depth = Math.max(input.top_k, FUSION_DEPTH);
  // Scopes and metadata filters need the records, which only the event loop holds.
  const accept = recordMatcher(scopeOf(input), { since: input.since, until: input.until }, input.filters);
  const plain = !accept && rank === rankHybrid;
  // Caught now: if embedding fails, nothing awaits it (a worker failing meanwhile must not
  // become an unhandled rejection); undefined hits mean search here.
  const matching = plain && context.querying() === 1 ? tenant.matchInWorker(input.query, depth)?.catch(() => undefined) : undefined;
  const vector = await context.embed(input.query);
  const mean = tenant.centre.mean();
  const path: QueryPath = matching ? 'split' : plain ? 'worker' : 'event-loop';
  // The API's ranking lends hits' scores to their neighbouring turns (retrieval/neighbour-lending.ts)
  // and favours the turns of a speaker the query names (retrieval/speaker-match.ts).
  const api = rank === rankHybrid ? { neighbours: neighbourSource(tenant, input.query, vector, mean, accept), query: input.query } : undefined;
  switch (path) {
    case 'split': {
      const searched = await searchTenantWith(tenant.index, tenant.lexical, input.query, centred(vector, mean), depth, matching!);
      if (searched) return stillHeld(tenant, rankHere(tenant, input, vector, mean, depth, rank, accept, searched), input.top_k, api).results;
      break;
    }
    case 'worker': {
      const keep = rankingKept(input.top_k);
      const remote = await tenant.searchInWorker(context.querying() > 1, input.query, vector, mean, depth, keep)?.catch(() => undefined);
      const ranked = remote && stillHeld(tenant, remote, input.top_k, api);
      // More of the worker's first `keep` deleted meanwhile than the spare: rank here.
      if (ranked && (ranked.held >= input.top_k || remote.length < keep)) return ranked.results;
      break;
    }
    case 'event-loop':
      break;
  }
  return stillHeld(tenant, rankHere(tenant, input, vector, mean, depth, rank, accept), input.top_k, api).results;
}

/**
 * A hit's neighbours for lendToNeighbours: the memories added just before and after it in
 * its session (memory/add-order.ts), and the ones beyond those, that the query may return; one the ranking does not list
 * is scored as rankHybrid scores a candidate (its BM25 score asked of the lexical index).
 */
function neighbourSource(tenant: TenantMemories, query: string, vector: Float32Array, mean: Float32Array, accept: ((record: MemoryRecord) => boolean) | undefined): NeighbourSource {
  return {
    beside: (id) => {
      const record = tenant.records.get(id)!;
      const inSession = (other: string) => sameSession(record, tenant.records.get(other)!);
      const returnable = (other: string) => !accept || accept(tenant.records.get(other)!);
      // Two away: past a turn of the session, whether or not the query may return that one.
      const near = tenant.order.beside(id).filter(inSession);
      const far = near.flatMap((next) => tenant.order.beside(next)).filter((other) => other !== id && !near.includes(other) && inSession(other));
      return { near: near.filter(returnable), far: far.filter(returnable) };
    },
    unlisted: (ids) => {
      const score = tenant.index.scorer(vector, mean);
      const cost: SearchCost = { terms: 0, postingsRead: 0, postingsHeld: 0 };
      const { askedScores } = tenant.lexical.searchWith(query, 0, ids, cost);
      const candidates = ids.map((id, j) => ({ id, vector: score(id) ?? 0, lexical: askedScores[j] > 0 ? askedScores[j] : undefined }));
      return rankHybrid(candidates, { lexicalIdeal: cost.idealScore ?? 0 });
    },
  };
}

/**
 * A query's searches and ranking on the event loop. `searched`: the searches, when they were
 * done apart (the split path).
 */
function rankHere(
  tenant: TenantMemories, input: QueryMemoryInput, vector: Float32Array, mean: Float32Array, depth: number, rank: Ranker,
  accept: ((record: MemoryRecord) => boolean) | undefined, searched?: TenantSearch,
): RankedHit[] {
  // A filter is applied inside both searches, so each still returns its depth of matches.
  const accepts = accept && ((id: string) => accept(tenant.records.get(id)!));
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

/** What the API's ranking does after rankHybrid: neighbour lending, then the named speaker's turns first. */
interface ApiRanking {
  neighbours: NeighbourSource;
  query: string;
}

/**
 * How many of a ranking's first hits are lent to and reordered by speaker: the same for any
 * top_k up to FUSION_DEPTH, so a query's first results do not depend on its top_k (a named
 * speaker's turn ranked 25th may pass another's ranked 8th), and RANKING_SPARE more for those
 * deleted while the worker ranked.
 */
function rankingKept(topK: number): number {
  return Math.max(topK, FUSION_DEPTH) + RANKING_SPARE;
}

/**
 * The first `topK` of a ranking whose memories the tenant still holds, with their records:
 * the tenant may have changed while the worker ranked, and a ranking's order does not depend
 * on the other candidates, so skipping what is gone keeps the rest in order. With `api`, the
 * first rankingKept(topK) held (on every path the same hits) lend to their neighbouring turns
 * and are reordered by speaker first. `held`: how many of the ranking are still held (at most that many).
 */
function stillHeld(tenant: TenantMemories, ranked: RankedHit[], topK: number, api?: ApiRanking): { results: ScoredMemory[]; held: number } {
  const listed: RankedHit[] = [];
  for (const hit of ranked) {
    if (!tenant.records.has(hit.id)) continue;
    listed.push(hit);
    if (listed.length === rankingKept(topK)) break;
  }
  let final: RankedHit[] = listed;
  if (api) {
    final = lendToNeighbours(final, api.neighbours);
    // After lending: a question's next turn, lent its score, may be the named speaker's answer.
    final = favourNamedSpeakers(final, api.query, (id) => tenant.records.get(id)!.content);
  }
  const results = final.slice(0, topK).map((hit) => ({
    record: tenant.records.get(hit.id)!,
    score: hit.fused,
    scores: { vector: hit.vector, lexical: hit.lexical ?? null, fused: hit.fused },
  }));
  return { results, held: listed.length };
}
