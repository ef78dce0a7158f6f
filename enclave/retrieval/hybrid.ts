import { reciprocalRankFusion } from './fusion.js';

/** Which rankings a query fuses: both (the API's behaviour), or one alone (for evaluation). */
export type RetrievalMode = 'hybrid' | 'vector' | 'lexical';

/**
 * How many candidates each ranking contributes before fusion. Deeper than any top_k, so a
 * memory that only one ranking finds near its top still meets the other's evidence.
 */
export const FUSION_DEPTH = 100;

export interface Hit {
  id: string;
  score: number;
}

export interface FusedHit {
  id: string;
  /** Cosine similarity from the vector ranking, when that ranking listed the memory. */
  vector?: number;
  /** BM25 score, when the memory matched a query term. */
  lexical?: number;
  /** Reciprocal-rank-fusion score; results are in decreasing order of it. */
  fused: number;
}

/** Fuses a vector ranking and a lexical ranking (each best first) by reciprocal rank fusion. */
export function fuseHits(vectorHits: readonly Hit[], lexicalHits: readonly Hit[], mode: RetrievalMode = 'hybrid'): FusedHit[] {
  const rankings = [mode === 'lexical' ? [] : vectorHits, mode === 'vector' ? [] : lexicalHits];
  const scores = rankings.map((hits) => new Map(hits.map(({ id, score }) => [id, score])));
  return reciprocalRankFusion(rankings.map((hits) => hits.map(({ id }) => id))).map(({ id, score }) => ({
    id,
    vector: scores[0].get(id),
    lexical: scores[1].get(id),
    fused: score,
  }));
}
