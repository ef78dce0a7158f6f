import { describe, expect, it } from 'vitest';
import { averageRanks, pearson, recallAt, reciprocalRank, spearman } from '../../bench/eval/metrics.js';

describe('evaluation metrics', () => {
  it('recall@k counts relevant ids in the top k, out of at most k', () => {
    expect(recallAt(['a', 'b', 'c'], ['b'], 1)).toBe(0);
    expect(recallAt(['a', 'b', 'c'], ['b'], 5)).toBe(1);
    expect(recallAt(['a', 'b', 'c'], ['a', 'c', 'z'], 1)).toBe(1);
    expect(recallAt(['a', 'b', 'c'], ['a', 'c', 'z'], 5)).toBeCloseTo(2 / 3, 12);
  });

  it('reciprocal rank is 1 / rank of the first relevant id, 0 if none', () => {
    expect(reciprocalRank(['a', 'b', 'c'], ['c', 'b'])).toBe(0.5);
    expect(reciprocalRank(['a'], ['z'])).toBe(0);
  });

  it('Spearman averages tied ranks and is Pearson on ranks', () => {
    expect(averageRanks([10, 20, 20, 5])).toEqual([2, 3.5, 3.5, 1]);
    expect(spearman([1, 2, 3, 4], [10, 20, 30, 1000])).toBeCloseTo(1, 12);
    expect(spearman([1, 2, 3, 4], [4, 3, 2, 1])).toBeCloseTo(-1, 12);
    expect(pearson([1, 2, 3], [2, 4, 7])).toBeCloseTo(0.9933992677987828, 12);
  });
});
