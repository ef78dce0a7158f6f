/**
 * A tenant's lexical (BM25) index, whatever its form: SmallBm25 scans term numbers (small
 * tenants), Bm25Index walks an inverted index with MaxScore pruning (large ones, and the
 * search worker's copies), TieredLexical moves from the first to the second. All of them
 * give exactly the scores of textbook BM25 (test/unit/lexical-index.test.ts runs the same
 * contract against each). This module imports none of them.
 */

/** What one search did: filled in when asked for (tests and benchmarks check the pruning with it). */
export interface SearchCost {
  /** Distinct query terms used (at most MAX_QUERY_TERMS). */
  terms: number;
  /** Postings read, in total over all terms. */
  postingsRead: number;
  /** Postings the terms hold in total: what an exhaustive search would read. */
  postingsHeld: number;
  /**
   * What a memory of average length holding each distinct query term once would score: the sum
   * of the terms' IDF, a term no memory holds counting as df 0 (it is rare, so a query whose
   * words are missing here is mostly unanswered by words). Hybrid ranking scales BM25 by it.
   */
  idealScore?: number;
}

export interface LexicalHit {
  id: string;
  /** BM25 score; > 0, higher is better, comparable only within one query. */
  score: number;
}

/** A search's top hits, and the scores of the other memories it was asked about (searchWith). */
export interface LexicalResult {
  hits: LexicalHit[];
  /** The BM25 score of each memory named in `asked`, in that order; 0 where no term matched. */
  askedScores: Float64Array;
}

export interface LexicalIndex {
  /** Memories held. */
  readonly size: number;
  /** Distinct terms the memories hold: what the index costs beyond the memories themselves. */
  readonly distinctTerms: number;
  /** Whether a memory held holds `term` (a term of lexicalTerms()). */
  holds(term: string): boolean;
  add(id: string, text: string): void;
  /** add() given the text's terms (lexicalTerms of it), when they were worked out already. */
  addTerms(id: string, terms: readonly string[]): void;
  /** Takes a memory out; `text` is what it was added with. Removing one not held does nothing. */
  remove(id: string, text: string): void;
  /** Gives back what the index holds outside itself (a shared dictionary's terms); it is not used after. */
  dispose(): void;
  /**
   * The `k` best-scoring memories for the query's terms (each distinct term counted once, at
   * most MAX_QUERY_TERMS of them, the rarest); ties keep insertion order. With `accept`, only
   * memories it accepts are ranked (a filtered search).
   */
  search(query: string, k: number, cost?: SearchCost, accept?: (id: string) => boolean): LexicalHit[];
  /**
   * search(), and the scores of the memories `asked` names, whether or not they made the top
   * `k` (0 for one that matches no term or is not held): hybrid ranking gives the memories the
   * vector search found their lexical evidence too. With `k` 0 only those scores are worked out.
   */
  searchWith(query: string, k: number, asked: readonly string[], cost?: SearchCost, accept?: (id: string) => boolean): LexicalResult;
}
