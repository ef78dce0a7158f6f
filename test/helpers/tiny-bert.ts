/**
 * A tiny BERT-signature sentence model generated for tests: random weights, a 30-token
 * WordPiece vocabulary, hidden size 8, 16 positions. Its graph is small but has what the
 * embedder must get right about real BERT models:
 *
 *   h[t]   = word[input_ids[t]] + position[t] (+ token_type[token_type_ids[t]])
 *   ctx    = sum of h[t] over the positions attention_mask marks, divided by their count
 *   out[t] = tanh((h[t] + ctx) @ dense)                 -> last_hidden_state [batch, seq, 8]
 *   sentence_embedding = ctx                             -> [batch, 8] (already pooled)
 *
 * Tokens mix through ctx only where the mask says so (like attention), padded positions
 * still get non-zero outputs (so pooling that ignored the mask would show), and a sequence
 * longer than 16 makes the model fail at its position table (so missing truncation would show).
 * referenceEmbedding recomputes all of it in plain float64 JavaScript.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import {
  TRANSFORMER_FORMAT,
  formatManifest,
  type Pooling,
  type TokenizerFile,
  type TransformerManifest,
} from '../../enclave/embedding/transformer-manifest.js';
import { mulberry32 } from '../../scripts/lib/mulberry32.js';
import { onnxGraph } from '../../scripts/lib/onnx-graph.js';

export const TINY_HIDDEN = 8;
export const TINY_POSITIONS = 16;

export const TINY_VOCAB = [
  '[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]',
  'the', 'cat', 'dog', 'sat', 'on', 'mat', 'my', 'is', 'called', 'rex',
  'invoice', 'due', 'friday', 'play', '##ing', '##s', 'park', 'in', 'a', 'cafe',
  '.', ',', '?', 'zx', '##44',
];

export interface TinyBertWeights {
  word: Float32Array; // [vocab, hidden]
  position: Float32Array; // [positions, hidden]
  tokenType: Float32Array; // [2, hidden]
  dense: Float32Array; // [hidden, hidden]
}

export interface TinyBert {
  onnx: Uint8Array;
  weights: TinyBertWeights;
  tokenTypes: boolean;
}

/** Deterministic weights in [-1, 1). */
function random(seed: number): () => number {
  const next = mulberry32(seed);
  return () => next() * 2 - 1;
}

export function buildTinyBert(options: { tokenTypes?: boolean; seed?: number } = {}): TinyBert {
  const tokenTypes = options.tokenTypes ?? true;
  const next = random(options.seed ?? 7);
  const table = (n: number) => Float32Array.from({ length: n }, next);
  const weights: TinyBertWeights = {
    word: table(TINY_VOCAB.length * TINY_HIDDEN),
    position: table(TINY_POSITIONS * TINY_HIDDEN),
    tokenType: table(2 * TINY_HIDDEN),
    dense: table(TINY_HIDDEN * TINY_HIDDEN),
  };

  const { onnx, tensor, valueInfo: info, node } = onnxGraph();
  const { FLOAT, INT64 } = onnx.TensorProto.DataType;
  const { INT } = onnx.AttributeProto.AttributeType;
  const H = TINY_HIDDEN;

  const inputs = [info('input_ids', INT64, ['batch', 'sequence']), info('attention_mask', INT64, ['batch', 'sequence'])];
  if (tokenTypes) inputs.push(info('token_type_ids', INT64, ['batch', 'sequence']));
  const model = onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [{ domain: '', version: 17 }],
    producerName: 'private-agent-service/test/tiny-bert',
    graph: {
      name: 'tiny-bert',
      input: inputs,
      output: [info('last_hidden_state', FLOAT, ['batch', 'sequence', H]), info('sentence_embedding', FLOAT, ['batch', H])],
      initializer: [
        tensor('word_embeddings', FLOAT, [TINY_VOCAB.length, H], weights.word),
        tensor('position_embeddings', FLOAT, [TINY_POSITIONS, H], weights.position),
        ...(tokenTypes ? [tensor('token_type_embeddings', FLOAT, [2, H], weights.tokenType)] : []),
        tensor('dense', FLOAT, [H, H], weights.dense),
        tensor('zero', INT64, [], new BigInt64Array([0n])),
        tensor('one', INT64, [], new BigInt64Array([1n])),
        tensor('axis_1', INT64, [1], new BigInt64Array([1n])),
        tensor('axis_2', INT64, [1], new BigInt64Array([2n])),
      ],
      node: [
        node('Gather', ['word_embeddings', 'input_ids'], 'words'),
        node('Shape', ['input_ids'], 'shape'),
        node('Gather', ['shape', 'one'], 'sequence_length'),
        node('Range', ['zero', 'sequence_length', 'one'], 'positions'),
        node('Gather', ['position_embeddings', 'positions'], 'position_vectors'),
        node('Add', ['words', 'position_vectors'], tokenTypes ? 'h0' : 'h'),
        ...(tokenTypes
          ? [node('Gather', ['token_type_embeddings', 'token_type_ids'], 'type_vectors'), node('Add', ['h0', 'type_vectors'], 'h')]
          : []),
        node('Cast', ['attention_mask'], 'mask_float', [{ name: 'to', type: INT, i: FLOAT }]),
        node('Unsqueeze', ['mask_float', 'axis_2'], 'mask'),
        node('Mul', ['h', 'mask'], 'masked'),
        node('ReduceSum', ['masked', 'axis_1'], 'summed', [{ name: 'keepdims', type: INT, i: 1 }]),
        node('ReduceSum', ['mask', 'axis_1'], 'count', [{ name: 'keepdims', type: INT, i: 1 }]),
        node('Div', ['summed', 'count'], 'context'),
        node('Add', ['h', 'context'], 'mixed'),
        node('MatMul', ['mixed', 'dense'], 'projected'),
        node('Tanh', ['projected'], 'last_hidden_state'),
        node('Squeeze', ['context', 'axis_1'], 'sentence_embedding'),
      ],
    },
  });
  return { onnx: onnx.ModelProto.encode(model).finish(), weights, tokenTypes };
}

