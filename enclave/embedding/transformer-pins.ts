/**
 * Transformer models `npm run model:fetch -- <name>` knows: each pinned to one commit of its
 * public Hugging Face repository, with the SHA-256 every file must have.
 *
 * A file is only ever installed when its bytes hash to `sha256`. Where no hash has been
 * verified yet, `sha256` is null and the fetch (and `--from` import) of that model refuses,
 * saying how to pin it. `reportedSha256` records what other public projects pinning the same
 * revision publish for the file: a lead for whoever verifies it, never trusted by the fetch.
 *
 * To pin a file: open `https://huggingface.co/<repo>/blob/<revision>/<path>` (the page of a
 * Git LFS file shows its "SHA256"), or download it from the `resolve` URL and run
 * `sha256sum`; check the two agree (and with `reportedSha256`), then set `sha256` here.
 */
import type { Pooling, TokenizerFile } from './transformer-manifest.js';

export interface PinnedFile<P extends string = string> {
  /** Path of the file in the repository at `revision`. */
  path: P;
  /** Verified SHA-256 (hex); null: not verified, the model cannot be installed. */
  sha256: string | null;
  /** UNVERIFIED: the hash third parties report for this file at this revision. */
  reportedSha256?: string;
}

export interface ModelPin {
  /** EMBEDDING_MODEL value and folder under models/. */
  name: string;
  /** Hugging Face repository, owner/name. */
  repo: string;
  /** Full commit id: files are fetched from this revision, never from a moving branch. */
  revision: string;
  dimension: number;
  max_length: number;
  pooling: Pooling;
  output: string;
  lowercase: boolean;
  files: { model: PinnedFile; tokenizer: PinnedFile<`${string}${TokenizerFile}`> };
}

export const HUGGING_FACE = 'https://huggingface.co';

export const PINNED_MODELS: readonly ModelPin[] = [
  {
    // sentence-transformers' 384-d MiniLM; its own config pools by the mean over tokens and
    // reads at most 256 tokens (sentence_bert_config.json max_seq_length).
    name: 'all-MiniLM-L6-v2',
    repo: 'sentence-transformers/all-MiniLM-L6-v2',
    revision: 'c9745ed1d9f207416be6d2e6f8de32d1f16199bf',
    dimension: 384,
    max_length: 256,
    pooling: 'mean',
    output: 'last_hidden_state',
    lowercase: true,
    files: {
      model: {
        path: 'onnx/model.onnx',
        sha256: null,
        reportedSha256: '6fd5d72fe4589f189f8ebc006442dbb529bb7ce38f8082112682524616046452',
      },
      tokenizer: {
        path: 'tokenizer.json',
        sha256: null,
        reportedSha256: 'be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037',
      },
    },
  },
  {
    // BAAI's 384-d BGE small v1.5: trained with CLS pooling (its 1_Pooling/config.json), up to
    // 512 tokens. BAAI's query instruction is optional for v1.5 (its model card), so queries
    // and memories are embedded alike.
    name: 'bge-small-en-v1.5',
    repo: 'BAAI/bge-small-en-v1.5',
    revision: '5c38ec7c405ec4b44b94cc5a9bb96e735b38267a',
    dimension: 384,
    max_length: 512,
    pooling: 'cls',
    output: 'last_hidden_state',
    lowercase: true,
    files: {
      model: {
        path: 'onnx/model.onnx',
        sha256: null,
        reportedSha256: '828e1496d7fabb79cfa4dcd84fa38625c0d3d21da474a00f08db0f559940cf35',
      },
      tokenizer: {
        path: 'tokenizer.json',
        sha256: null,
        reportedSha256: 'd241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66',
      },
    },
  },
];

export function findPin(name: string, pins: readonly ModelPin[] = PINNED_MODELS): ModelPin | undefined {
  return pins.find((pin) => pin.name === name);
}

/** Where a pinned file is downloaded from: the `resolve` URL at the pinned commit. */
export function pinnedFileUrl(pin: ModelPin, file: PinnedFile, base = HUGGING_FACE): string {
  return `${base.replace(/\/+$/, '')}/${pin.repo}/resolve/${pin.revision}/${file.path}`;
}
