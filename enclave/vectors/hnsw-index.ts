import hnswlib from 'hnswlib-node';
import { FlatIndex } from './flat-index.js';
import { isZero, type Neighbour, type VectorIndex, type VectorRows } from './vector-index.js';

const { HierarchicalNSW } = hnswlib;

export interface HnswOptions {
  /** Graph degree (hnswlib's M). */
  m: number;
  /** Candidates considered while inserting. */
  efConstruction: number;
  /** Candidates considered while searching (raised to k when k is larger). */
  efSearch: number;
}

/**
 * hnswlib's defaults for M and efConstruction; efSearch 128 keeps recall@10 against exact
 * search at about 0.98 on 100k memories (bench/scale.ts measures it).
 */
export const DEFAULT_HNSW: HnswOptions = { m: 16, efConstruction: 200, efSearch: 128 };

/**
 * An HNSW graph (hnswlib, cosine) for a large tenant. Maps ids to hnswlib's integer labels,
 * grows by doubling, and deletes with markDelete, reusing freed slots for new vectors so a
 * tenant under steady ingest and deletion does not grow without bound. Zero vectors have
 * no direction: they are kept aside, never in the graph. Every vector is also kept in a flat
 * array, because reading one back from hnswlib (getPoint) builds a JS array each time, and
 * a hybrid query asks for the similarity of every candidate, lexical-only ones included.
 */
export class HnswIndex implements VectorIndex {
  private readonly index;
  private capacity: number;
  private nextLabel = 0;
  private deleted = 0;
  private readonly labelToId = new Map<number, string>();
  private readonly idToLabel = new Map<string, number>();
  private readonly zeros = new Map<string, Float32Array>();
  private readonly vectors: FlatIndex;

  constructor(readonly dimension: number, private readonly options: HnswOptions = DEFAULT_HNSW, initialCapacity = 1024) {
    this.capacity = initialCapacity;
    this.index = new HierarchicalNSW('cosine', dimension);
    this.index.initIndex(this.capacity, options.m, options.efConstruction, 100, true);
    this.index.setEf(options.efSearch);
    this.vectors = new FlatIndex(dimension, initialCapacity);
  }

  get size(): number {
    return this.idToLabel.size + this.zeros.size;
  }

  add(id: string, vector: Float32Array): void {
    if (vector.length !== this.dimension) throw new Error(`vector has ${vector.length} dimensions, index has ${this.dimension}`);
    if (this.idToLabel.has(id) || this.zeros.has(id)) return;
    if (isZero(vector)) {
      this.zeros.set(id, vector.slice());
      return;
    }
    const reuse = this.deleted > 0;
    if (!reuse && this.index.getCurrentCount() >= this.capacity) {
      this.capacity *= 2;
      this.index.resizeIndex(this.capacity);
    }
    const label = this.nextLabel++;
    this.index.addPoint(Array.from(vector), label, reuse);
    if (reuse) this.deleted--;
    this.labelToId.set(label, id);
    this.idToLabel.set(id, label);
    this.vectors.add(id, vector);
  }

  remove(id: string): void {
    if (this.zeros.delete(id)) return;
    const label = this.idToLabel.get(id);
    if (label === undefined) return;
    this.index.markDelete(label);
    this.deleted++;
    this.idToLabel.delete(id);
    this.labelToId.delete(label);
    this.vectors.remove(id);
  }

  vector(id: string): Float32Array | undefined {
    const zero = this.zeros.get(id);
    return zero ? zero.slice() : this.vectors.vector(id);
  }

  copyRows(): VectorRows {
    const stored = this.vectors.copyRows();
    if (this.zeros.size === 0) return stored;
    // Zero vectors are kept aside: their rows (all 0) follow the stored ones.
    const vectors = new Float32Array(stored.vectors.length + this.zeros.size * this.dimension);
    vectors.set(stored.vectors);
    return { ids: [...stored.ids, ...this.zeros.keys()], vectors };
  }

  similarity(id: string, query: Float32Array, origin?: Float32Array): number | undefined {
    return this.scorer(query, origin)(id);
  }

  scorer(query: Float32Array, origin?: Float32Array): (id: string) => number | undefined {
    const score = this.vectors.scorer(query, origin);
    return (id) => (this.zeros.has(id) ? 0 : score(id));
  }

  search(query: Float32Array, k: number, accept?: (id: string) => boolean): Neighbour[] {
    const n = Math.min(k, this.idToLabel.size);
    if (n <= 0 || isZero(query)) return [];
    this.index.setEf(Math.max(this.options.efSearch, n));
    const filter = accept ? (label: number) => accept(this.labelToId.get(label)!) : undefined;
    const { neighbors, distances } = this.index.searchKnn(Array.from(query), n, filter);
    return neighbors.map((label, i) => ({ id: this.labelToId.get(label)!, score: 1 - distances[i] }));
  }
}
