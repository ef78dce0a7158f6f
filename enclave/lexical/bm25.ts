import { lexicalTerms } from './lexical-terms.js';
import type { LexicalHit, LexicalIndex, LexicalResult, SearchCost } from './lexical-index.js';

/** Lucene's IDF variant: always positive, so a term in most memories still counts a little. */
export function bm25Idf(memories: number, df: number): number {
  return Math.log(1 + (memories - df + 0.5) / (df + 0.5));
}

/** A hit of searchKeyed(): with the key its memory was added under (-1 for none). */
export interface KeyedHit extends LexicalHit {
  key: number;
}

/**
 * Okapi BM25 parameters (Robertson & Zaragoza 2009): k1 saturates repeated terms, b normalises
 * for document length. k1 is the usual default. b was the usual 0.75 until issue 36: a long
 * turn of a conversation is long because it says more, not because it repeats itself, and
 * full length normalisation pushed the long turns that hold an answer below short reactions
 * that share one word with the question. On the tuning halves only (with the API's hybrid
 * ranking and neighbouring turns), recall@10 LoCoMo / synthetic conversations: b 0.9 0.708 /
 * 0.814, 0.75 0.711 / 0.817, 0.5 0.727 / 0.821, 0.3 0.732 / 0.826, 0.2 0.731 / 0.826, 0.1
 * 0.730 / 0.821, 0 0.732 / 0.821; the synthetic set's MRR 0.636 at 0.75, 0.661 at 0.3. k1 0.9
 * and 1.5 at b 0.3: 0.729 / 0.826 and 0.728 / 0.826.
 */
export const BM25_K1 = 1.2;
export const BM25_B = 0.3;

/**
 * A query uses at most this many distinct terms, the rarest (highest IDF) first: a long
 * question full of words cannot make a search walk most of a large tenant, and the common
 * words it drops carry almost no score.
 */
export const MAX_QUERY_TERMS = 32;

/**
 * One term's postings: documents in increasing number (= insertion order), with term counts.
 * Plain arrays of small integers, not typed arrays: most postings hold a few entries (many
 * small tenants), and a typed array costs about a hundred bytes before its first element.
 */
interface Posting {
  docs: number[];
  /**
   * Per entry, the term's count in the document and the document's length, in one small
   * integer (pack()). A search reads the length it normalises by from the posting it is
   * reading anyway instead of from a table by document number: on a large tenant that table
   * read was a cache miss for nearly every posting read.
   */
  packed: number[];
  /** Entries used in docs/packed, removed documents included until the next compaction. */
  length: number;
  /** Live documents holding the term (the document frequency). */
  df: number;
  maxTf: number;
  /** The shortest document holding the term: with maxTf, the term's best possible score. */
  minLength: number;
  /**
   * Per block of BLOCK entries (entries b*BLOCK ..), its largest count and shortest document,
   * as pairs [maxTf, minLength, maxTf, minLength, ...]: the block's best possible score, which
   * lets a search skip ranges of documents that cannot reach its top k. Made once the
   * posting passes one block (until then the posting's own maxTf and minLength are its block).
   */
  blocks?: number[];
}

/**
 * A packed entry is count << LENGTH_BITS | length: both below 2^15, so it stays a small
 * integer (V8's Smi: 31 bits). A length that does not fit is stored as LENGTH_MASK and read
 * from the table by document (not reached under the API's limits: a content of at most
 * 32 KiB characters has fewer terms). Counts are capped at COUNT_MAX.
 */
const LENGTH_BITS = 15;
const LENGTH_MASK = (1 << LENGTH_BITS) - 1;
const COUNT_MAX = (1 << (30 - LENGTH_BITS)) - 1; // count << LENGTH_BITS stays below 2^30

function pack(tf: number, length: number): number {
  return (tf << LENGTH_BITS) | Math.min(length, LENGTH_MASK);
}

