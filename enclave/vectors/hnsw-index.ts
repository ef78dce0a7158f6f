import hnswlib from 'hnswlib-node';
import { isZero, type Neighbour, type VectorIndex } from './vector-index.js';

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
 * no direction: they are kept aside, never in the graph.
 */
export class HnswIndex implements VectorIndex {
  private readonly index;
  private capacity: number;
  private nextLabel = 0;
  private deleted = 0;
  private readonly labelToId = new Map<number, string>();
  private readonly idToLabel = new Map<string, number>();
  private readonly zeros = new Map<string, Float32Array>();

  constructor(readonly dimension: number, private readonly options: HnswOptions = DEFAULT_HNSW, initialCapacity = 1024) {
    this.capacity = initialCapacity;
    this.index = new HierarchicalNSW('cosine', dimension);
    this.index.initIndex(this.capacity, options.m, options.efConstruction, 100, true);
    this.index.setEf(options.efSearch);
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
  }

  remove(id: string): void {
    if (this.zeros.delete(id)) return;
    const label = this.idToLabel.get(id);
    if (label === undefined) return;
    this.index.markDelete(label);
    this.deleted++;
    this.idToLabel.delete(id);
    this.labelToId.delete(label);
  }

  vector(id: string): Float32Array | undefined {
    const zero = this.zeros.get(id);
    if (zero) return zero.slice();
    const label = this.idToLabel.get(id);
    // hnswlib keeps cosine-space points normalised; ours are unit length already.
    return label === undefined ? undefined : Float32Array.from(this.index.getPoint(label));
  }

  similarity(id: string, query: Float32Array): number | undefined {
    if (this.zeros.has(id)) return 0;
    const label = this.idToLabel.get(id);
    if (label === undefined) return undefined;
    const point = this.index.getPoint(label);
    let dot = 0;
    for (let d = 0; d < point.length; d++) dot += point[d] * query[d];
    return dot;
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
