import { FlatIndex } from './flat-index.js';
import { DEFAULT_HNSW, HnswIndex, type HnswOptions, type SavedGraph } from './hnsw-index.js';
import type { Neighbour, VectorIndex, VectorRows } from './vector-index.js';

export interface TieredOptions {
  /** A tenant moves from exact search to an HNSW graph when it holds more vectors than this. */
  promoteAbove: number;
  hnsw: HnswOptions;
}

/**
 * Below promoteAbove, exact search over a flat array (bench/scale.ts: a flat scan of that
 * many 100-d vectors takes about as long as an HNSW query, and costs no graph); above it,
 * HNSW. A tenant that shrinks again keeps its graph (deletes are rare, and moving back
 * would buy little); a restart rebuilds each tenant by its size, or opens the graph saved
 * with the snapshot (restored()).
 */
export const DEFAULT_TIERS: TieredOptions = { promoteAbove: 4096, hnsw: DEFAULT_HNSW };

/**
 * How many of the flat array's vectors go into the graph with each vector added once a tenant
 * has passed promoteAbove. Inserting all 4,097 at once held every request for 0.4–0.5 s, the
 * slowest writes of a growing tenant; spread over its next writes (a few ms each), the flat
 * array, still complete, answering meanwhile. Driven by the tenant's own changes, not by time,
 * so what the graph holds and when it takes over depends only on what was written.
 */
export const PROMOTE_PER_ADD = 8;

/** How many move at the promotion itself: a small index (as tests use) is promoted whole at once. */
export const PROMOTE_AT_ONCE = 256;

export class TieredIndex implements VectorIndex {
  private current: VectorIndex;
  private flat?: FlatIndex;
  /**
   * A restored graph's ids not yet confirmed by the snapshot's memories (restored()): each add
   * of one keeps it only if the graph holds the same vector, to the bit; settle() removes the
   * rest. So what the graph holds is what the snapshot says, whatever moment it was saved at.
   */
  private unconfirmed?: Set<string>;
  /**
   * A graph being built from the flat array (promote()): the ids the flat array held when it
   * began, and how many of them are in. Vectors added or removed meanwhile go to both; each
   * add moves PROMOTE_PER_ADD more across.
   */
  private building?: { graph: HnswIndex; ids: string[]; done: number };

  constructor(readonly dimension: number, private readonly options: TieredOptions = DEFAULT_TIERS) {
    this.flat = new FlatIndex(dimension);
    this.current = this.flat;
  }

  /** A tenant's index opened from a saved graph, its ids unconfirmed until the snapshot's memories are added (then settle()). */
  static restored(saved: SavedGraph, options: TieredOptions = DEFAULT_TIERS): TieredIndex {
    const index = new TieredIndex(saved.dimension, options);
    index.current = HnswIndex.restore(saved, saved.dimension, options.hnsw);
    index.flat = undefined;
    index.unconfirmed = new Set([...saved.ids.filter((id) => id !== ''), ...saved.zeros]);
    return index;
  }

  /** Removes the restored graph's ids the snapshot did not confirm; returns how many. */
  settle(): number {
    const left = this.unconfirmed;
    this.unconfirmed = undefined;
    for (const id of left ?? []) this.current.remove(id);
    return left?.size ?? 0;
  }

  /** The graph as it is now (HnswIndex.save: nothing may change it until this resolves); undefined while the tenant is small. */
  saveGraph(): Promise<SavedGraph> | undefined {
    return this.current instanceof HnswIndex ? this.current.save() : undefined;
  }

  /**
   * Moves the rest of a promotion's vectors into the graph at once: a snapshot keeps the graph
   * of every tenant past promoteAbove (memory-service graphs()), and compaction is a point the
   * writes decide, so what is saved still depends only on what was written.
   */
  finishPromotion(): void {
    this.build(Infinity);
  }

  /** Which implementation serves the tenant now. */
  get kind(): 'flat' | 'hnsw' {
    return this.flat ? 'flat' : 'hnsw';
  }

  get size(): number {
    return this.current.size;
  }

  add(id: string, vector: Float32Array): void {
    if (this.unconfirmed?.delete(id)) {
      const held = this.current.vector(id);
      if (held && sameBits(held, vector)) return;
      this.current.remove(id);
    }
    this.current.add(id, vector);
    if (this.building) {
      this.building.graph.add(id, vector);
      this.build(PROMOTE_PER_ADD);
    } else if (this.flat && this.flat.size > this.options.promoteAbove) this.promote(this.flat);
  }

  remove(id: string): void {
    this.unconfirmed?.delete(id);
    this.current.remove(id);
    this.building?.graph.remove(id);
  }

  vector(id: string): Float32Array | undefined {
    return this.current.vector(id);
  }

  copyRows(): VectorRows {
    return this.current.copyRows();
  }

  similarity(id: string, query: Float32Array, origin?: Float32Array): number | undefined {
    return this.current.similarity(id, query, origin);
  }

  scorer(query: Float32Array, origin?: Float32Array): (id: string) => number | undefined {
    return this.current.scorer(query, origin);
  }

  search(query: Float32Array, k: number, accept?: (id: string) => boolean): Neighbour[] {
    return this.current.search(query, k, accept);
  }

  searchAbove(query: Float32Array, k: number, minScore: number): Neighbour[] {
    return this.current.searchAbove(query, k, minScore);
  }

  /** Starts the graph with PROMOTE_AT_ONCE of the flat array's vectors (a small index: all of them); the tenant's next adds move the rest. */
  private promote(flat: FlatIndex): void {
    const graph = new HnswIndex(this.dimension, this.options.hnsw, Math.max(1024, flat.size * 2));
    this.building = { graph, ids: [...flat.entries()].map(([id]) => id), done: 0 };
    this.build(PROMOTE_AT_ONCE);
  }

  /** Moves up to `count` more of the flat array's vectors into the graph; serves from the graph once it holds them all. */
  private build(count: number): void {
    const building = this.building;
    const flat = this.flat;
    if (!building || !flat) return;
    for (const end = Math.min(building.ids.length, building.done + count); building.done < end;) {
      const id = building.ids[building.done++];
      // Removed since (skip), or added again since, to both (in already).
      const vector = building.graph.has(id) ? undefined : flat.vector(id);
      if (vector) building.graph.add(id, vector);
    }
    if (building.done < building.ids.length) return;
    this.current = building.graph;
    this.flat = undefined;
    this.building = undefined;
  }
}

function sameBits(a: Float32Array, b: Float32Array): boolean {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}
