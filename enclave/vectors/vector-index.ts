/**
 * One tenant's vectors, searchable by cosine similarity. Vectors are unit length (the
 * embedders normalise) or zero (text with no known word): a zero vector has no direction,
 * so it is kept (snapshots need it) but never returned by a search.
 *
 * Implementations: FlatIndex (exact, compact; small tenants) and HnswIndex (hnswlib, for
 * large ones), chosen per tenant by TieredIndex. test/unit/vector-index.test.ts is the
 * contract every implementation passes, recall against exact search included.
 */
export interface Neighbour {
  id: string;
  /** Cosine similarity in [-1, 1]. */
  score: number;
}

/** Ids and their vectors, one row of the index's dimension each (VectorIndex.copyRows). */
export interface VectorRows {
  ids: string[];
  vectors: Float32Array<ArrayBuffer>;
}

export interface VectorIndex {
  /** Vectors held, zero ones included. */
  readonly size: number;
  /** Adds a vector under `id` (a no-op if `id` is already held). */
  add(id: string, vector: Float32Array): void;
  remove(id: string): void;
  /** The vector stored under `id`. */
  vector(id: string): Float32Array | undefined;
  /**
   * Every id with its vector, zero ones included, copied in one piece: `vectors` holds a row
   * of `dimension` floats for each of `ids`, in the order they are stored. A large tenant
   * read this way costs no lookup and no copy per vector (the search worker's copy of it).
   */
  copyRows(): VectorRows;
  /**
   * Cosine similarity of `query` and the vector under `id`; undefined if there is none.
   * With `origin`, measured from there: the cosine of (query - origin) and (vector - origin),
   * 0 for a zero vector (retrieval/tenant-centre.ts). Computed where the vector is stored,
   * without copying it: a hybrid query asks this of every candidate.
   */
  similarity(id: string, query: Float32Array, origin?: Float32Array): number | undefined;
  /**
   * similarity() for many ids and one query: what depends only on the query and origin is
   * worked out once, so each id costs one dot product.
   */
  scorer(query: Float32Array, origin?: Float32Array): (id: string) => number | undefined;
  /**
   * The `k` most similar non-zero vectors, best first. With `accept`, only ids it accepts
   * are considered, so a filtered search still returns `k` when that many match.
   */
  search(query: Float32Array, k: number, accept?: (id: string) => boolean): Neighbour[];
  /**
   * search()'s hits (no filter) that score at least `minScore`: the same ids and scores, to
   * the bit, as search(query, k) with the rest cut off. Dedupe asks this of every add, and a
   * high `minScore` lets an exact scan give up on most rows after a few dimensions.
   */
  searchAbove(query: Float32Array, k: number, minScore: number): Neighbour[];
}

export function isZero(v: Float32Array): boolean {
  for (let i = 0; i < v.length; i++) if (v[i] !== 0) return false;
  return true;
}

/**
 * Cosine of (a - origin) and (b - origin), b read from `b` at `bOffset`; 0 when either is
 * the zero vector or equals the origin.
 */
export function cosineFrom(a: Float32Array, b: Float32Array, bOffset: number, origin: Float32Array): number {
  let dotted = 0;
  let na = 0;
  let nb = 0;
  let aZero = true;
  let bZero = true;
  for (let d = 0; d < a.length; d++) {
    if (a[d] !== 0) aZero = false;
    if (b[bOffset + d] !== 0) bZero = false;
    const x = a[d] - origin[d];
    const y = b[bOffset + d] - origin[d];
    dotted += x * y;
    na += x * x;
    nb += y * y;
  }
  return aZero || bZero || na === 0 || nb === 0 ? 0 : dotted / Math.sqrt(na * nb);
}

/**
 * Whether unit vectors `a` and b[bOffset ..] may have a cosine of at least `minScore`: false
 * once the squared distance of the dimensions read so far exceeds what that cosine allows
 * (|a - b|² = 2 - 2 a·b for unit vectors), with a margin for float rounding and vectors a
 * little off unit length, so that a true answer may be wrong but a false one never is.
 * Unrelated texts are far apart in their first few dimensions already.
 */
export function mayReach(a: Float32Array, b: Float32Array, bOffset: number, minScore: number): boolean {
  const limit = 2 - 2 * minScore + 1e-3;
  const n = a.length;
  let sum = 0;
  let d = 0;
  for (; d + 7 < n; d += 8) {
    for (let j = d; j < d + 8; j++) sum += (a[j] - b[bOffset + j]) ** 2;
    if (sum > limit) return false;
  }
  for (; d < n; d++) sum += (a[d] - b[bOffset + d]) ** 2;
  return sum <= limit;
}

