import type { RankedHit } from './tenant-search.js';

/**
 * In a conversation the answer is often the turn next to the one that matches the question
 * best: the question names its subject in the turn that asks ("How did the library fundraiser
 * go?") and the reply holds the answer in other words ("We raised enough to fix the roof").
 * So each of the first NEIGHBOUR_LENDERS hits lends NEIGHBOUR_WEIGHT of its score to the
 * turns of its session added just before and after it (memory/add-order.ts), and
 * FAR_NEIGHBOUR_WEIGHT to the turns two away, which rank higher but never above the hit that lent.
 *
 * Chosen on the tuning halves of LoCoMo and of the synthetic conversations only, recall@10
 * LoCoMo / synthetic (0.636 / 0.790 before, without lending, at VECTOR_WEIGHT 0.5). At
 * VECTOR_WEIGHT 0.4, weight 0.3 from the first 3, 5, 10 hits: 0.705 / 0.812, 0.711 / 0.817,
 * (10 at 0.4: 0.715 / 0.821); weight 0.4 and 0.5 from the first 5: 0.712 / 0.812, 0.715 /
 * 0.812, but the synthetic set's multi-hop questions fell (0.396 -> 0.354), which they do not
 * at 0.3. Lending without the cap (the neighbour's own score plus the loan, an earlier
 * experiment of the eval) did as well on LoCoMo but took the synthetic set's MRR from 0.648
 * to 0.559, the neighbour often overtaking the better hit; sending no more than 2, 3 or 4
 * turns of one session into the first results (for multi-hop questions, whose evidence is in
 * several sessions) did worse on both sets.
 */
export const NEIGHBOUR_WEIGHT = 0.3;
/**
 * What a hit lends the turns two before and two after it in its session (an answer one turn
 * on from the question, past an aside). Tuning halves, recall@10 LoCoMo / synthetic: 0 0.732 /
 * 0.826, 0.1 0.744 / 0.824, 0.15 0.750 / 0.824, 0.2 0.749 / 0.824 (the synthetic set's
 * multi-hop questions 0.396 -> 0.375 at each, its MRR 0.661 -> 0.663).
 */
export const FAR_NEIGHBOUR_WEIGHT = 0.15;
export const NEIGHBOUR_LENDERS = 5;
/** A neighbour ranks just under the hit that lent: its score is at most this share of the lender's. */
const BELOW_LENDER = 0.999;

export interface NeighbourSource {
  /**
   * The memories of `id`'s session added just before and after it (`near`) and two before
   * and two after (`far`) that the query may return (held, in scope, through its filters).
   */
  beside(id: string): { near: readonly string[]; far: readonly string[] };
  /** Memories the ranking does not list, scored as it scores its candidates (any order). */
  unlisted(ids: readonly string[]): RankedHit[];
}

/**
 * The ranking with each neighbour of its first NEIGHBOUR_LENDERS raised to
 * min(own + NEIGHBOUR_WEIGHT x lender, BELOW_LENDER x lender) (FAR_NEIGHBOUR_WEIGHT for
 * the turns two away) when that is higher than its
 * own score, best first. `ranked`: the ranking's first hits, best first; a neighbour it does
 * not list is scored by `unlisted` and joins it, so the first hits come out the same however
 * many of the ranking were given (a query's top_k, the search worker's share).
 */
export function lendToNeighbours(ranked: readonly RankedHit[], source: NeighbourSource): RankedHit[] {
  const lenders: RankedHit[] = [];
  for (const hit of ranked.slice(0, NEIGHBOUR_LENDERS)) {
    if (hit.fused <= 0) break;
    lenders.push(hit);
  }
  const sides = lenders.map((lender) => source.beside(lender.id));
  const byId = new Map(ranked.map((hit) => [hit.id, hit]));
  const missing = [...new Set(sides.flatMap(({ near, far }) => [...near, ...far]))].filter((id) => !byId.has(id));
  if (missing.length > 0) for (const hit of source.unlisted(missing)) byId.set(hit.id, hit);
  const raised = new Map<string, number>();
  const lend = (lender: RankedHit, id: string, weight: number) => {
    const hit = byId.get(id)!;
    const lent = Math.min(hit.fused + weight * lender.fused, BELOW_LENDER * lender.fused);
    if (lent > (raised.get(id) ?? hit.fused)) raised.set(id, lent);
  };
  lenders.forEach((lender, i) => {
    for (const id of sides[i].near) lend(lender, id, NEIGHBOUR_WEIGHT);
    for (const id of sides[i].far) lend(lender, id, FAR_NEIGHBOUR_WEIGHT);
  });
  if (raised.size === 0) return [...ranked];
  // Stable: equal scores keep the ranking's order, neighbours it did not list after it.
  return [...byId.values()]
    .map((hit) => { const fused = raised.get(hit.id); return fused === undefined ? hit : { ...hit, fused }; })
    .sort((x, y) => y.fused - x.fused);
}