/** Entries per block of a posting list (block-max bounds). */
const BLOCK = 64;
const BLOCK_SHIFT = 6;
/** Relative rounding error allowed for when comparing a sum of bounds with a score. */
const ROUNDING = 1e-12;
/** A search's window over document numbers spans at least this many (fewer windows, looser bounds). */
const MIN_WINDOW = 256;

/**
 * One tenant's BM25 index over memory contents, in compact arrays: per term, the numbers of
 * the documents holding it, and how often with the document's length (two small integers a
 * posting, no object per posting). A removed document's postings count 0 at once (it stops
 * matching) and are dropped at the next compaction. Search is top-k with block-max MaxScore
 * pruning: terms whose best possible contribution cannot lift a document into the top k are
 * only looked up for documents the other terms already rank high, and ranges of documents
 * whose blocks cannot reach it are skipped, so a common word does not walk its whole posting
 * list, and no list of all matches is built or sorted.
 */
export class Bm25Index implements LexicalIndex {
  /** Document number -> memory id; '' once removed. */
  private ids: string[] = [];
  private lengths = new Uint32Array(64);
  /** Document number -> the caller's key for it (-1 for none): see addTerms. */
  private keys = new Int32Array(64).fill(-1);
  /** Key -> document number of the live memory added under it; -1 for none. */
  private docsByKey = new Int32Array(0);
  private readonly numbers = new Map<string, number>();
  private readonly postings = new Map<string, Posting>();
  private totalLength = 0;
  private dead = 0;

  get size(): number {
    return this.numbers.size;
  }

  /** Distinct terms the live memories hold (a posting each). */
  get distinctTerms(): number {
    return this.postings.size;
  }

  /** Whether a live memory holds `term`. */
  holds(term: string): boolean {
    return this.postings.has(term);
  }

  add(id: string, text: string, key = -1): void {
    this.addTerms(id, lexicalTerms(text), key);
  }

  /**
   * Adds a memory given its lexical terms (lexicalTerms of its content). `key`, a small
   * integer no other live memory holds, names it in searchKeyed() without a lookup by id:
   * the search worker's copy keys each memory by its label in the vector graph.
   */
  addTerms(id: string, terms: readonly string[], key = -1): void {
    if (this.numbers.has(id)) return;
    const doc = this.ids.length;
    if (doc >= this.lengths.length) {
      this.lengths = grow(this.lengths, doc + 1);
      this.keys = growFilled(this.keys, this.lengths.length);
    }
    this.ids.push(id);
    this.lengths[doc] = terms.length;
    this.keys[doc] = key;
    if (key >= 0) {
      if (key >= this.docsByKey.length) this.docsByKey = growFilled(this.docsByKey, key + 1);
      this.docsByKey[key] = doc;
    }
    this.numbers.set(id, doc);
    this.totalLength += terms.length;
    for (const [term, tf] of counts(terms)) {
      let posting = this.postings.get(term);
      if (!posting) this.postings.set(term, (posting = { docs: [], packed: [], length: 0, df: 0, maxTf: 0, minLength: Infinity }));
      const count = Math.min(tf, COUNT_MAX);
      noteBlock(posting, posting.length, count, terms.length);
      posting.docs.push(doc);
      posting.packed.push(pack(count, terms.length));
      posting.length++;
      posting.df++;
      posting.maxTf = Math.max(posting.maxTf, count);
      posting.minLength = Math.min(posting.minLength, terms.length);
    }
  }

  /** Removes a memory; `text` is its content, whose terms name the postings to update. */
  /** Holds nothing outside itself (no shared dictionary): nothing to give back. */
  dispose(): void {}

