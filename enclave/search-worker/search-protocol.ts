import type { HnswOptions } from '../vectors/hnsw-index.js';

/**
 * The messages between the enclave's event loop and its search worker
 * (search-worker/search-replicas.ts, search-worker/search-worker.ts). They travel on one port, so
 * the worker sees changes and searches in the order the event loop sent them.
 */
export interface WorkerSetup {
  dimension: number;
  hnsw: HnswOptions;
}

/**
 * The worker's workerData: its setup, and a flag (one Int32, 0 or 1) the event loop raises
 * to stop it. The worker checks the flag between two hnswlib calls: a worker terminated
 * inside one aborts the whole process (a FATAL ERROR from node-addon-api), so it is asked
 * to stop and ends itself instead.
 */
export interface WorkerData extends WorkerSetup {
  stop: SharedArrayBuffer;
}

export type ToWorker =
  /** A replica of one tenant's searchable memories, as they are now: every memory's text, and `vectors` holds a row for each of `vectorIds`. */
  | { op: 'build'; replica: number; ids: string[]; texts: string[]; vectorIds: string[]; vectors: Float32Array }
  | { op: 'add'; replica: number; id: string; text: string; vector?: Float32Array }
  | { op: 'remove'; replica: number; id: string; text: string }
  | { op: 'drop'; replica: number }
  /**
   * A hybrid query, searched and ranked: `vector` is the query's embedding and `mean` the
   * tenant's mean as the event loop has it, one after the other in `vectors`. Only the first
   * `keep` of the ranking are sent back (the event loop needs top_k of them).
   */
  | { op: 'search'; seq: number; replica: number; query: string; vectors: Float32Array; depth: number; keep: number; changes: number }
  /** BM25's top `depth` for a query, alone: the event loop does the rest of it meanwhile. */
  | { op: 'match'; seq: number; replica: number; query: string; depth: number; changes: number }
  /** Asks when the first `changes` changes sent have been applied. */
  | { op: 'sync'; changes: number }
  /** Wakes an idle worker to see the stop flag (WorkerData.stop). */
  | { op: 'stop' };

export type FromWorker =
  | { op: 'built'; replica: number }
  /**
   * The ranking, best first: `scores` holds (fused, vector, lexical) for each of `ids`, lexical
   * 0 where no query term matched. `changes`: the search came after that many changes, all
   * applied now.
   */
  | { op: 'found'; seq: number; ids: string[]; scores: Float64Array; changes: number }
  /** BM25's top hits, best first: `scores` holds each of `ids`' score. */
  | { op: 'matched'; seq: number; ids: string[]; scores: Float64Array; changes: number }
  | { op: 'synced'; changes: number }
  | { op: 'failed'; seq: number; message: string };
