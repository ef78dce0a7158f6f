import { Bm25Index, type LexicalHit, type LexicalResult, type SearchCost } from './bm25.js';
import { SmallBm25 } from './small-bm25.js';

/**
 * A tenant's lexical index: scanned term numbers while it is small (SmallBm25: a few bytes
 * a term), an inverted index with MaxScore once it holds more than `promoteAbove` memories
 * (Bm25Index). Both score exactly alike; the move happens once, at an add, and is not undone.
 */
export const LEXICAL_PROMOTE_ABOVE = 2048;

export class TieredLexical {
  private small?: SmallBm25 = new SmallBm25();
  private large?: Bm25Index;

  constructor(private readonly promoteAbove = LEXICAL_PROMOTE_ABOVE) {}

  get kind(): 'scan' | 'inverted' {
    return this.small ? 'scan' : 'inverted';
  }

  get size(): number {
    return (this.small ?? this.large!).size;
  }

  add(id: string, text: string): void {
    if (this.large) return this.large.add(id, text);
    this.small!.add(id, text);
    if (this.small!.size > this.promoteAbove) {
      const large = new Bm25Index();
      for (const [memory, terms] of this.small!.entries()) large.addTerms(memory, terms);
      this.large = large;
      this.small = undefined;
    }
  }

  remove(id: string, text: string): void {
    if (this.large) this.large.remove(id, text);
    else this.small!.remove(id, text);
  }

  search(query: string, k: number, cost?: SearchCost, accept?: (id: string) => boolean): LexicalHit[] {
    return (this.small ?? this.large!).search(query, k, cost, accept);
  }

  searchWith(query: string, k: number, also: readonly string[], cost?: SearchCost, accept?: (id: string) => boolean): LexicalResult {
    return (this.small ?? this.large!).searchWith(query, k, also, cost, accept);
  }
}