  remove(id: string, text: string): void {
    const doc = this.numbers.get(id);
    if (doc === undefined) return;
    this.numbers.delete(id);
    this.ids[doc] = '';
    const key = this.keys[doc];
    if (key >= 0 && this.docsByKey[key] === doc) this.docsByKey[key] = -1;
    this.totalLength -= this.lengths[doc];
    this.dead++;
    for (const term of counts(lexicalTerms(text)).keys()) {
      const posting = this.postings.get(term);
      if (!posting) continue;
      // The entry stays until the next compaction with a count of 0, so it adds nothing to
      // any score, and a search need not look the document up to know it is gone.
      const at = seek(posting.docs, posting.length, 0, doc);
      if (at < posting.length && posting.docs[at] === doc) posting.packed[at] &= LENGTH_MASK;
      if (--posting.df === 0) this.postings.delete(term);
    }
    if (this.dead > 1024 && this.dead > this.numbers.size) this.compact();
  }

  /**
   * The `k` best-scoring memories for the query's terms (each distinct term counted once).
   * With `accept`, only memories it accepts are ranked (a filtered search).
   */
  search(query: string, k: number, cost?: SearchCost, accept?: (id: string) => boolean): LexicalHit[] {
    return this.searchWith(query, k, [], cost, accept).hits;
  }

  /** LexicalIndex.searchWith: each memory asked about costs a binary search per term. */
  searchWith(query: string, k: number, asked: readonly string[], cost?: SearchCost, accept?: (id: string) => boolean): LexicalResult {
    const askedDocs: Asked[] = [];
    asked.forEach((id, j) => {
      const doc = this.numbers.get(id);
      if (doc !== undefined) askedDocs.push({ doc, j });
    });
    const scores = new Float64Array(asked.length);
    const { ids } = this;
    return { hits: this.searchDocs(query, k, askedDocs, scores, cost, accept).map(({ doc, score }) => ({ id: ids[doc], score })), askedScores: scores };
  }

  /**
   * searchWith() with `askedKeys` naming memories by the keys they were added under (addTerms),
   * and each hit carrying its key: no lookup by id string on either side.
   */
  searchKeyed(query: string, k: number, askedKeys: readonly number[], cost?: SearchCost): { hits: KeyedHit[]; askedScores: Float64Array } {
    const askedDocs: Asked[] = [];
    const { docsByKey } = this;
    askedKeys.forEach((key, j) => {
      const doc = key >= 0 && key < docsByKey.length ? docsByKey[key] : -1;
      if (doc >= 0) askedDocs.push({ doc, j });
    });
    const scores = new Float64Array(askedKeys.length);
    const { ids, keys } = this;
    return { hits: this.searchDocs(query, k, askedDocs, scores, cost).map(({ doc, score }) => ({ id: ids[doc], key: keys[doc], score })), askedScores: scores };
  }

