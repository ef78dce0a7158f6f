import { MemoryService } from '../memory/memory-service.js';

/**
 * The memory service with its searches timed, for GET /metrics. A subclass rather than a
 * change inside query(), which the retrieval work keeps changing: the time is the whole
 * search as a caller sees it, the query's embedding included (that is also counted on its
 * own, as embedding time).
 */
export class ObservedMemoryService extends MemoryService {
  onSearch?: (seconds: number) => void;

  override async query(...args: Parameters<MemoryService['query']>): ReturnType<MemoryService['query']> {
    const started = performance.now();
    const hits = await super.query(...args);
    this.onSearch?.((performance.now() - started) / 1000);
    return hits;
  }
}
