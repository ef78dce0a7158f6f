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
 * runs; they cannot be compared with new ones. `stored` names the model to start with,
 * or to re-embed from.
 */
export class EmbeddingModelChangedError extends Error {
  constructor(
    readonly stored: { id: string; dimension: number },
    readonly current: { id: string; dimension: number },
    where: string,
  ) {
    super(
      `${where} holds vectors from embedding model ${stored.id} (${stored.dimension} dimensions) but this enclave runs ` +
      `${current.id} (${current.dimension} dimensions); start with EMBEDDING_MODEL=${stored.id}, or re-embed the stored memories`,
    );
    this.name = 'EmbeddingModelChangedError';
  }
}
