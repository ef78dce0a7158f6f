import { BM25_B, BM25_K1, MAX_QUERY_TERMS, bm25Idf } from './bm25.js';
import type { LexicalHit, LexicalIndex, LexicalResult, SearchCost } from './lexical-index.js';
import { lexicalTerms } from './lexical-terms.js';
import { TermDictionary } from './term-dictionary.js';

/** Slot + 1 of each term the running search wants, by term number; 0 elsewhere between searches. */
let slotOf = new Int32Array(1024);

/**
 * BM25 for a small tenant without an inverted index: each memory's terms, as numbers of a
 * TermDictionary shared with other tenants, in one Int32Array, and a search that scans them all. For a few thousand short
 * memories the scan costs microseconds, and the tenant costs a few bytes a term instead of
 * a posting list per distinct word (bench/scale.ts measures both). Scores are exactly
 * Bm25Index's; larger tenants move to it (TieredLexical).
 *
 * The index holds each of its distinct terms once in the dictionary, for as long as a memory
 * here holds it (`df`), so the dictionary forgets a word no memory of any tenant uses.
 */
export class SmallBm25 implements LexicalIndex {
  private ids: string[] = [];
  /** Memory i's terms are data[starts[i] .. starts[i + 1]). */
  private data = new Int32Array(64);
  private starts: number[] = [0];
  /** Term number -> memories here holding it (the document frequency); its keys are the terms held. */
  private readonly df = new Map<number, number>();

  constructor(private readonly dictionary: TermDictionary = new TermDictionary()) {}

  get size(): number {
    return this.ids.length;
  }

  /** Distinct terms the memories here hold. */
  get distinctTerms(): number {
    return this.df.size;
  }

  /** Whether a memory here holds `term`. */
  holds(term: string): boolean {
    const n = this.dictionary.lookup(term);
    return n !== undefined && this.df.has(n);
  }

  add(id: string, text: string): void {
    this.addTerms(id, lexicalTerms(text));
  }

  /**
   * Adds a memory given its lexical terms. A term the caller already holds in the dictionary
   * (memory/change-admission.ts numbers an add's terms before logging it) is only counted here, so
   * applying a logged add adds no entry to the dictionary's map.
   */
  addTerms(id: string, terms: readonly string[]): void {
    if (this.ids.includes(id)) return;
    const numbers = new Array<number>(terms.length);
    const mine = new Map<string, number>();
    for (let i = 0; i < terms.length; i++) {
      let n = mine.get(terms[i]);
      if (n === undefined) mine.set(terms[i], (n = this.take(terms[i])));
      numbers[i] = n;
    }
    const end = this.starts[this.starts.length - 1];
    if (end + numbers.length > this.data.length) {
      const bigger = new Int32Array(Math.max(end + numbers.length, Math.ceil(this.data.length * 1.5)));
      bigger.set(this.data.subarray(0, end));
      this.data = bigger;
    }
    this.data.set(numbers, end);
    this.ids.push(id);
    this.starts.push(end + numbers.length);
  }

  /** One more memory holds `term`: its number, held in the dictionary while any memory here holds it. */
  private take(term: string): number {
    const known = this.dictionary.lookup(term);
    const df = known === undefined ? undefined : this.df.get(known);
    if (df !== undefined) {
      this.df.set(known!, df + 1);
      return known!;
    }
    const n = this.dictionary.acquire(term);
    this.df.set(n, 1);
    return n;
  }

  /** Removes a memory (its text is not needed here; the parameter keeps the indexes interchangeable). */
  remove(id: string, _text?: string): void {
    const i = this.ids.indexOf(id);
    if (i < 0) return;
    const [from, to] = [this.starts[i], this.starts[i + 1]];
    for (const n of new Set(this.data.subarray(from, to))) {
      const df = this.df.get(n)! - 1;
      if (df > 0) {
        this.df.set(n, df);
      } else {
        this.df.delete(n);
        this.dictionary.release(n);
      }
    }
    const end = this.starts[this.starts.length - 1];
    this.data.copyWithin(from, to, end);
    this.ids.splice(i, 1);
    this.starts.splice(i + 1, 1);
    for (let j = i + 1; j < this.starts.length; j++) this.starts[j] -= to - from;
  }

  /** Each memory with its terms, in insertion order (for moving to an inverted index). */
  *entries(): Generator<[string, string[]]> {
    for (let i = 0; i < this.ids.length; i++) {
      yield [this.ids[i], Array.from(this.data.subarray(this.starts[i], this.starts[i + 1]), (n) => this.dictionary.term(n))];
    }
  }

