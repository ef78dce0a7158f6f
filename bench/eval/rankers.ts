/**
 * Rankings the evaluation compares with the API's hybrid (enclave/retrieval/hybrid.ts); none
 * of them serves requests.
 */
import { byFused, rankHybrid, VECTOR_WEIGHT, type Ranker } from '../../enclave/retrieval/hybrid.js';
import { reciprocalRankFusion } from './rank-fusion.js';

/** The vector ranking alone, by cosine. */
export const rankVector: Ranker = (candidates) =>
  candidates.filter((c) => c.vectorRank !== undefined).sort((x, y) => x.vectorRank! - y.vectorRank!).map((c) => ({ ...c, fused: c.vector }));

/** The lexical ranking alone, by BM25. */
export const rankLexical: Ranker = (candidates) =>
  candidates.filter((c) => c.lexicalRank !== undefined).sort((x, y) => x.lexicalRank! - y.lexicalRank!).map((c) => ({ ...c, fused: c.lexical! }));

/** Reciprocal rank fusion (k = 60) of the two rankings. */
export const rankRrf: Ranker = (candidates, context) => {
  const byId = new Map(candidates.map((c) => [c.id, c]));
  const ids = (ranking: ReturnType<Ranker>) => ranking.map((c) => c.id);
  return reciprocalRankFusion([ids(rankVector(candidates, context)), ids(rankLexical(candidates, context))]).map(({ id, score }) => ({
    ...byId.get(id)!,
    fused: score,
  }));
};

/** The hybrid before issue 14: BM25 divided by this query's best BM25 score. */
export const rankHybridByMax: Ranker = (candidates) => {
  const maxLexical = Math.max(0, ...candidates.map((c) => c.lexical ?? 0));
  return byFused(candidates.map((c) => ({
    ...c,
    fused: VECTOR_WEIGHT * c.vector + (1 - VECTOR_WEIGHT) * (maxLexical > 0 ? (c.lexical ?? 0) / maxLexical : 0),
  })));
};

export const RANKERS = {
  vector: rankVector,
  lexical: rankLexical,
  hybrid: rankHybrid,
  'hybrid-max': rankHybridByMax,
  'hybrid-rrf': rankRrf,
} as const satisfies Record<string, Ranker>;

export type RankerName = keyof typeof RANKERS;
