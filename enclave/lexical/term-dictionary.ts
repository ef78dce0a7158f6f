/**
 * The words small tenants' lexical indexes hold, numbered once for all of them (SmallBm25
 * stores a memory's terms as these numbers, not as strings of its own). Owned by whoever
 * owns the tenants (memory/memory-service.ts makes one), never a module-level singleton, and
 * counted by reference: each holder (a tenant's SmallBm25, or an add in progress) holds a
 * term once, and a term no holder uses is forgotten and its number reused. Without that,
 * adding and deleting memories of ever-new words grew it until V8's Map limit (2^24
 * entries), after which every add with a new word failed (issue 31, item 2).
 */
export class TermDictionary {
  private readonly numbers = new Map<string, number>();
  /** Term by number; '' for a free number. */
  private readonly terms: string[] = [];
  /** Holders per number; 0 for a free number. */
  private holders = new Int32Array(1024);
  /** Numbers given back, for reuse. */
  private readonly free: number[] = [];

  /** Takes one hold on `term`, numbering it if new; its number. */
  acquire(term: string): number {
    let n = this.numbers.get(term);
    if (n === undefined) {
      n = this.free.pop() ?? this.terms.length;
      if (n === this.terms.length) this.terms.push(term);
      else this.terms[n] = term;
      if (n >= this.holders.length) {
        const bigger = new Int32Array(this.holders.length * 2);
        bigger.set(this.holders);
        this.holders = bigger;
      }
      this.numbers.set(term, n);
    }
    this.holders[n]++;
    return n;
  }

  /** Takes one more hold on a term already numbered (and held). */
  hold(n: number): void {
    if (this.holders[n] <= 0) throw new Error(`term number ${n} is not held`);
    this.holders[n]++;
  }

  /** Gives back one hold; the last one frees the term. */
  release(n: number): void {
    if (this.holders[n] <= 0) throw new Error(`term number ${n} is not held`);
    if (--this.holders[n] > 0) return;
    this.numbers.delete(this.terms[n]);
    this.terms[n] = '';
    this.free.push(n);
  }

  lookup(term: string): number | undefined {
    return this.numbers.get(term);
  }

  term(n: number): string {
    return this.terms[n];
  }

  /** Terms held now. */
  get size(): number {
    return this.numbers.size;
  }

  /** One past the largest number ever given (every number is below it). */
  get bound(): number {
    return this.terms.length;
  }
}
