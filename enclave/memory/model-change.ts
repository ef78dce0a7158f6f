/**
 * Vectors of two embedding models must never share an index: they live in different spaces
 * (or even dimensions), so their cosine means nothing. The durable store therefore records
 * the model its vectors come from (MemoryService.embeddingModel) in every file, and at start
 * a change of model re-embeds every memory from its stored content or is refused
 * (ON_MODEL_CHANGE; enclave/storage/store.ts).
 *
 * A model is the same only if its id, dimension AND hash agree: a model rebuilt or replaced
 * under the same name (e.g. a new static model build) also changes the vectors.
 */
import type { Logger } from '../../common/logger.js';
import type { Embedder } from '../embedding/types.js';
import type { EmbeddingModelId } from './types.js';

export type ModelChangePolicy = 'reembed' | 'refuse';

export function sameEmbeddingModel(a: EmbeddingModelId, b: EmbeddingModelId): boolean {
  return a.id === b.id && a.dimension === b.dimension && a.sha256 === b.sha256;
}

export const describeModel = (m: EmbeddingModelId) => `${m.id} (${m.dimension}-d, sha256 ${m.sha256.slice(0, 12)})`;

/** What re-embedding needs of the memory service (MemoryService.reembed). */
export interface Reembeddable {
  reembed(embedder: Embedder, onProgress?: (done: number, total: number) => void): Promise<void>;
}

/** Progress is logged at every tenth of the work, so a large store shows it moving without flooding the log. */
const PROGRESS_STEPS = 10;

/**
 * Re-embeds every memory with `embedder`, logging progress; throws (leaving the memories as
 * they were) if embedding fails, so the caller can refuse to start rather than serve a mix.
 */
export async function reembedWithProgress(memory: Reembeddable, embedder: Embedder, log: Pick<Logger, 'info'>): Promise<void> {
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
