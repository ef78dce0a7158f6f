import { dot, isZero, mayReach, rowScorer, TopK, type Neighbour, type VectorIndex, type VectorRows } from './vector-index.js';

/**
 * Exact search over one contiguous Float32Array: a tenant of n vectors costs n × dim × 4
 * bytes plus its ids, with no per-vector object and no graph. Scanning a few thousand
 * 100-d vectors takes well under a millisecond, so small tenants need nothing more.
 * Removal moves the last vector into the freed row, keeping rows dense.
 *
 * Similarity from an origin is worked out from the row in place (rowScorer).
 */
export class FlatIndex implements VectorIndex {
  private data: Float32Array;
  private ids: string[] = [];
  private zero: Uint8Array;
  private readonly rows = new Map<string, number>();

  constructor(readonly dimension: number, initialCapacity = 4) {
    this.data = new Float32Array(initialCapacity * dimension);
    this.zero = new Uint8Array(initialCapacity);
  }

  get size(): number {
    return this.ids.length;
  }

  add(id: string, vector: Float32Array): void {
    if (vector.length !== this.dimension) throw new Error(`vector has ${vector.length} dimensions, index has ${this.dimension}`);
    if (this.rows.has(id)) return;
    const row = this.ids.length;
    if ((row + 1) * this.dimension > this.data.length) this.grow();
    this.data.set(vector, row * this.dimension);
    this.zero[row] = isZero(vector) ? 1 : 0;
    this.ids.push(id);
    this.rows.set(id, row);
  }

  remove(id: string): void {
    const row = this.rows.get(id);
    if (row === undefined) return;
    const last = this.ids.length - 1;
    if (row !== last) {
      this.data.copyWithin(row * this.dimension, last * this.dimension, (last + 1) * this.dimension);
      this.zero[row] = this.zero[last];
      this.ids[row] = this.ids[last];
      this.rows.set(this.ids[row], row);
    }
    this.ids.pop();
    this.rows.delete(id);
  }

  vector(id: string): Float32Array | undefined {
    const row = this.rows.get(id);
    return row === undefined ? undefined : this.data.slice(row * this.dimension, (row + 1) * this.dimension);
  }

  similarity(id: string, query: Float32Array, origin?: Float32Array): number | undefined {
    return this.scorer(query, origin)(id);
  }

  scorer(query: Float32Array, origin?: Float32Array): (id: string) => number | undefined {
    const { rows } = this;
    const score = rowScorer(this.data, this.dimension, query, origin);
    return (id) => {
      const row = rows.get(id);
      return row === undefined ? undefined : score(row);
    };
  }

  search(query: Float32Array, k: number, accept?: (id: string) => boolean): Neighbour[] {
    if (k <= 0 || isZero(query)) return [];
    const top = new TopK(k);
    const { dimension, data, zero, ids } = this;
    for (let row = 0; row < ids.length; row++) {
      if (zero[row] || (accept && !accept(ids[row]))) continue;
      top.offer(ids[row], dot(query, data, row * dimension));
    }
    return top.items;
  }

  searchAbove(query: Float32Array, k: number, minScore: number): Neighbour[] {
    if (k <= 0 || isZero(query)) return [];
    const top = new TopK(k);
    const { dimension, data, zero, ids } = this;
    for (let row = 0; row < ids.length; row++) {
      if (zero[row] || !mayReach(query, data, row * dimension, minScore)) continue;
      const score = dot(query, data, row * dimension);
      if (score >= minScore) top.offer(ids[row], score);
    }
    return top.items;
  }

  copyRows(): VectorRows {
    return { ids: this.ids.slice(), vectors: this.data.slice(0, this.ids.length * this.dimension) };
  }

  /** Every id with its vector, as views of the storage (for moving a tenant to another index). */
  *entries(): Generator<[string, Float32Array]> {
    for (let row = 0; row < this.ids.length; row++) yield [this.ids[row], this.data.subarray(row * this.dimension, (row + 1) * this.dimension)];
  }

  private grow(): void {
    // 1.5x: less slack per tenant than doubling, still amortised O(1) per add.
    const capacity = Math.max(4, Math.ceil((this.data.length / this.dimension) * 1.5));
    const data = new Float32Array(capacity * this.dimension);
    data.set(this.data);
    this.data = data;
    const zero = new Uint8Array(capacity);
    zero.set(this.zero);
    this.zero = zero;
  }
}
