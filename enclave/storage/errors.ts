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

/**
 * The store's files name a newer owner than this one: an owner of a higher generation (its
 * fencing token) has opened it since. Nothing was written: the store is left to that owner.
 */
export class StaleOwnerError extends Error {
  constructor(readonly store: string, readonly generation: number, readonly newer: number, where: string) {
    super(
      `${store} belongs to a newer owner: ${where} names owner generation ${newer}, and this enclave opens it as generation ${generation}; ` +
      'it is left untouched (start this enclave with a higher OWNER_GENERATION only if that owner is gone for good)',
    );
    this.name = 'StaleOwnerError';
  }
}

/**
 * A member of the service has seen a newer owner generation for the store's shard than this
 * owner's (a new owner asked it what it witnessed, or witnessed with it): that owner may serve a
 * copy without this one's latest changes, so this one acknowledges none from now on.
 */
export class SupersededError extends Error {
  constructor(message: string, readonly generation: number, readonly newer: number) {
    super(message);
    this.name = 'SupersededError';
  }
}

/**
 * A store read ahead (DurableStore.prepare: a planned move) that its files no longer continue:
 * its snapshot replaced, its last segment gone, cut short, rewritten or swapped, or a newer
 * segment that needs the store rewritten. Nothing of the files was applied past the read: the
 * store is opened by a full read instead.
 */
export class PreparedStateStale extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PreparedStateStale';
  }
}

/** A shard asked to be prepared (PrepareShard) while this enclave serves it: nothing to prepare, and its served state is left alone. */
export class ShardHeldError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ShardHeldError';
  }
}

/** A shard asked to be prepared while the enclave already keeps as many read ahead as it may (PREPARED_SHARDS_MAX): nothing was read. */
export class PreparedLimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PreparedLimitError';
  }
}