  /**
   * The `k` best documents for the query, and into `scores[j]` the score of each document
   * `asked` names (live ones only).
   */
  private searchDocs(query: string, k: number, asked: Asked[], scores: Float64Array, cost?: SearchCost, accept?: (id: string) => boolean): Array<{ doc: number; score: number }> {
    const n = this.numbers.size;
    if (n === 0 || (k <= 0 && asked.length === 0)) return [];
    const averageLength = this.totalLength / n;
    const terms: Array<{ posting: Posting; idf: number }> = [];
    let idealScore = 0;
    for (const term of new Set(lexicalTerms(query))) {
      const posting = this.postings.get(term);
      idealScore += bm25Idf(n, posting?.df ?? 0);
      if (posting) terms.push({ posting, idf: bm25Idf(n, posting.df) });
    }
    // The rarest terms carry the score; beyond the bound, the commonest are left out.
    terms.sort((x, y) => y.idf - x.idf);
    terms.length = Math.min(terms.length, MAX_QUERY_TERMS);
    if (cost) Object.assign(cost, { terms: terms.length, postingsRead: 0, postingsHeld: terms.reduce((sum, t) => sum + t.posting.length, 0), idealScore });
    if (terms.length === 0) return [];
    // BM25 of a term counted tf times in a document: weight * tf / (tf + norm(document length)).
    const m = terms.length;
    const weights = Float64Array.from(terms, (t) => t.idf * (BM25_K1 + 1));
    const normBase = BM25_K1 * (1 - BM25_B);
    const normScale = (BM25_K1 * BM25_B) / averageLength;
    const lengths = this.lengths;
    // Each term's postings through plain local arrays: the loops below are the hot loop of a
    // query on a large tenant.
    const docs = terms.map((t) => t.posting.docs);
    const packed = terms.map((t) => t.posting.packed);
    // The norm of a document from one of its packed entries.
    const normOf = (entry: number, doc: number): number =>
      normBase + normScale * ((entry & LENGTH_MASK) === LENGTH_MASK ? lengths[doc] : entry & LENGTH_MASK);
    const blocks = terms.map((t) => t.posting.blocks ?? [t.posting.maxTf, t.posting.minLength]);
    const ends = Int32Array.from(terms, (t) => t.posting.length);
    // The memories asked about, in document order: each term's postings are then swept once
    // for all of them (a gallop from the last one found) instead of searched from the start.
    asked.sort((x, y) => x.doc - y.doc);
    for (let i = 0; i < m; i++) {
      let at = 0;
      for (const { doc, j } of asked) {
        at = seek(docs[i], ends[i], at, doc);
        if (at >= ends[i]) break;
        if (docs[i][at] !== doc) continue;
        const entry = packed[i][at];
        const tf = entry >>> LENGTH_BITS;
        scores[j] += (weights[i] * tf) / (tf + normOf(entry, doc));
      }
    }
    if (k <= 0) return [];
    // Block-max MaxScore (Turtle & Flood 1995, with the block bounds of Ding & Suel 2011 and
    // the windows of Lucene's MaxScoreBulkScorer). Documents are taken in windows of numbers;
    // in each, a term's bound is the best score its blocks there allow. Terms whose bounds
    // together cannot beat the k-th best score so far are non-essential: they are looked up
    // only for documents the essential terms bring, and only while they could still lift one
    // into the top k. A window where every term is non-essential is skipped whole.
    const at = new Int32Array(m);
    const windowMax = new Float64Array(m);
    const order = Int32Array.from(terms, (_, i) => i); // the window's terms by increasing bound
    const below = new Float64Array(m); // below[j]: the most order[0..j] can add together
    const ids = this.ids;
    const top = new TopDocs(k);
    let threshold = top.threshold;
    // What a bound must pass to matter: the threshold, less rounding. A bound is a sum in
    // another order than the score's, so a memory tied with the k-th (as every memory of one
    // template is in a synthetic corpus) would otherwise look able to beat it by a last bit.
    let limit = threshold * (1 + ROUNDING);
    let read = 0;
    let essential = 0; // order[essential..] are the window's essential terms
    for (;;) {
      let start = Infinity;
      for (let i = 0; i < m; i++) if (at[i] < ends[i] && docs[i][at[i]] < start) start = docs[i][at[i]];
      if (start === Infinity) break;
      // The window ends with the current block of an essential term (as of the last window),
      // or of any term when those are done; not sooner than MIN_WINDOW documents on.
      let end = windowEnd(docs, ends, at, order, essential);
      if (end === Infinity) end = windowEnd(docs, ends, at, order, 0);
      end = Math.max(end, start + MIN_WINDOW);
      for (let i = 0; i < m; i++) windowMax[i] = at[i] < ends[i] && docs[i][at[i]] < end
        ? weights[i] * bestInBlocks(docs[i], blocks[i], ends[i], at[i], end, normBase, normScale)
        : 0;
      for (let j = 1; j < m; j++) {
        const i = order[j];
        let to = j;
        for (; to > 0 && windowMax[order[to - 1]] > windowMax[i]; to--) order[to] = order[to - 1];
        order[to] = i;
      }
      for (let j = 0; j < m; j++) below[j] = windowMax[order[j]] + (j > 0 ? below[j - 1] : 0);
      essential = 0;
      while (essential < m && below[essential] <= limit) essential++;
      for (;;) {
        let doc = end;
        for (let j = essential; j < m; j++) {
          const i = order[j];
          if (at[i] < ends[i] && docs[i][at[i]] < doc) doc = docs[i][at[i]];
        }
        if (doc === end) break;
        // Some essential term holds doc (it is the least of their current documents): the
        // first one read gives the norm.
        let norm = -1;
        let score = 0;
        for (let j = essential; j < m; j++) {
          const i = order[j];
          if (at[i] < ends[i] && docs[i][at[i]] === doc) {
            const entry = packed[i][at[i]];
            if (norm < 0) norm = normOf(entry, doc);
            const tf = entry >>> LENGTH_BITS;
            score += (weights[i] * tf) / (tf + norm);
            at[i]++;
            read++;
          }
        }
        // A live document an essential term holds scores above 0; a removed one's entries count 0.
        if (score === 0 || (accept && !accept(ids[doc]))) continue;
        // The non-essential terms, largest bound first, only while they could make a difference.
        for (let j = essential - 1; j >= 0 && score + below[j] > limit; j--) {
          const i = order[j];
          at[i] = seek(docs[i], ends[i], at[i], doc);
          read++;
          if (at[i] < ends[i] && docs[i][at[i]] === doc) {
            const tf = packed[i][at[i]] >>> LENGTH_BITS;
            score += (weights[i] * tf) / (tf + norm);
          }
        }
        if (score <= threshold) continue;
        // Summed again in one fixed order of terms, so equal scores are equal to the last bit
        // and ties go to the older memory, whatever order the window summed them in.
        score = 0;
        for (let i = 0; i < m; i++) {
          const p = at[i] > 0 && docs[i][at[i] - 1] === doc ? at[i] - 1 : at[i];
          if (p < ends[i] && docs[i][p] === doc) {
            const tf = packed[i][p] >>> LENGTH_BITS;
            score += (weights[i] * tf) / (tf + norm);
          }
        }
        if (top.offer(doc, score)) {
          threshold = top.threshold;
          limit = threshold * (1 + ROUNDING);
          while (essential < m && below[essential] <= limit) essential++;
        }
      }
      // Past the window: the terms not read through it skip the rest of it.
      for (let i = 0; i < m; i++) {
        if (at[i] < ends[i] && docs[i][at[i]] < end) {
          at[i] = seek(docs[i], ends[i], at[i], end);
          read++;
        }
      }
    }
    if (cost) cost.postingsRead = read;
    return top.sorted();
  }

