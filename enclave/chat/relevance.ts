import type { ScoredMemory } from '../memory/memory-service.js';

/**
 * Which of the memories found for a chat message are worth putting in front of the model.
 * Search always returns its top k, however weakly they match; a chat should see only those
 * likely to bear on the message, and none when nothing does ("What is the weather in
 * Paris?" must not come with "I like to sit by the window on trains").
 *
 * A memory is kept when its fused score (0.5 x cosine from the tenant's mean + 0.5 x BM25 as
 * a share of the query's ideal score, retrieval/hybrid.ts) reaches MIN_SCORE and is at least
 * MIN_SHARE_OF_BEST of the best one's. Both were calibrated by `npm run eval` on the tuning
 * half of the long-conversation benchmark plus off-topic messages, maximising F2 over the
 * top 5 memories (a memory counts as relevant when it is evidence for the question; every
 * memory kept for an off-topic message is a false positive). F2 weighs a missed memory more
 * than an extra one: a model without the memory it needs answers wrong, while one it does not
 * need only costs tokens (bench/eval/chat-relevance.ts). The README gives the figures on the
 * held-back half.
 */
export const MIN_SCORE = 0.34;
export const MIN_SHARE_OF_BEST = 0.8;

export interface RelevanceCut {
  minScore: number;
  minShareOfBest: number;
}

export const CHAT_RELEVANCE: RelevanceCut = { minScore: MIN_SCORE, minShareOfBest: MIN_SHARE_OF_BEST };

/** The memories that pass the cut, in their order (best first). */
export function relevantMemories(found: readonly ScoredMemory[], cut: RelevanceCut = CHAT_RELEVANCE): ScoredMemory[] {
  if (found.length === 0) return [];
  const floor = Math.max(cut.minScore, cut.minShareOfBest * found[0].score);
  return found.filter((m) => m.score >= floor);
}
