import hnswlib from 'hnswlib-node';
import { isZero, rowScorer, type Neighbour, type VectorIndex, type VectorRows } from './vector-index.js';
import { elementCount, loadBytes, savedBytes, scrubUnused } from './hnsw-file.js';

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
 * An HnswIndex as saved (HnswIndex.save), to be opened again without inserting every vector
 * (HnswIndex.restore): a 100k-memory graph loads in a fraction of a second, and took 30 s and
 * more to build. No unused label keeps its vector, in the rows or in hnswlib's file.
 */
export interface SavedGraph {
  dimension: number;
  m: number;
  efConstruction: number;
  /** Id by label; '' for a free label. */
  ids: string[];
  /** Ids of the zero vectors (kept aside, not in the graph). */
  zeros: string[];
  /** Row `label` holds that label's vector (ids.length rows; a free label's row is zero). */
  rows: Float32Array;
  /** hnswlib's index file (hnsw-file.ts). */
  file: Buffer;
}

/**
 * An HNSW graph (hnswlib, cosine) for a large tenant. Each vector has a label, hnswlib's
 * integer key, which is also its row in a flat copy of the vectors and its place in the
 * array of ids, so a search's finds become ids, and are scored, without a map lookup (on
 * a 100k tenant a lookup in a map of ids was a cache miss or two, 14% of the search worker's
 * time: `perf`, 2026-11-26). A removed vector's label is marked deleted in the graph and
 * given to the next vector added, which hnswlib then puts in the deleted one's place, so a
 * tenant under steady ingest and deletion does not grow. Zero vectors have no direction:
 * they are kept aside, never in the graph. The flat copy is there because reading a vector
 * back from hnswlib (getPoint) builds a JS array each time, and a hybrid query asks for the
 * similarity of every candidate, lexical-only ones included.
 */
export class HnswIndex implements VectorIndex {
  private readonly index;
  private capacity: number;
  /** Id by label; '' for a free label. */
  private readonly ids: string[] = [];
  private readonly labels = new Map<string, number>();
  /** Labels marked deleted in the graph, for the next additions. */
  private readonly free: number[] = [];
  /** Row `label` holds that label's vector. */
  private rows: Float32Array;
  private readonly zeros = new Map<string, Float32Array>();

  constructor(readonly dimension: number, private readonly options: HnswOptions = DEFAULT_HNSW, initialCapacity = 1024) {
    this.capacity = Math.max(1, initialCapacity);
    this.index = new HierarchicalNSW('cosine', dimension);
    // No replacement of deleted elements by hnswlib's choice: a freed label is reused by
    // adding under it, which hnswlib does in that label's own (deleted) place.
    this.index.initIndex(this.capacity, options.m, options.efConstruction, 100, false);
    this.index.setEf(options.efSearch);
    this.rows = new Float32Array(this.capacity * dimension);
  }

  get size(): number {
    return this.labels.size + this.zeros.size;
  }

  add(id: string, vector: Float32Array): void {
    if (vector.length !== this.dimension) throw new Error(`vector has ${vector.length} dimensions, index has ${this.dimension}`);
    if (this.labels.has(id) || this.zeros.has(id)) return;
    if (isZero(vector)) {
      this.zeros.set(id, vector.slice());
      return;
    }
    let label = this.free.pop();
    if (label === undefined) {
      label = this.ids.length;
      if (label >= this.capacity) this.grow();
      this.ids.push('');
    }
    // A freed label is still in the graph, marked deleted: hnswlib updates that element to
    // the new vector, relinks it and unmarks it.
    this.index.addPoint(Array.from(vector), label);
    this.rows.set(vector, label * this.dimension);
    this.ids[label] = id;
    this.labels.set(id, label);
  }

  remove(id: string): void {
    if (this.zeros.delete(id)) return;
    const label = this.labels.get(id);
    if (label === undefined) return;
    this.index.markDelete(label);
    this.labels.delete(id);
    this.ids[label] = '';
    // A removed memory's vector is not kept for a saved graph to carry (save() scrubs hnswlib's copy).
    this.rows.fill(0, label * this.dimension, (label + 1) * this.dimension);
    this.free.push(label);
  }

  /**
   * The graph as it is now, for restore(). Nothing may change it until this resolves: hnswlib
   * writes its file on another thread (so the event loop answers queries meanwhile), and an
   * add or remove during that write would race it.
   */
  async save(): Promise<SavedGraph> {
    const n = this.ids.length;
    const ids = this.ids.slice();
    const rows = this.rows.slice(0, n * this.dimension);
    const file = await savedBytes((path) => this.index.writeIndex(path));
    scrubUnused(file, this.dimension, (label) => ids[label] !== '');
    return { dimension: this.dimension, m: this.options.m, efConstruction: this.options.efConstruction, ids, zeros: [...this.zeros.keys()], rows, file };
  }