  /** Drops removed documents from every posting and renumbers the rest (order kept). */
  private compact(): void {
    const renumber = new Int32Array(this.ids.length).fill(-1);
    const ids: string[] = [];
    const lengths = new Uint32Array(Math.max(64, this.numbers.size * 2));
    const keys = new Int32Array(lengths.length).fill(-1);
    this.ids.forEach((id, doc) => {
      if (id === '') return;
      renumber[doc] = ids.length;
      lengths[ids.length] = this.lengths[doc];
      const key = this.keys[doc];
      keys[ids.length] = key;
      if (key >= 0) this.docsByKey[key] = ids.length;
      this.numbers.set(id, ids.length);
      ids.push(id);
    });
    for (const posting of this.postings.values()) {
      let kept = 0;
      posting.maxTf = 0;
      posting.minLength = Infinity;
      posting.blocks = undefined;
      for (let i = 0; i < posting.length; i++) {
        const doc = renumber[posting.docs[i]];
        if (doc < 0) continue;
        const entry = posting.packed[i];
        const tf = entry >>> LENGTH_BITS;
        noteBlock(posting, kept, tf, lengths[doc]);
        posting.docs[kept] = doc;
        posting.packed[kept] = entry; // a document's length does not change
        posting.maxTf = Math.max(posting.maxTf, tf);
        posting.minLength = Math.min(posting.minLength, lengths[doc]);
        kept++;
      }
      posting.length = kept;
      posting.docs.length = kept;
      posting.packed.length = kept;
    }
    this.ids = ids;
    this.lengths = lengths;
    this.keys = keys;
    this.dead = 0;
  }
}

function counts(terms: readonly string[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const term of terms) out.set(term, (out.get(term) ?? 0) + 1);
  return out;
}