/**
 * a · b[bOffset ..]. Four running sums, not one: the additions of one sum wait on each other,
 * those of four do not, and the exact scan of a small tenant is mostly this loop (100-d, in
 * process: 1,000 memories 390 -> 318-348 us a query, 3,000 memories 695 -> 478-518 us).
 */
export function dot(a: Float32Array, b: Float32Array, bOffset = 0): number {
  const n = a.length;
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let d = 0;
  for (; d + 3 < n; d += 4) {
    s0 += a[d] * b[bOffset + d];
    s1 += a[d + 1] * b[bOffset + d + 1];
    s2 += a[d + 2] * b[bOffset + d + 2];
    s3 += a[d + 3] * b[bOffset + d + 3];
  }
  for (; d < n; d++) s0 += a[d] * b[bOffset + d];
  return s0 + s1 + (s2 + s3);
}

/**
 * a · b[bOffset ..], c · b[bOffset ..] and b[bOffset ..] · itself, in one pass over that row of
 * b, into out[0..2]. Each sum is taken exactly as dot() takes it (four running sums, the same
 * order), so the three equal dot(a, b, bOffset), dot(c, b, bOffset) and dot(row, row) to the bit.
 */
export function dot3(a: Float32Array, c: Float32Array, b: Float32Array, bOffset: number, out: Float64Array): void {
  const n = a.length;
  let a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  let c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  let b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  let d = 0;
  for (; d + 3 < n; d += 4) {
    const x0 = b[bOffset + d];
    const x1 = b[bOffset + d + 1];
    const x2 = b[bOffset + d + 2];
    const x3 = b[bOffset + d + 3];
    a0 += a[d] * x0;
    a1 += a[d + 1] * x1;
    a2 += a[d + 2] * x2;
    a3 += a[d + 3] * x3;
    c0 += c[d] * x0;
    c1 += c[d + 1] * x1;
    c2 += c[d + 2] * x2;
    c3 += c[d + 3] * x3;
    b0 += x0 * x0;
    b1 += x1 * x1;
    b2 += x2 * x2;
    b3 += x3 * x3;
  }
  for (; d < n; d++) {
    const x = b[bOffset + d];
    a0 += a[d] * x;
    c0 += c[d] * x;
    b0 += x * x;
  }
  out[0] = a0 + a1 + (a2 + a3);
  out[1] = c0 + c1 + (c2 + c3);
  out[2] = b0 + b1 + (b2 + b3);
}

/**
 * Scores rows of `data` (one vector of `dimension` floats each) against `query`: the cosine
 * (a dot product, vectors being unit length), or with `origin` the cosine of (query - origin)
 * and (row - origin), 0 for a zero row or query. FlatIndex and HnswIndex both score their
 * rows through it, so a memory's similarity is the same to the bit in either.
 *
 * From an origin (the tenant's mean) it is expanded, (q - m)·(v - m) = q·v - q·m - v·m + m·m
 * and |v - m|² = v·v - 2 v·m + m·m, and a row's three products are taken in one pass over it
 * (dot3), not kept per row: a kept value was a cache miss too, so no faster
 * (docs/performance-log.md#ranking-in-the-worker-2026-11-25-evening).
 */
export function rowScorer(data: Float32Array, dimension: number, query: Float32Array, origin?: Float32Array): (row: number) => number {
  if (!origin) return (row) => dot(query, data, row * dimension);
  if (isZero(query)) return () => 0;
  const [qm, mm] = [dot(query, origin), dot(origin, origin)];
  let qq = 0; // |q - m|², directly: the expanded form loses digits when q is near m
  for (let d = 0; d < dimension; d++) qq += (query[d] - origin[d]) ** 2;
  if (qq === 0) return () => 0;
  const products = new Float64Array(3);
  return (row) => {
    dot3(query, origin, data, row * dimension, products);
    const qv = products[0];
    const vm = products[1];
    const vv = products[2];
    if (vv === 0) return 0; // a zero vector (a float32 square is never 0 in float64 unless the float is)
    const centred = vv - 2 * vm + mm;
    return centred <= 1e-12 ? 0 : (qv - qm - vm + mm) / Math.sqrt(qq * centred);
  };
}

/** Keeps the k best-scoring entries seen, best first: a bounded insertion list (k is small). */
export class TopK {
  readonly items: Neighbour[] = [];
  constructor(private readonly k: number) {}

  /** The score an entry must beat to get in. */
  get threshold(): number {
    return this.items.length < this.k ? -Infinity : this.items[this.items.length - 1].score;
  }

  offer(id: string, score: number): void {
    if (this.k <= 0 || score <= this.threshold) return;
    let at = this.items.length;
    while (at > 0 && this.items[at - 1].score < score) at--;
    this.items.splice(at, 0, { id, score });
    if (this.items.length > this.k) this.items.pop();
  }
}
