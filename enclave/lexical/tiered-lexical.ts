import { Bm25Index } from './bm25.js';
import type { LexicalHit, LexicalIndex, LexicalResult, SearchCost } from './lexical-index.js';
import { lexicalTerms } from './lexical-terms.js';
import { SmallBm25 } from './small-bm25.js';
import { TermDictionary } from './term-dictionary.js';

/**
 * A tenant's lexical index: scanned term numbers while it is small (SmallBm25: a few bytes
 * a term), an inverted index with MaxScore once it holds more than `promoteAbove` memories
 * (Bm25Index). Both score exactly alike; the move happens once, at an add, and is not undone.
 */
export const LEXICAL_PROMOTE_ABOVE = 2048;

export interface TieredLexicalOptions {
  /** The dictionary small tenants number their terms in (shared by the tenants of one MemoryService). */
  dictionary?: TermDictionary;
  promoteAbove?: number;
}

export class TieredLexical implements LexicalIndex {
  private small?: SmallBm25;
  private large?: Bm25Index;
  private readonly promoteAbove: number;

  constructor(options: TieredLexicalOptions = {}) {
    this.small = new SmallBm25(options.dictionary ?? new TermDictionary());
    this.promoteAbove = options.promoteAbove ?? LEXICAL_PROMOTE_ABOVE;
  }

  get kind(): 'scan' | 'inverted' {
    return this.small ? 'scan' : 'inverted';
  }

  get size(): number {
    return (this.small ?? this.large!).size;
  }

  /** Distinct terms the tenant's memories hold: what its index costs beyond the memories themselves. */
  get distinctTerms(): number {
    return (this.small ?? this.large!).distinctTerms;
  }

  /** Whether a memory of the tenant holds `term`. */
  holds(term: string): boolean {
    return (this.small ?? this.large!).holds(term);
  }

  add(id: string, text: string): void {
    this.addTerms(id, lexicalTerms(text));
  }

  /** Adds a memory given its terms (lexicalTerms of its content). */
  addTerms(id: string, terms: readonly string[]): void {
    if (this.large) return this.large.addTerms(id, terms);
    this.small!.addTerms(id, terms);
    if (this.small!.size > this.promoteAbove) {
      const large = new Bm25Index();
      for (const [memory, memoryTerms] of this.small!.entries()) large.addTerms(memory, memoryTerms);
      this.small!.dispose();
      this.large = large;
      this.small = undefined;
    }
  }

  remove(id: string, text: string): void {
    if (this.large) this.large.remove(id, text);
    else this.small!.remove(id, text);
  }

  /** Gives back what the index holds in the shared dictionary (its tenant is gone). */
  dispose(): void {
    (this.small ?? this.large!).dispose();
  }

  search(query: string, k: number, cost?: SearchCost, accept?: (id: string) => boolean): LexicalHit[] {
    return (this.small ?? this.large!).search(query, k, cost, accept);
  }

  searchWith(query: string, k: number, asked: readonly string[], cost?: SearchCost, accept?: (id: string) => boolean): LexicalResult {
    return (this.small ?? this.large!).searchWith(query, k, asked, cost, accept);
  }
}