  /**
   * The index a save() left, opened as it was: throws when it does not fit `options` and
   * `dimension` (the settings changed since: the caller rebuilds), or is not consistent.
   */
  static restore(saved: SavedGraph, dimension: number, options: HnswOptions = DEFAULT_HNSW): HnswIndex {
    if (saved.dimension !== dimension) throw new Error(`the saved graph has ${saved.dimension} dimensions, the index ${dimension}`);
    if (saved.m !== options.m || saved.efConstruction !== options.efConstruction) throw new Error('the saved graph was built with other HNSW settings');
    const n = saved.ids.length;
    if (saved.rows.length !== n * dimension || elementCount(saved.file, dimension) !== n) throw new Error('the saved graph\'s parts do not agree');
    const graph = new HnswIndex(dimension, options, 1);
    loadBytes(saved.file, (path) => graph.index.readIndexSync(path, false));
    graph.index.setEf(options.efSearch);
    graph.capacity = graph.index.getMaxElements();
    graph.rows = new Float32Array(Math.max(graph.capacity, n) * dimension);
    graph.rows.set(saved.rows);
    const zeros = new Set(saved.zeros);
    saved.ids.forEach((id, label) => {
      graph.ids.push(id);
      if (id === '') graph.free.push(label);
      else if (graph.labels.has(id) || zeros.has(id)) throw new Error(`the saved graph holds ${id} twice`);
      else graph.labels.set(id, label);
    });
    for (const id of zeros) graph.zeros.set(id, new Float32Array(dimension));
    return graph;
  }

  has(id: string): boolean {
    return this.labels.has(id) || this.zeros.has(id);
  }

  vector(id: string): Float32Array | undefined {
    const zero = this.zeros.get(id);
    if (zero) return zero.slice();
    const label = this.labels.get(id);
    return label === undefined ? undefined : this.rows.slice(label * this.dimension, (label + 1) * this.dimension);
  }

  copyRows(): VectorRows {
    const ids: string[] = [];
    const vectors = new Float32Array((this.labels.size + this.zeros.size) * this.dimension);
    // Stored vectors in label order, then the zero ones (their rows all 0).
    this.ids.forEach((id, label) => {
      if (id === '') return;
      vectors.set(this.rows.subarray(label * this.dimension, (label + 1) * this.dimension), ids.length * this.dimension);
      ids.push(id);
    });
    ids.push(...this.zeros.keys());
    return { ids, vectors };
  }

  similarity(id: string, query: Float32Array, origin?: Float32Array): number | undefined {
    return this.scorer(query, origin)(id);
  }

  scorer(query: Float32Array, origin?: Float32Array): (id: string) => number | undefined {
    const score = rowScorer(this.rows, this.dimension, query, origin);
    return (id) => {
      const label = this.labels.get(id);
      if (label !== undefined) return score(label);
      return this.zeros.has(id) ? 0 : undefined;
    };
  }

  search(query: Float32Array, k: number, accept?: (id: string) => boolean): Neighbour[] {
    const { neighbors, distances } = this.searchGraph(query, k, accept);
    return neighbors.map((label, i) => ({ id: this.ids[label], score: 1 - distances[i] }));
  }

  searchAbove(query: Float32Array, k: number, minScore: number): Neighbour[] {
    return this.search(query, k).filter((hit) => hit.score >= minScore);
  }

  /**
   * search() by label, for a caller that keeps its own integer keys (the search worker's
   * copy): the labels of the `k` most similar non-zero vectors, best first.
   */
  searchLabels(query: Float32Array, k: number): number[] {
    return this.searchGraph(query, k).neighbors;
  }

  /** The label of `id`'s vector; undefined for a zero vector or one not held. */
  labelOf(id: string): number | undefined {
    return this.labels.get(id);
  }

  /** The id under `label` ('' for a label not in use). */
  idOf(label: number): string {
    return this.ids[label] ?? '';
  }

  /** scorer() by label: the same value to the bit as scorer()(idOf(label)). */
  labelScorer(query: Float32Array, origin?: Float32Array): (label: number) => number {
    return rowScorer(this.rows, this.dimension, query, origin);
  }

  private searchGraph(query: Float32Array, k: number, accept?: (id: string) => boolean): { neighbors: number[]; distances: number[] } {
    const n = Math.min(k, this.labels.size);
    if (n <= 0 || isZero(query)) return { neighbors: [], distances: [] };
    this.index.setEf(Math.max(this.options.efSearch, n));
    const filter = accept ? (label: number) => accept(this.ids[label]) : undefined;
    return this.index.searchKnn(Array.from(query), n, filter);
  }

  private grow(): void {
    this.capacity *= 2;
    this.index.resizeIndex(this.capacity);
    const rows = new Float32Array(this.capacity * this.dimension);
    rows.set(this.rows);
    this.rows = rows;
  }
}
