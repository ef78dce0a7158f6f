/**
 * Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009): each ranking gives a
 * result 1 / (k + rank), rank counted from 1, and a result's fused score is the sum over the
 * rankings it appears in. It needs no score calibration between rankings (cosine similarity
 * and BM25 live on different scales) and k = 60 is the paper's value, used here untuned: it
 * keeps one ranking's top result from outweighing broad agreement between the two.
 */
export const RRF_K = 60;

export interface FusedResult {
  id: string;
  /** Sum of 1 / (k + rank) over the rankings that contain the id. */
  score: number;
  /** 1-based rank of the id in each input ranking, undefined where it is absent. */
  ranks: (number | undefined)[];
}

/**
 * Fuses rankings (each a list of ids, best first) into one, best first. Ties are broken by
 * the best rank the id reached in the earlier rankings, then by id, so the order is stable.
 */
export function reciprocalRankFusion(rankings: readonly (readonly string[])[], k = RRF_K): FusedResult[] {
  const fused = new Map<string, FusedResult>();
  rankings.forEach((ranking, list) => {
    ranking.forEach((id, index) => {
      let entry = fused.get(id);
      if (!entry) fused.set(id, (entry = { id, score: 0, ranks: new Array(rankings.length).fill(undefined) }));
      if (entry.ranks[list] !== undefined) return; // a ranking lists an id once; ignore repeats
      entry.ranks[list] = index + 1;
      entry.score += 1 / (k + index + 1);
    });
  });
  return [...fused.values()].sort((x, y) => y.score - x.score || compareRanks(x.ranks, y.ranks) || (x.id < y.id ? -1 : 1));
}

function compareRanks(a: (number | undefined)[], b: (number | undefined)[]): number {
  for (let i = 0; i < a.length; i++) {
    const x = a[i] ?? Infinity;
    const y = b[i] ?? Infinity;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}
