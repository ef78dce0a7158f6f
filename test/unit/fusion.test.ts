import { describe, expect, it } from 'vitest';
import { RRF_K, reciprocalRankFusion } from '../../bench/eval/rank-fusion.js';
import { rankHybridByMax, rankLexical, rankRrf, rankVector } from '../../bench/eval/rankers.js';
import { VECTOR_WEIGHT, rankHybrid, type Candidate } from '../../enclave/retrieval/hybrid.js';

describe('reciprocalRankFusion', () => {
  it('sums 1 / (k + rank) over the rankings an id appears in', () => {
    const fused = reciprocalRankFusion([['a', 'b', 'c'], ['c', 'a']]);
    const score = Object.fromEntries(fused.map((f) => [f.id, f.score]));
    expect(score.a).toBeCloseTo(1 / (RRF_K + 1) + 1 / (RRF_K + 2), 12);
    expect(score.b).toBeCloseTo(1 / (RRF_K + 2), 12);
    expect(score.c).toBeCloseTo(1 / (RRF_K + 3) + 1 / (RRF_K + 1), 12);
    expect(fused.map((f) => f.id)).toEqual(['a', 'c', 'b']);
    expect(fused.find((f) => f.id === 'b')!.ranks).toEqual([2, undefined]);
  });

  it('breaks ties by the earlier ranking, and ignores repeats within a ranking', () => {
    expect(reciprocalRankFusion([['a', 'b'], ['b', 'a']]).map((f) => f.id)).toEqual(['a', 'b']);
    expect(reciprocalRankFusion([['a', 'a', 'b']])[0].score).toBeCloseTo(1 / (RRF_K + 1), 12);
    expect(reciprocalRankFusion([[], []])).toEqual([]);
  });
});

describe('rankings', () => {
  // The example: two invoice memories with nearly equal cosines, one with the number.
  const candidates: Candidate[] = [
    { id: 'unpaid-88231', vector: 0.69, vectorRank: 1, lexical: 3.45, lexicalRank: 2 },
    { id: 'settled-88213', vector: 0.66, vectorRank: 2, lexical: 11.45, lexicalRank: 1 },
    { id: 'team', vector: 0.3, vectorRank: 3 },
    { id: 'lexical-only', vector: 0.05, lexical: 1.0, lexicalRank: 3 },
  ];
  const context = (lexicalIdeal: number) => ({ lexicalIdeal });

  it('hybrid: w * cosine + (1 - w) * min(1, BM25 / the query\'s ideal BM25), best first', () => {
    const fused = rankHybrid(candidates, context(20));
    expect(fused.map((f) => f.id)).toEqual(['settled-88213', 'unpaid-88231', 'team', 'lexical-only']);
    expect(fused[0].fused).toBeCloseTo(VECTOR_WEIGHT * 0.66 + (1 - VECTOR_WEIGHT) * (11.45 / 20), 12);
    expect(fused[1].fused).toBeCloseTo(VECTOR_WEIGHT * 0.69 + (1 - VECTOR_WEIGHT) * (3.45 / 20), 12);
    expect(fused[2].fused).toBeCloseTo(VECTOR_WEIGHT * 0.3, 12);
    // A score above the ideal (a term repeated in a short memory) counts as a full match, no more.
    expect(rankHybrid(candidates, context(10))[0].fused).toBeCloseTo(VECTOR_WEIGHT * 0.66 + (1 - VECTOR_WEIGHT), 12);
  });

  it('hybrid: a match on a word most memories hold weighs little, unlike BM25 / the best hit', () => {
    // Only the asker's name matched (low IDF against a query of rare, unmatched words): the
    // memory with the better cosine must stay first.
    const nameOnly: Candidate[] = [
      { id: 'about-it', vector: 0.6, vectorRank: 1 },
      { id: 'says-name', vector: 0.3, vectorRank: 2, lexical: 0.7, lexicalRank: 1 },
    ];
    expect(rankHybrid(nameOnly, context(14)).map((f) => f.id)).toEqual(['about-it', 'says-name']);
    expect(rankHybridByMax(nameOnly, context(14)).map((f) => f.id)).toEqual(['says-name', 'about-it']);
  });

  it('hybrid with no lexical match ranks by cosine alone', () => {
    const vectorOnly = candidates.map(({ id, vector, vectorRank }) => ({ id, vector, vectorRank }));
    expect(rankHybrid(vectorOnly, context(0)).map((f) => f.id)).toEqual(['unpaid-88231', 'settled-88213', 'team', 'lexical-only']);
  });

  it('rank fusion, which ignores score gaps, puts the wrong invoice first here', () => {
    expect(rankRrf(candidates, context(20))[0].id).toBe('unpaid-88231'); // ranks 1 + 2 beat ranks 2 + 1 on the tie-break
  });

  it('vector and lexical rankings keep only their own candidates, in their order', () => {
    expect(rankVector(candidates, context(20)).map((f) => [f.id, f.fused])).toEqual([
      ['unpaid-88231', 0.69], ['settled-88213', 0.66], ['team', 0.3],
    ]);
    expect(rankLexical(candidates, context(20)).map((f) => f.id)).toEqual(['settled-88213', 'unpaid-88231', 'lexical-only']);
  });
});