  /** Gives back every term held (the index is being replaced, or dropped). */
  dispose(): void {
    for (const n of this.df.keys()) this.dictionary.release(n);
    this.df.clear();
    this.ids = [];
    this.data = new Int32Array(0);
    this.starts = [0];
  }

  search(query: string, k: number, cost?: SearchCost, accept?: (id: string) => boolean): LexicalHit[] {
    return this.searchWith(query, k, [], cost, accept).hits;
  }

  /** LexicalIndex.searchWith. */
  searchWith(query: string, k: number, asked: readonly string[], cost?: SearchCost, accept?: (id: string) => boolean): LexicalResult {
    const n = this.ids.length;
    const scores = new Float64Array(asked.length);
    if (n === 0 || (k <= 0 && asked.length === 0)) return { hits: [], askedScores: scores };
    const wanted = new Map<number, number>(); // term number -> slot
    const distinct = new Set(lexicalTerms(query));
    for (const term of distinct) {
      const number = this.dictionary.lookup(term);
      if (number !== undefined && this.df.has(number) && !wanted.has(number)) wanted.set(number, wanted.size);
    }
    if (wanted.size === 0) {
      if (cost) Object.assign(cost, { terms: 0, postingsRead: 0, postingsHeld: 0, idealScore: distinct.size * bm25Idf(n, 0) });
      return { hits: [], askedScores: scores };
    }
    // One pass: each memory's count of each query term, and each term's document frequency.
    // The query's terms are marked in a table indexed by term number, so each term of each
    // memory costs an array read rather than a map lookup (the scan is most of the search).
    const slots = wanted.size;
    const tf = new Uint16Array(n * slots);
    const df = new Uint32Array(slots);
    let totalLength = 0;
    const bound = this.dictionary.bound;
    if (slotOf.length < bound) slotOf = new Int32Array(Math.max(bound, slotOf.length * 2));
    for (const [number, slot] of wanted) slotOf[number] = slot + 1;
    try {
      const { data, starts } = this;
      for (let i = 0; i < n; i++) {
        const [from, to] = [starts[i], starts[i + 1]];
        totalLength += to - from;
        for (let at = from; at < to; at++) {
          const slot = slotOf[data[at]] - 1;
          if (slot < 0) continue;
          if (tf[i * slots + slot]++ === 0) df[slot]++;
        }
      }
    } finally {
      for (const number of wanted.keys()) slotOf[number] = 0;
    }
    const averageLength = totalLength / n;
    // Lucene's IDF, as Bm25Index; the same bound on distinct terms, the rarest kept.
    const idf = Array.from(df, (d) => (d === 0 ? 0 : bm25Idf(n, d)));
    const used = [...idf.keys()].filter((s) => df[s] > 0).sort((a, b) => idf[b] - idf[a]).slice(0, MAX_QUERY_TERMS);
    // Terms no memory here holds (known to the dictionary through other tenants or not at all) count as df 0.
    const idealScore = Array.from(df, (d) => bm25Idf(n, d)).reduce((sum, x) => sum + x, 0) + (distinct.size - slots) * bm25Idf(n, 0);
    if (cost) Object.assign(cost, { terms: used.length, postingsRead: totalLength, postingsHeld: totalLength, idealScore });
    const hits: LexicalHit[] = [];
    const askedIds = asked.length > 0 ? new Set(asked) : undefined;
    const scoreById = new Map<string, number>();
    for (let i = 0; i < n; i++) {
      let score = 0;
      const norm = BM25_K1 * (1 - BM25_B + (BM25_B * (this.starts[i + 1] - this.starts[i])) / averageLength);
      for (const s of used) {
        const count = tf[i * slots + s];
        if (count > 0) score += (idf[s] * count * (BM25_K1 + 1)) / (count + norm);
      }
      if (score === 0) continue;
      if (askedIds?.has(this.ids[i])) scoreById.set(this.ids[i], score);
      if (!accept || accept(this.ids[i])) hits.push({ id: this.ids[i], score });
    }
    asked.forEach((id, j) => { scores[j] = scoreById.get(id) ?? 0; });
    // Stable: equal scores keep insertion order, the older memory first.
    return { hits: k > 0 ? hits.sort((x, y) => y.score - x.score).slice(0, k) : [], askedScores: scores };
  }
}
