import { reciprocalRankFusion } from './fusion.js';

/**
 * How a query ranks memories: `hybrid` (the API's behaviour) fuses the vector and lexical
 * rankings by a convex combination of their scores; `vector` and `lexical` use one ranking
 * alone, and `hybrid-rrf` fuses by reciprocal rank fusion instead. The last three exist for
 * the evaluation, which compares them.
 */
export type RetrievalMode = 'hybrid' | 'vector' | 'lexical' | 'hybrid-rrf';

/**
 * How many candidates each ranking contributes before fusion. Deeper than any top_k, so a
 * memory that only one ranking finds near its top still meets the other's evidence.
 */
export const FUSION_DEPTH = 100;

/**
 * Weight of the cosine similarity in the hybrid score; the lexical score gets 1 - VECTOR_WEIGHT.
 * Equal weights, not tuned (nothing in the evaluation set was used to choose it).
 */
export const VECTOR_WEIGHT = 0.5;

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
  /** The score results are ordered by (decreasing); see fuse. */
  fused: number;
}

/**
 * Ranks the candidates (the union of both rankings' top FUSION_DEPTH) by `mode`.
 *
 * hybrid: fused = w * cosine + (1 - w) * bm25 / max bm25 of this query, w = VECTOR_WEIGHT.
 * A convex combination of normalised scores (Bruch, Gai & Ingber, "An analysis of fusion
 * functions for hybrid retrieval", ACM TOIS 2023, found it better than rank fusion). Unlike
 * RRF it keeps how much better the best lexical match is: for "was invoice 88213 settled"
 * the memory with "invoice 88213" scores 3x the one with only "invoice", while their cosines
 * are nearly equal; rank fusion sees two neighbours and can put either first (it does, on
 * the evaluation set: see the README). Cosine is used raw: it is bounded already.
 */
export function fuse(candidates: readonly Candidate[], mode: RetrievalMode): FusedHit[] {
  const vectorRanking = candidates.filter((c) => c.vectorRank !== undefined).sort((x, y) => x.vectorRank! - y.vectorRank!);
  const lexicalRanking = candidates.filter((c) => c.lexicalRank !== undefined).sort((x, y) => x.lexicalRank! - y.lexicalRank!);
  switch (mode) {
    case 'vector':
      return vectorRanking.map((c) => ({ ...c, fused: c.vector }));
    case 'lexical':
      return lexicalRanking.map((c) => ({ ...c, fused: c.lexical! }));
    case 'hybrid-rrf': {
      const byId = new Map(candidates.map((c) => [c.id, c]));
      return reciprocalRankFusion([vectorRanking.map((c) => c.id), lexicalRanking.map((c) => c.id)]).map(({ id, score }) => ({
        ...byId.get(id)!,
        fused: score,
      }));
    }
    case 'hybrid': {
      const maxLexical = Math.max(0, ...candidates.map((c) => c.lexical ?? 0));
      const fused = candidates.map((c) => ({
        ...c,
        fused: VECTOR_WEIGHT * c.vector + (1 - VECTOR_WEIGHT) * (maxLexical > 0 ? (c.lexical ?? 0) / maxLexical : 0),
      }));
      // Ties (rare: equal scores on both sides) go to the better vector, then lexical, rank.
      const rank = (r?: number) => r ?? Infinity;
      return fused.sort((x, y) => y.fused - x.fused || rank(x.vectorRank) - rank(y.vectorRank) || rank(x.lexicalRank) - rank(y.lexicalRank));
    }
  }
}
