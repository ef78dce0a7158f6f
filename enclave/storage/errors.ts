import { describeModel } from '../memory/model-change.js';
import type { EmbeddingModelId } from '../memory/types.js';

/**
 * Refusals of the durable store. Each stops the enclave at start with its message: a
 * store that cannot be read completely is never served in part.
 */

/** The stored files are damaged, altered, incomplete or sealed with another key. */
export class CorruptStoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CorruptStoreError';
  }
}

/**
 * The stored vectors came from a different embedding model than the one this enclave
 * runs, and re-embedding is not allowed (ON_MODEL_CHANGE=refuse): they cannot be compared
 * with new ones. `stored` names the model to start with.
 */
export class EmbeddingModelChangedError extends Error {
  constructor(
    readonly stored: EmbeddingModelId,
    readonly current: EmbeddingModelId,
    where: string,
  ) {
    super(
      `${where} holds vectors from embedding model ${describeModel(stored)} but this enclave runs ${describeModel(current)}; ` +
      `refusing to mix vectors of two models: start with EMBEDDING_MODEL=${stored.id} (the same model files), ` +
      'or set ON_MODEL_CHANGE=reembed to re-embed every stored memory with the new model',
    );
    this.name = 'EmbeddingModelChangedError';
  }
}
