import type { ScoredMemory } from '../memory/types.js';

/**
 * Which of the memories found for a chat message are worth putting in front of the model.
 * Search always returns its top k, however weakly they match; a chat should see only those
 * likely to bear on the message, and none when nothing does ("What is the weather in
 * Paris?" must not come with "I like to sit by the window on trains").
 *
 * A memory is kept when its fused score (0.5 x cosine from the tenant's mean + 0.5 x BM25 as a
 * share of the query's ideal score, retrieval/hybrid.ts) reaches MIN_SCORE, or its cosine
 * MIN_COSINE, and the fused score is at least MIN_SHARE_OF_BEST of the best one's. All three
 * were calibrated by `npm run eval` on the tuning half of the long-conversation benchmark plus
 * off-topic messages, maximising F2 over the top 5 memories (a memory counts as relevant when
 * it is evidence for the question; every memory kept for an off-topic message is a false
 * positive). F2 weighs a missed memory more than an extra one: a model without the memory it
 * needs answers wrong, while one it does not need only costs tokens
 * (bench/eval/chat-relevance.ts). docs/retrieval.md gives the figures on the held-back half.
 */
export const MIN_SCORE = 0.34;
export const MIN_SHARE_OF_BEST = 0.8;

/**
 * Or a cosine similarity (from the tenant's mean) of at least this: a memory that matches by
 * meaning alone scores half its cosine, so it would need a cosine of 0.68 to reach MIN_SCORE,
 * and "what is my pet's name" (cosine 0.66 to "My dog is called Rex", no word in common)
 * would get nothing.
 * Calibrated with the other two (tuning half F2 0.694 without it, 0.707 with it).
 */
export const MIN_COSINE = 0.6;

export interface RelevanceCut {
  minScore: number;
  minShareOfBest: number;
  /** A memory this similar by meaning alone passes without reaching minScore. */
  minCosine?: number;
}

export const CHAT_RELEVANCE: RelevanceCut = { minScore: MIN_SCORE, minShareOfBest: MIN_SHARE_OF_BEST, minCosine: MIN_COSINE };

/** The memories that pass the cut, in their order (best first). */
export function relevantMemories(found: readonly ScoredMemory[], cut: RelevanceCut = CHAT_RELEVANCE): ScoredMemory[] {
  if (found.length === 0) return [];
  // A share of a best score at or below 0 would keep nothing or everything; only minScore speaks then.
  const share = cut.minShareOfBest > 0 && found[0].score > 0 ? cut.minShareOfBest * found[0].score : -Infinity;
  return found.filter((m) => m.score >= share && (m.score >= cut.minScore || m.scores.vector >= (cut.minCosine ?? Infinity)));
}
