/**
 * How the API ranks a query's candidates: the vector and lexical rankings fused by a convex
 * combination of their scores. Other rankings (one side alone, rank fusion, earlier fusions)
 * exist only for comparison and live with the evaluation (bench/eval/rankers.ts).
 */

/**
 * How many candidates each ranking contributes before fusion (more when top_k is larger).
 * Every candidate is scored by both sides whichever found it, so the depth only decides which
 * memories are considered. On the long-conversation benchmark recall@5 and recall@10 are the
 * same at depths 20, 30, 50 and 100 on both halves; each step down costs the vector and BM25
 * searches less (100 -> 30: about 0.3 ms less CPU a query on a 100k-memory tenant).
 */
export const FUSION_DEPTH = 30;

/**
 * Weight of the cosine similarity in the hybrid score; the lexical score gets 1 - VECTOR_WEIGHT.
 * Checked on the tuning half of the long-conversation benchmark: recall@10 / MRR 0.676 / 0.561
 * at 0.3, 0.692 / 0.576 at 0.4, 0.706 / 0.581 at 0.5, 0.704 / 0.575 at 0.6, 0.692 / 0.549 at 0.7.
 * Then on LoCoMo's tuning half, where the static model's vectors are weaker than BM25 (alone,
 * recall@10 0.389 against 0.645), with neighbour lending (neighbour-lending.ts: weight 0.3,
 * from the first 5 hits), LoCoMo / synthetic tuning halves' recall@10: 0.723 / 0.814 at 0.35,
 * 0.711 / 0.817 at 0.4, 0.695 / 0.808 at 0.5; at 0.35 the synthetic set's multi-hop
 * questions fell (0.396 -> 0.375), at 0.4 they do not.
 */
export const VECTOR_WEIGHT = 0.4;

export interface Candidate {
  id: string;
  /** Cosine similarity of query and memory (0 when either has no vector). */
  vector: number;
  /** Rank in the vector ranking (from 1), when the memory is in it. */
  vectorRank?: number;
  /** BM25 score, when the memory matched a query term. */
  lexical?: number;
  /** Rank in the lexical ranking (from 1), when the memory is in it. */
  lexicalRank?: number;
}

export interface FusedHit extends Candidate {
  /** The score results are ordered by (decreasing); see rankHybrid. */
  fused: number;
}

/** What a ranking knows about the query besides its candidates. */
export interface RankContext {
  /** The BM25 score of a memory of average length holding every query term once (SearchCost.idealScore). */
  lexicalIdeal: number;
}

export type Ranker = (candidates: readonly Candidate[], context: RankContext) => FusedHit[];

/**
 * fused = w * cosine + (1 - w) * min(1, bm25 / ideal), w = VECTOR_WEIGHT, best first.
 *
 * A convex combination of normalised scores (Bruch, Gai & Ingber, "An analysis of fusion
 * functions for hybrid retrieval", ACM TOIS 2023, found it better than rank fusion): it keeps
 * how much better the best lexical match is ("invoice 88213" against "invoice" alone), which
 * rank fusion throws away. BM25 is scaled by what the query could score at best, not by this
 * query's best hit: dividing by the best hit gave a memory matching only a common query word
 * (the asker's name, in a conversation where it prefixes half the turns) the full lexical
 * weight. Cosine is used raw: it is bounded already.
 */
export const rankHybrid: Ranker = (candidates, { lexicalIdeal }) =>
  byFused(candidates.map(({ id, vector, vectorRank, lexical, lexicalRank }) => ({
    // Written out, not spread: every query builds a couple of hundred of these.
    id, vector, vectorRank, lexical, lexicalRank,
    fused: VECTOR_WEIGHT * vector + (1 - VECTOR_WEIGHT) * (lexicalIdeal > 0 ? Math.min(1, (lexical ?? 0) / lexicalIdeal) : 0),
  })));

/** Best first; ties (rare: equal scores on both sides) go to the better vector, then lexical, rank. */
export function byFused(hits: FusedHit[]): FusedHit[] {
  return hits.sort((x, y) => y.fused - x.fused
    || (x.vectorRank ?? Infinity) - (y.vectorRank ?? Infinity) || (x.lexicalRank ?? Infinity) - (y.lexicalRank ?? Infinity));
}
