import type { ScoredMemory } from '../memory/types.js';

/**
 * Which of the memories found for a chat message are worth putting in front of the model.
 * Search always returns its top k, however weakly they match; a chat should see only those
 * likely to bear on the message, and none when nothing does ("What is the weather in
 * Paris?" must not come with "I like to sit by the window on trains").
 *
 * A memory is kept when its fused score (0.4 x cosine from the tenant's mean + 0.6 x BM25 as a
 * share of the query's ideal score, retrieval/hybrid.ts, raised for a hit's neighbouring turn) reaches MIN_SCORE, or its cosine
 * MIN_COSINE; the best hit is kept also when it is confident (FIRST_HIT). `npm run eval`
 * calibrates them on the tuning halves of the LoCoMo development set and the synthetic
 * conversations (bench/eval/chat-relevance.ts): the cut that most often brings a question's
 * evidence into the prompt while leaving three off-topic messages in four with no memory.
 * docs/retrieval.md gives the figures on the held-back halves.
 */
export const MIN_SCORE = 0.32;

/**
 * Or a cosine similarity (from the tenant's mean) of at least this: a memory that matches by
 * meaning alone scores 0.4 of its cosine, so "what is my pet's name" (cosine 0.66 to "My dog is
 * called Rex", no word in common) would get nothing from MIN_SCORE alone.
 */
export const MIN_COSINE = 0.6;

/**
 * A best hit clearly ahead of the rest ("How long are logs retained?": "Log retention in Loki
 * is 14 days." scores 0.299, the next memory 0.081) is what search found, and chat keeps it.
 * Not the eval's grid choice (it gains no evidence on its sets): chosen for this case, which
 * test/unit/chat-relevance.test.ts pins; docs/retrieval.md says what it costs.
 */
export const FIRST_HIT = { minScore: 0.28, minLead: 1.3 };

export interface RelevanceCut {
  minScore: number;
  /** Keep only memories scoring at least this share of the best (0: no such rule). */
  minShareOfBest: number;
  /** A memory this similar by meaning alone passes without reaching minScore. */
  minCosine?: number;
  /**
   * The best hit is kept, whatever the other rules say, when its score reaches minScore and
   * it is at least minLead times the second's: search found one memory clearly ahead of the
   * rest, which a chat must not leave out.
   */
  firstHit?: { minScore: number; minLead: number };
}

export const CHAT_RELEVANCE: RelevanceCut = { minScore: MIN_SCORE, minShareOfBest: 0, minCosine: MIN_COSINE, firstHit: FIRST_HIT };

/** The memories that pass the cut, in their order (best first). */
export function relevantMemories(found: readonly ScoredMemory[], cut: RelevanceCut = CHAT_RELEVANCE): ScoredMemory[] {
  if (found.length === 0) return [];
  // A share of a best score at or below 0 would keep nothing or everything; only minScore speaks then.
  const share = cut.minShareOfBest > 0 && found[0].score > 0 ? cut.minShareOfBest * found[0].score : -Infinity;
  const kept = found.filter((m) => m.score >= share && (m.score >= cut.minScore || m.scores.vector >= (cut.minCosine ?? Infinity)));
  if (kept[0] !== found[0] && cut.firstHit && isConfident(found, cut.firstHit)) kept.unshift(found[0]);
  return kept;
}

function isConfident([first, second]: readonly ScoredMemory[], rule: { minScore: number; minLead: number }): boolean {
  return first.score >= rule.minScore && (second === undefined || first.score >= rule.minLead * Math.max(second.score, 0));
}