/** What the model and a pooling give for one text's ids, in float64, L2-normalised. */
export function referenceEmbedding(model: TinyBert, ids: number[], pooling: Pooling): number[] {
  const H = TINY_HIDDEN;
  const { word, position, tokenType, dense } = model.weights;
  const h = ids.map((id, t) =>
    Array.from({ length: H }, (_, d) => word[id * H + d] + position[t * H + d] + (model.tokenTypes ? tokenType[d] : 0)),
  );
  const context = Array.from({ length: H }, (_, d) => h.reduce((sum, v) => sum + v[d], 0) / h.length);
  const out = h.map((v) =>
    Array.from({ length: H }, (_, j) => Math.tanh(v.reduce((sum, x, i) => sum + (x + context[i]) * dense[i * H + j], 0))),
  );
  const vector =
    pooling === 'none' ? context : pooling === 'cls' ? out[0] : Array.from({ length: H }, (_, d) => out.reduce((s, v) => s + v[d], 0) / out.length);
  const norm = Math.hypot(...vector);
  return vector.map((x) => x / norm);
}

/** tokenizer.json as Hugging Face writes it for an uncased BERT WordPiece tokenizer. */
export function tinyTokenizerJson(): string {
  const id = (token: string) => TINY_VOCAB.indexOf(token);
  const special = (token: string, typeId = 0) => ({ SpecialToken: { id: token, type_id: typeId } });
  return JSON.stringify({
    version: '1.0',
    truncation: { direction: 'Right', max_length: 128, strategy: 'LongestFirst', stride: 0 },
    padding: { strategy: 'BatchLongest', direction: 'Right', pad_to_multiple_of: null, pad_id: 0, pad_type_id: 0, pad_token: '[PAD]' },
    added_tokens: ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'].map((content) => ({
      id: id(content),
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [special('[CLS]'), { Sequence: { id: 'A', type_id: 0 } }, special('[SEP]')],
      pair: [special('[CLS]'), { Sequence: { id: 'A', type_id: 0 } }, special('[SEP]'), { Sequence: { id: 'B', type_id: 1 } }, special('[SEP]', 1)],
      special_tokens: {
        '[CLS]': { id: '[CLS]', ids: [id('[CLS]')], tokens: ['[CLS]'] },
        '[SEP]': { id: '[SEP]', ids: [id('[SEP]')], tokens: ['[SEP]'] },
      },
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: {
      type: 'WordPiece',
      unk_token: '[UNK]',
      continuing_subword_prefix: '##',
      max_input_chars_per_word: 100,
      vocab: Object.fromEntries(TINY_VOCAB.map((token, i) => [token, i])),
    },
  });
}

export function tinyVocabTxt(): string {
  return TINY_VOCAB.join('\n') + '\n';
}

export function sha256(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

export interface TinyModelOptions {
  pooling?: Pooling;
  output?: string;
  tokenizer?: TokenizerFile;
  maxLength?: number;
  tokenTypes?: boolean;
  seed?: number;
  dimension?: number;
}

/** Writes an installed model folder <modelsDir>/<name>/ (model.onnx, tokenizer, model.json). */
export async function installTinyBert(modelsDir: string, name: string, options: TinyModelOptions = {}): Promise<{ model: TinyBert; manifest: TransformerManifest; dir: string }> {
  const model = buildTinyBert(options);
  const tokenizerFile = options.tokenizer ?? 'tokenizer.json';
  const tokenizerText = tokenizerFile === 'vocab.txt' ? tinyVocabTxt() : tinyTokenizerJson();
  const dir = join(modelsDir, name);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'model.onnx'), model.onnx);
  await writeFile(join(dir, tokenizerFile), tokenizerText);
  const manifest: TransformerManifest = {
    format: TRANSFORMER_FORMAT,
    name,
    dimension: options.dimension ?? TINY_HIDDEN,
    max_length: options.maxLength ?? TINY_POSITIONS,
    pooling: options.pooling ?? 'mean',
    output: options.output ?? 'last_hidden_state',
    lowercase: true,
    files: {
      model: { path: 'model.onnx', sha256: sha256(model.onnx) },
      tokenizer: { path: tokenizerFile, sha256: sha256(tokenizerText) },
    },
    source: null,
  };
  await writeFile(join(dir, 'model.json'), formatManifest(manifest));
  return { model, manifest, dir };
}
