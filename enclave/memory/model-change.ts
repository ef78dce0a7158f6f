/**
 * Vectors of two embedding models must never share an index: they live in different spaces
 * (or even dimensions), so their cosine means nothing. The memory state therefore records the
 * model its vectors come from (MemoryService.embeddingModel), and at start-up the recorded
 * model is compared with the configured one; on a change the memories are re-embedded from
 * their stored content, or the enclave refuses to start.
 *
 * A model is the same only if its id, dimension AND hash agree: a model rebuilt or replaced
 * under the same name (e.g. a new static model build) also changes the vectors.
 */
import type { Logger } from '../../common/logger.js';
import type { Embedder } from '../embedding/embedder.js';
import type { MemoryService } from './memory-service.js';

export interface EmbeddingModelId {
  id: string;
  dimension: number;
  /** Embedder.sha256: the hash attestation measures. */
  sha256: string;
}

export type ModelChangePolicy = 'reembed' | 'refuse';

export function sameEmbeddingModel(a: EmbeddingModelId, b: EmbeddingModelId): boolean {
  return a.id === b.id && a.dimension === b.dimension && a.sha256 === b.sha256;
}

const describe = (m: EmbeddingModelId) => `${m.id} (${m.dimension}-d, sha256 ${m.sha256.slice(0, 12)})`;

/**
 * What to do with memories recorded under `recorded` now that `current` is configured:
 * 'keep' their vectors (same model, or nothing recorded yet), or 'reembed' them. With the
 * 'refuse' policy a change throws, naming both models and the ways out.
 */
export function checkEmbeddingModel(recorded: EmbeddingModelId | undefined, current: EmbeddingModelId, policy: ModelChangePolicy): 'keep' | 'reembed' {
  if (!recorded || sameEmbeddingModel(recorded, current)) return 'keep';
  if (policy === 'refuse') {
    throw new Error(
      `the stored memories were embedded with ${describe(recorded)} but the configured embedding model is ${describe(current)}; ` +
        `refusing to mix vectors of two models: set EMBEDDING_MODEL=${recorded.id} (with the same model files), or allow re-embedding`,
    );
  }
  return 'reembed';
}

/** Progress is logged at every tenth of the work, so a large store shows it moving without flooding the log. */
const PROGRESS_STEPS = 10;

/**
 * Re-embeds every memory with `embedder`, logging progress; throws (leaving the memories as
 * they were) if embedding fails, so the caller can refuse to start rather than serve a mix.
 */
export async function reembedWithProgress(memory: MemoryService, embedder: Embedder, log: Pick<Logger, 'info'>): Promise<void> {
  const started = performance.now();
  let memories = 0;
  let nextStep = 0;
  await memory.reembed(embedder, (done, total) => {
    memories = total;
    const step = total === 0 ? PROGRESS_STEPS : Math.floor((done / total) * PROGRESS_STEPS);
    if (step < nextStep && done !== total) return;
    nextStep = step + 1;
    log.info({ done, total, percent: total === 0 ? 100 : Math.round((done / total) * 100) }, `re-embedding memories with ${embedder.id}`);
  });
  const seconds = Number(((performance.now() - started) / 1000).toFixed(1));
  log.info({ model: embedder.id, memories, seconds }, 're-embedded all memories');
}

/**
 * The start-up check in one call: keeps the memories if `recorded` is the configured model,
 * otherwise re-embeds them (policy 'reembed') or throws (policy 'refuse').
 * `memory` must hold the restored records; their old vectors are discarded on re-embedding.
 */
export async function reconcileEmbeddingModel(options: {
  memory: MemoryService;
  recorded: EmbeddingModelId | undefined;
  embedder: Embedder;
  policy: ModelChangePolicy;
  log: Pick<Logger, 'info'>;
}): Promise<'keep' | 'reembed'> {
  const { memory, recorded, embedder, policy, log } = options;
  const action = checkEmbeddingModel(recorded, { id: embedder.id, dimension: embedder.dimension, sha256: embedder.sha256 }, policy);
  if (action === 'reembed') {
    log.info({ from: describe(recorded!), to: embedder.id }, 'embedding model changed: re-embedding every stored memory');
    await reembedWithProgress(memory, embedder, log);
  }
  return action;
}
