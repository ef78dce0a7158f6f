import { describe, expect, it } from 'vitest';
import { CHAT_RELEVANCE, relevantMemories, type RelevanceCut } from '../../enclave/chat/relevance.js';
import type { ScoredMemory } from '../../enclave/memory/types.js';

/** A found memory with the given fused score and cosine (the lexical part is implied). */
function found(id: string, { score, cosine }: { score: number; cosine: number }): ScoredMemory {
  return {
    record: { id, object: 'memory', tenant_id: 't', content: id, metadata: {}, created_at: 0 },
    score,
    scores: { vector: cosine, lexical: null, fused: score },
  };
}

const ids = (memories: ScoredMemory[]) => memories.map((m) => m.record.id);
const cut: RelevanceCut = { minScore: 0.34, minShareOfBest: 0.8, minCosine: 0.6 };

describe('relevantMemories', () => {
  it('keeps nothing when nothing reaches the minimum score or cosine', () => {
    expect(relevantMemories([found('a', { score: 0.2, cosine: 0.3 }), found('b', { score: 0.1, cosine: 0.2 })], cut)).toEqual([]);
    expect(relevantMemories([], cut)).toEqual([]);
  });

  it('keeps the best and those close to it, in order, and drops the rest', () => {
    const memories = [found('a', { score: 0.9, cosine: 0.7 }), found('b', { score: 0.75, cosine: 0.5 }), found('c', { score: 0.6, cosine: 0.65 })];
    expect(ids(relevantMemories(memories, cut))).toEqual(['a', 'b']);
  });

  it('keeps a memory related by meaning alone, which scores only half its cosine', () => {
    expect(ids(relevantMemories([found('pet', { score: 0.33, cosine: 0.66 })], cut))).toEqual(['pet']);
    expect(ids(relevantMemories([found('pet', { score: 0.33, cosine: 0.66 })], { ...cut, minCosine: undefined }))).toEqual([]);
  });

  it('a best score at or below zero keeps nothing, and does not turn the share of it into a pass', () => {
    expect(relevantMemories([found('a', { score: -0.05, cosine: -0.1 }), found('b', { score: -0.2, cosine: -0.4 })], cut)).toEqual([]);
  });

  it('is what chat uses', () => {
    expect(CHAT_RELEVANCE).toEqual(cut);
  });
});
