import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { relevantMemories, type RelevanceCut } from '../../enclave/chat/relevance.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
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

  it('keeps a first hit far ahead of the second even below the minimum score, and only then', () => {
    const withFirst: RelevanceCut = { ...cut, minShareOfBest: 0, firstHit: { minScore: 0.3, minLead: 1.3 } };
    const ahead = [found('logs', { score: 0.31, cosine: 0.39 }), found('wifi', { score: 0.1, cosine: 0.2 })];
    expect(ids(relevantMemories(ahead, withFirst))).toEqual(['logs']);
    expect(ids(relevantMemories([found('alone', { score: 0.31, cosine: 0.39 })], withFirst))).toEqual(['alone']);
    // Close to the second: not confident.
    expect(relevantMemories([found('a', { score: 0.31, cosine: 0.39 }), found('b', { score: 0.28, cosine: 0.3 })], withFirst)).toEqual([]);
    // Ahead, but too weak.
    expect(relevantMemories([found('a', { score: 0.2, cosine: 0.3 }), found('b', { score: 0.05, cosine: 0.1 })], withFirst)).toEqual([]);
    // Already kept by the other rules: kept once, in order.
    const strong = [found('a', { score: 0.9, cosine: 0.7 }), found('b', { score: 0.2, cosine: 0.3 })];
    expect(ids(relevantMemories(strong, withFirst))).toEqual(['a']);
  });
});

describe('the cut chat uses, on a small tenant searched by the real model', () => {
  let model: Embedder;
  let memory: MemoryService;
  const tenant_id = 'ops-and-home';
  beforeAll(async () => {
    model = await loadEmbedder({ name: 'static', modelsDir });
    memory = new MemoryService(model);
    await memory.addMany([
      'My dog is called Rex.', 'My mother lives in Porto.', 'Log retention in Loki is 14 days.', 'I prefer window seats on trains.',
      'Our staging database is Postgres 15.', 'I am allergic to peanuts.', 'The team standup is at 9:30 every weekday.',
      'My favourite colour is green.', 'Deploys go out on Tuesdays and Thursdays.', 'I run 5 km every Saturday morning.',
      'The office wifi password rotates monthly.', 'My sister works as a nurse in Lisbon.',
    ].map((content) => ({ content, tenant_id })));
  });
  afterAll(() => model.close());
  const keptFor = async (query: string) => relevantMemories(await memory.query({ tenant_id, query, top_k: 5 })).map((m) => m.record.content);

  it('keeps what search ranks first with confidence, even when it shares few words and little meaning', async () => {
    // Issue 33: search ranked this first (score 0.31), and chat said it had no related memory.
    expect(await keptFor('How long are logs retained?')).toEqual(['Log retention in Loki is 14 days.']);
    expect((await keptFor('What is my pet called?'))[0]).toBe('My dog is called Rex.');
    expect((await keptFor('When do we deploy?'))[0]).toBe('Deploys go out on Tuesdays and Thursdays.');
  });

  it('still gives an off-topic message nothing', async () => {
    expect(await keptFor('What is the weather in Paris?')).toEqual([]);
    expect(await keptFor('How do I unclog a kitchen sink?')).toEqual([]);
  });
});
