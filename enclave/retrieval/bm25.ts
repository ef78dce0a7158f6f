import { lexicalTerms } from './lexical-terms.js';

export interface LexicalHit {
  id: string;
  /** BM25 score; > 0, higher is better, comparable only within one query. */
  score: number;
}

/**
 * Okapi BM25 parameters, the usual defaults (Robertson & Zaragoza 2009): k1 saturates repeated
 * terms, b normalises for document length. Memories are short, so neither is critical.
 */
export const BM25_K1 = 1.2;
export const BM25_B = 0.75;

/**
 * One tenant's BM25 index over memory contents: an inverted index (term -> memory -> count)
 * kept in step with adds and deletes, so a deleted memory stops matching at once.
 */
export class Bm25Index {
  private readonly postings = new Map<string, Map<string, number>>();
  /** Each memory's term counts (to undo its postings on removal) and its length in terms. */
  private readonly documents = new Map<string, { counts: Map<string, number>; length: number; order: number }>();
  private totalLength = 0;
  /** Insertion counter: equal scores rank the older memory first, so results are stable. */
  private added = 0;

  get size(): number {
    return this.documents.size;
  }

  add(id: string, text: string): void {
    if (this.documents.has(id)) return;
    const counts = new Map<string, number>();
    const terms = lexicalTerms(text);
    for (const term of terms) counts.set(term, (counts.get(term) ?? 0) + 1);
    this.documents.set(id, { counts, length: terms.length, order: this.added++ });
    this.totalLength += terms.length;
    for (const [term, count] of counts) {
      let posting = this.postings.get(term);
      if (!posting) this.postings.set(term, (posting = new Map()));
      posting.set(id, count);
    }
  }

  remove(id: string): void {
    const document = this.documents.get(id);
    if (!document) return;
    this.documents.delete(id);
    this.totalLength -= document.length;
    for (const term of document.counts.keys()) {
      const posting = this.postings.get(term)!;
      posting.delete(id);
      if (posting.size === 0) this.postings.delete(term);
    }
  }

  /** The `k` best-scoring memories for the query's terms (each distinct term counted once). */
  search(query: string, k: number): LexicalHit[] {
    const n = this.documents.size;
    if (n === 0 || k <= 0) return [];
    const averageLength = this.totalLength / n;
    const scores = new Map<string, number>();
    for (const term of new Set(lexicalTerms(query))) {
      const posting = this.postings.get(term);
      if (!posting) continue;
      // Lucene's IDF variant: always positive, so a term in most memories still counts a little.
      const idf = Math.log(1 + (n - posting.size + 0.5) / (posting.size + 0.5));
      for (const [id, tf] of posting) {
        const { length } = this.documents.get(id)!;
        const norm = tf + BM25_K1 * (1 - BM25_B + (BM25_B * length) / averageLength);
        scores.set(id, (scores.get(id) ?? 0) + (idf * tf * (BM25_K1 + 1)) / norm);
      }
    }
    return [...scores]
      .map(([id, score]) => ({ id, score }))
      .sort((x, y) => y.score - x.score || this.documents.get(x.id)!.order - this.documents.get(y.id)!.order)
      .slice(0, k);
  }
}