/** A document asked about in a search (`j`: its place in the caller's list). */
interface Asked {
  doc: number;
  j: number;
}

/** `array` in a new one of at least `needed` entries, the new ones -1. */
function growFilled(array: Int32Array<ArrayBuffer>, needed: number): Int32Array<ArrayBuffer> {
  const bigger = new Int32Array(Math.max(needed, array.length * 2)).fill(-1);
  bigger.set(array);
  return bigger;
}

function grow<T extends Uint32Array>(array: T, needed: number): T {
  const bigger = new (array.constructor as new (n: number) => T)(Math.max(needed, array.length * 2));
  bigger.set(array);
  return bigger;
}

/**
 * Records an entry (count tf, in a document of `length` terms) about to be added at
 * `position` in the block bounds. Called before the posting's own maxTf and minLength take it
 * in, so that when a second block begins they still describe the first alone.
 */
function noteBlock(posting: Posting, position: number, tf: number, length: number): void {
  if (position < BLOCK) return;
  const blocks = (posting.blocks ??= [posting.maxTf, posting.minLength]);
  const at = (position >> BLOCK_SHIFT) << 1;
  if (at === blocks.length) {
    blocks.push(tf, length);
  } else {
    if (tf > blocks[at]) blocks[at] = tf;
    if (length < blocks[at + 1]) blocks[at + 1] = length;
  }
}

/** One past the last document of the current block of the terms order[from..] (Infinity when all are done). */
function windowEnd(docs: number[][], ends: Int32Array, at: Int32Array, order: Int32Array, from: number): number {
  let end = Infinity;
  for (let j = from; j < order.length; j++) {
    const i = order[j];
    if (at[i] >= ends[i]) continue;
    const last = docs[i][Math.min(ends[i], ((at[i] >> BLOCK_SHIFT) + 1) << BLOCK_SHIFT) - 1];
    if (last + 1 < end) end = last + 1;
  }
  return end;
}

/**
 * The best tf / (tf + norm) any document before `end` can have in a posting, from position
 * `from` on: over the blocks that hold such documents, each bounded by its largest count in
 * its shortest document.
 */
function bestInBlocks(docs: number[], blocks: number[], length: number, from: number, end: number, normBase: number, normScale: number): number {
  let best = 0;
  for (let block = from >> BLOCK_SHIFT; block << BLOCK_SHIFT < length && (block === from >> BLOCK_SHIFT || docs[block << BLOCK_SHIFT] < end); block++) {
    const tf = blocks[2 * block];
    const bound = tf / (tf + normBase + normScale * blocks[2 * block + 1]);
    if (bound > best) best = bound;
  }
  return best;
}

/** The first position in docs[from..length) whose document is >= doc (galloping, then binary search). */
function seek(docs: number[], length: number, from: number, doc: number): number {
  if (from >= length || docs[from] >= doc) return from;
  let step = 1;
  let low = from;
  let high = from + 1;
  while (high < length && docs[high] < doc) {
    low = high;
    step *= 2;
    high = Math.min(length, low + step);
  }
  while (low + 1 < high) {
    const mid = (low + high) >>> 1;
    if (docs[mid] < doc) low = mid;
    else high = mid;
  }
  return high;
}

/** The k best documents so far; among equal scores the older (lower number) stays, as it came first. */
class TopDocs {
  private readonly items: Array<{ doc: number; score: number }> = [];
  constructor(private readonly k: number) {}

  get threshold(): number {
    return this.items.length < this.k ? 0 : this.items[this.items.length - 1].score;
  }

  /** True when the document got in. */
  offer(doc: number, score: number): boolean {
    if (score <= this.threshold) return false;
    let at = this.items.length;
    while (at > 0 && this.items[at - 1].score < score) at--;
    this.items.splice(at, 0, { doc, score });
    if (this.items.length > this.k) this.items.pop();
    return true;
  }

  sorted(): Array<{ doc: number; score: number }> {
    return this.items;
  }
}
