import { cosineFrom } from '../vectors/vector-index.js';

/**
 * The mean of a tenant's memory vectors, kept as memories come and go, and the cosine
 * similarity measured from it rather than from the origin.
 *
 * Why: a tenant's memories share a direction that says nothing about any one of them. In a
 * conversation every turn starts with a date and a speaker's name; in an ops log every memory
 * talks about servers. Static word vectors add those shared words into every memory, so all
 * of a tenant's memories sit close together and the words that tell them apart weigh less.
 * Removing the tenant's own mean (the per-tenant form of SIF's common-component removal,
 * which the model already does for English as a whole) spreads them out again. With the
 * model of the time (SIF a = 1e-4), on the tuning half of the long-conversation benchmark:
 * hybrid recall@10 0.706 -> 0.735, MRR 0.581 -> 0.617; the vector ranking alone on the older
 * evaluation set: MRR 0.753 -> 0.767. It also let a lighter SIF damping pay (a = 3e-4, see
 * scripts/lib/static-model-build.ts).
 *
 * The mean is shrunk towards zero for small tenants (weight n / (n + SHRINK)): the mean of a
 * handful of memories is mostly those memories, and subtracting it would push them apart
 * for no reason (two memories would end up exactly opposite). Not tuned: unshrunk did a
 * little better on both sets (0.740 / 0.620; 0.774), whose tenants hold 60 to 240 memories.
 */
export const SHRINK = 16;

export class TenantCentre {
  private readonly sum: Float64Array;
  private count = 0;
  /** mean(), kept until the next add or remove: every query of the tenant asks for it. */
  private cached: Float32Array | undefined;

  constructor(readonly dimension: number) {
    this.sum = new Float64Array(dimension);
  }

  add(vector: Float32Array): void {
    for (let d = 0; d < this.dimension; d++) this.sum[d] += vector[d];
    this.count++;
    this.cached = undefined;
  }

  remove(vector: Float32Array): void {
    for (let d = 0; d < this.dimension; d++) this.sum[d] -= vector[d];
    this.count--;
    if (this.count === 0) this.sum.fill(0); // no drift left behind by the float sums
    this.cached = undefined;
  }

  /** The (shrunk) mean to subtract; the zero vector when the tenant has no vectors. Read-only: it is shared. */
  mean(): Float32Array {
    if (!this.cached) {
      const scale = this.count === 0 ? 0 : 1 / (this.count + SHRINK);
      this.cached = new Float32Array(this.dimension);
      for (let d = 0; d < this.dimension; d++) this.cached[d] = this.sum[d] * scale;
    }
    return this.cached;
  }
}

/** The query moved by the mean, for the index to search with; a zero query (no known words) stays zero. */
export function centred(query: Float32Array, mean: Float32Array): Float32Array {
  if (!query.some((x) => x !== 0)) return query;
  return query.map((x, d) => x - mean[d]);
}

/** Cosine of (a - mean) and (b - mean); 0 when either is the zero vector or equals the mean. */
export function centredCosine(a: Float32Array, b: Float32Array, mean: Float32Array): number {
  return cosineFrom(a, b, 0, mean);
}
