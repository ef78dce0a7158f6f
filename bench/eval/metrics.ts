/** Retrieval and similarity metrics for the evaluation; pure functions, unit-tested. */

/**
 * Recall at k of one ranking: the share of the relevant ids found in its first k, out of the
 * most that k results could hold (so a question with three relevant memories scores 1 at
 * k = 1 when the first result is one of them).
 */
export function recallAt(ranking: readonly string[], relevant: readonly string[], k: number): number {
  const top = new Set(ranking.slice(0, k));
  const found = relevant.filter((id) => top.has(id)).length;
  return found / Math.min(relevant.length, k);
}

/** 1 / rank of the first relevant id (ranks from 1), or 0 when none is in the ranking. */
export function reciprocalRank(ranking: readonly string[], relevant: readonly string[]): number {
  const index = ranking.findIndex((id) => relevant.includes(id));
  return index < 0 ? 0 : 1 / (index + 1);
}

/** Ranks from 1, ties sharing their average rank (as Spearman's rho requires). */
export function averageRanks(values: readonly number[]): number[] {
  const order = values.map((value, index) => ({ value, index })).sort((a, b) => a.value - b.value);
  const ranks = new Array<number>(values.length);
  for (let start = 0; start < order.length; ) {
    let end = start;
    while (end + 1 < order.length && order[end + 1].value === order[start].value) end++;
    const rank = (start + end) / 2 + 1;
    for (let i = start; i <= end; i++) ranks[order[i].index] = rank;
    start = end + 1;
  }
  return ranks;
}

export function pearson(x: readonly number[], y: readonly number[]): number {
  const n = x.length;
  const mx = x.reduce((s, v) => s + v, 0) / n;
  const my = y.reduce((s, v) => s + v, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) ** 2;
    syy += (y[i] - my) ** 2;
  }
  return sxy / Math.sqrt(sxx * syy);
}

/** Spearman's rank correlation: Pearson's r of the (tie-averaged) ranks. */
export function spearman(x: readonly number[], y: readonly number[]): number {
  return pearson(averageRanks(x), averageRanks(y));
}
