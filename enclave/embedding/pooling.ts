/**
 * Sentence vectors from a transformer's token vectors. Plain functions over the row-major
 * output tensor so the arithmetic can be checked by hand; sums are taken in float64.
 */

/** Floor for the norm, as in sentence-transformers' Normalize: an all-zero vector stays zero. */
const NORM_EPSILON = 1e-12;

export interface TokenTensor {
  /** [batch, sequence, hidden], row-major. */
  data: Float32Array;
  batch: number;
  sequence: number;
  hidden: number;
}

/**
 * Mean of each row's token vectors over the positions its attention mask marks 1
 * (`mask[row * sequence + position]`); padded positions are left out entirely.
 */
export function meanPool({ data, batch, sequence, hidden }: TokenTensor, mask: ArrayLike<number>): Float32Array[] {
  const vectors: Float32Array[] = [];
  for (let row = 0; row < batch; row++) {
    const sum = new Float64Array(hidden);
    let count = 0;
    for (let position = 0; position < sequence; position++) {
      if (mask[row * sequence + position] === 0) continue;
      count++;
      const offset = (row * sequence + position) * hidden;
      for (let d = 0; d < hidden; d++) sum[d] += data[offset + d];
    }
    // A row with no unmasked token has no mean; it gets the zero vector (the Embedder contract).
    vectors.push(Float32Array.from(sum, (x) => (count === 0 ? 0 : x / count)));
  }
  return vectors;
}

/** Each row's first token vector ([CLS] for BERT-family models). */
export function clsPool({ data, batch, sequence, hidden }: TokenTensor): Float32Array[] {
  return Array.from({ length: batch }, (_, row) => data.slice(row * sequence * hidden, (row * sequence + 1) * hidden));
}

/** Splits [batch, dim] into one vector per row. */
export function rows(data: Float32Array, batch: number, dim: number): Float32Array[] {
  return Array.from({ length: batch }, (_, row) => data.slice(row * dim, (row + 1) * dim));
}

/** Scales `v` to unit length in place, and returns it. */
export function l2Normalise(v: Float32Array): Float32Array {
  let squares = 0;
  for (let i = 0; i < v.length; i++) squares += v[i] * v[i];
  const norm = Math.max(Math.sqrt(squares), NORM_EPSILON);
  for (let i = 0; i < v.length; i++) v[i] /= norm;
  return v;
}
