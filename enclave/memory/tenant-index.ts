import hnswlib from 'hnswlib-node';

const { HierarchicalNSW } = hnswlib;

export interface Neighbour {
  id: string;
  /** Cosine similarity in [-1, 1]. */
  score: number;
}

/**
 * One tenant's HNSW index (cosine). Maps record ids to hnswlib's integer labels, grows
 * its capacity by doubling, and deletes with markDelete so results change at once. A new
 * vector takes the place of a deleted one when there is one, so an index under steady
 * ingest-and-delete does not grow without bound.
 * Vectors of zero length (text with no known words) have no direction, so they are
 * not indexed: such records are still stored and can be fetched by id.
 */
export class TenantIndex {
  private readonly index;
  private capacity: number;
  private nextLabel = 0;
  /** Slots marked deleted and not yet reused. */
  private deleted = 0;
  private readonly labelToId = new Map<number, string>();
  private readonly idToLabel = new Map<string, number>();

  constructor(readonly dimension: number, initialCapacity = 256) {
    this.capacity = initialCapacity;
    this.index = new HierarchicalNSW('cosine', dimension);
    // M=16, efConstruction=200: hnswlib's defaults, good recall at memory scale.
    this.index.initIndex(this.capacity, 16, 200, 100, true);
    this.index.setEf(64);
  }

  get size(): number {
    return this.idToLabel.size;
  }

  /** Vector slots allocated (live, deleted and free). */
  get allocated(): number {
    return this.capacity;
  }

  add(id: string, vector: Float32Array): void {
    if (vector.length !== this.dimension) throw new Error(`vector has ${vector.length} dimensions, index has ${this.dimension}`);
    if (isZero(vector) || this.idToLabel.has(id)) return;
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
    const label = this.idToLabel.get(id);
    if (label === undefined) return;
    this.index.markDelete(label);
    this.deleted++;
    this.idToLabel.delete(id);
    this.labelToId.delete(label);
  }

  /** Cosine similarity of `vector` and the memory's stored vector; undefined if it has none. */
  similarity(id: string, vector: Float32Array): number | undefined {
    const label = this.idToLabel.get(id);
    if (label === undefined) return undefined;
    // hnswlib stores cosine-space points normalised, and our vectors are unit length or zero.
    const point = this.index.getPoint(label);
    let dot = 0;
    for (let d = 0; d < point.length; d++) dot += point[d] * vector[d];
    return dot;
  }

  search(vector: Float32Array, k: number): Neighbour[] {
    const n = Math.min(k, this.size);
    if (n === 0 || isZero(vector)) return [];
    // ef must be at least k for hnswlib to return k results.
    this.index.setEf(Math.max(64, n));
    const { neighbors, distances } = this.index.searchKnn(Array.from(vector), n);
    return neighbors.map((label, i) => ({ id: this.labelToId.get(label)!, score: 1 - distances[i] }));
  }
}

function isZero(v: Float32Array): boolean {
  for (let i = 0; i < v.length; i++) if (v[i] !== 0) return false;
  return true;
}
