import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { resolve } from 'node:path';
import { PendingTable } from '../../common/pending-table.js';
import { repoRoot } from '../../common/paths.js';
import type { FromWorker, ToWorker, WorkerData, WorkerSetup } from './search-protocol.js';
import type { RankedHit } from '../retrieval/tenant-search.js';
import type { LexicalHit } from '../lexical/lexical-index.js';
import type { VectorRows } from '../vectors/vector-index.js';

/** What a copy is built from: each memory's id and content, and each embedded memory's vector. */
export interface ReplicaSource {
  texts(): Iterable<[string, string]>;
  vectors(): VectorRows;
}

/**
 * Changes the worker may have left to apply before a search goes there: adds to a large
 * graph take it a fraction of a millisecond each, and a search waits behind all of them.
 */
export const MAX_UNAPPLIED_CHANGES = 64;

/** How long close() waits for the worker to end by itself before terminating it. */
const STOP_GRACE_MS = 5_000;

/** What the worker answers: a ranking (search) or BM25's hits (match). */
type Answer = RankedHit[] | LexicalHit[];

/** One tenant's copy in the worker. */
export class Replica {
  /** The worker has built it: searches may go there. */
  ready = false;
  /** The worker is gone: the copy is no more (search on the event loop). */
  lost = false;
  constructor(readonly id: number) {}
}

/** The worker's script: beside this file when built; from dist/ when this runs from source (vitest). */
function workerScript(): string {
  const here = fileURLToPath(import.meta.url);
  return here.endsWith('.ts') ? resolve(repoRoot, 'dist/enclave/search-worker/search-worker.js') : resolve(here, '../search-worker.js');
}

/**
 * Large tenants' searches on a second thread. The event loop keeps every tenant whole (and
 * can answer any query itself); for a large tenant that is queried often
 * (memory/tenant-memories.ts decides) it also keeps a copy in the worker (search-worker/search-worker.ts),
 * changed in step by message, and sends each unfiltered query there to be searched (HNSW
 * and BM25) and ranked (each candidate's similarity, the fusion), doing the rest (embedding,
 * looking up the winners' records, the answer, signing) itself. The searches were about 40%
 * of the event loop's time per query and the similarities another 15-20% (a candidate's
 * vector and its map entries are cache misses), and while they run elsewhere other
 * requests are served (docs/performance.md). Messages keep their order on the one port, so
 * a search sees every change sent before it. The cost is memory: the copy's graph, vectors
 * and postings, about 3 KB a memory.
 *
 * Searches stay on the event loop while the worker builds a copy (a build takes seconds for
 * a large tenant, and searches queued behind it would wait) or has more than
 * MAX_UNAPPLIED_CHANGES changes still to apply (heavy ingest), and for good if it fails.
 */
export class SearchReplicas {
  private readonly worker: Worker;
  /** The worker's stop flag (search-protocol.ts WorkerData). */
  private readonly stop = new Int32Array(new SharedArrayBuffer(4));
  private failed = false;
  private closing = false;
  /** How the worker ended (1: terminated); tests check that close() let it end by itself. */
  exitCode?: number;
  private building = 0;
  private lastReplica = 0;
  private lastSeq = 0;
  /** Changes sent, and how many of them the worker is known to have applied. */
  private changesSent = 0;
  private changesApplied = 0;
  private syncing = false;
  private readonly replicas = new Map<number, Replica>();
  private readonly waiting = new PendingTable<{ resolve: (answer: Answer) => void; reject: (err: Error) => void }>();
  /** Searches the worker has answered, and lexical matches (tests check with them where a query went). */
  answered = 0;
  matched = 0;

  constructor(private readonly setup: WorkerSetup, private readonly onFailure?: (err: Error) => void) {
    this.worker = new Worker(workerScript(), { workerData: { ...setup, stop: this.stop.buffer as SharedArrayBuffer } satisfies WorkerData });
    // The worker never keeps the process alive: it only answers the event loop.
    this.worker.unref();
    this.worker.on('message', (message: FromWorker) => this.received(message));
    this.worker.on('error', (err) => this.fail(err));
    this.worker.on('exit', (code) => {
      this.exitCode = code;
      this.fail(new Error(`the search worker exited with code ${code}`));
    });
  }

  /** Copies the worker holds or is building. */
  get copies(): number {
    return this.replicas.size;
  }

  /** Starts a copy of a tenant as it is now; undefined once the worker has failed. */
  create(source: ReplicaSource): Replica | undefined {
    if (this.failed) return undefined;
    const replica = new Replica(++this.lastReplica);
    // The event loop waits for this: the vectors come in one copy (VectorIndex.copyRows), not
    // looked up and copied out one by one (a 100k-memory tenant: about 150 ms that way).
    const ids: string[] = [];
    const texts: string[] = [];
    for (const [id, text] of source.texts()) {
      ids.push(id);
      texts.push(text);
    }
    const { ids: vectorIds, vectors } = source.vectors();
    this.replicas.set(replica.id, replica);
    this.building++;
    this.send({ op: 'build', replica: replica.id, ids, texts, vectorIds, vectors }, [vectors.buffer]);
    return replica;
  }

  add(replica: Replica, id: string, text: string, vector: Float32Array | undefined): void {
    if (replica.lost) return;
    this.changesSent++;
    this.send({ op: 'add', replica: replica.id, id, text, vector });
  }

  remove(replica: Replica, id: string, text: string): void {
    if (replica.lost) return;
    this.changesSent++;
    this.send({ op: 'remove', replica: replica.id, id, text });
  }

  /** Forgets a copy (its tenant is gone, or is being rebuilt). */
  drop(replica: Replica): void {
    if (replica.lost) return;
    replica.lost = true;
    replica.ready = false;
    if (this.replicas.delete(replica.id) && !this.failed) this.send({ op: 'drop', replica: replica.id });
  }

  /**
   * A query searched (`depth` results from each side) and ranked in the worker, best first,
   * the first `keep` of the ranking: `vector` is its embedding, `mean` the tenant's mean.
   * Undefined when the worker cannot take it now; rejects if it fails meanwhile (then search
   * on the event loop).
   */
  search(replica: Replica, query: string, vector: Float32Array, mean: Float32Array, depth: number, keep: number): Promise<RankedHit[]> | undefined {
    if (!this.canSearch(replica)) return undefined;
    const seq = ++this.lastSeq;
    const vectors = new Float32Array(2 * this.dimension);
    vectors.set(vector);
    vectors.set(mean, this.dimension);
    return new Promise<RankedHit[]>((resolve, reject) => {
      this.waiting.set(seq, { resolve: (answer) => resolve(answer as RankedHit[]), reject });
      this.send({ op: 'search', seq, replica: replica.id, query, vectors, depth, keep, changes: this.changesSent }, [vectors.buffer]);
    });
  }

  /**
   * BM25's top `depth` hits for a query, from the copy: a query alone sends its lexical search
   * here and does the rest on the event loop meanwhile (memory/tenant-query.ts, the split path). Undefined
   * when the worker cannot take it now, as search().
   */
  match(replica: Replica, query: string, depth: number): Promise<LexicalHit[]> | undefined {
    if (!this.canSearch(replica)) return undefined;
    const seq = ++this.lastSeq;
    return new Promise<LexicalHit[]>((resolve, reject) => {
      this.waiting.set(seq, { resolve: (answer) => resolve(answer as LexicalHit[]), reject });
      this.send({ op: 'match', seq, replica: replica.id, query, depth, changes: this.changesSent });
    });
  }

  /** Whether a search may go to the copy now: built, and the worker not too far behind the changes. */
  private canSearch(replica: Replica): boolean {
    if (!replica.ready || this.building > 0 || this.failed) return false;
    if (this.changesSent - this.changesApplied > MAX_UNAPPLIED_CHANGES) {
      // Ask where the worker is; searches go there again once it has caught up.
      if (!this.syncing) {
        this.syncing = true;
        this.send({ op: 'sync', changes: this.changesSent });
      }
      return false;
    }
    return true;
  }

  /**
   * Stops the worker: it ends by itself between two hnswlib calls (terminating it inside one
   * would abort the process), or is terminated after STOP_GRACE_MS if it does not.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.fail(new Error('the search worker was closed'));
    if (this.exitCode !== undefined) return;
    const exited = new Promise<void>((done) => this.worker.once('exit', () => done()));
    Atomics.store(this.stop, 0, 1);
    this.send({ op: 'stop' });
    const timer = setTimeout(() => void this.worker.terminate(), STOP_GRACE_MS);
    await exited;
    clearTimeout(timer);
  }

  private get dimension(): number {
    return this.setup.dimension;
  }

  private send(message: ToWorker, transfer?: ArrayBuffer[]): void {
    this.worker.postMessage(message, transfer);
  }

  private received(message: FromWorker): void {
    if (message.op === 'built') {
      this.building--;
      const replica = this.replicas.get(message.replica);
      if (replica) replica.ready = true;
      return;
    }
    if (message.op === 'synced') {
      this.syncing = false;
      this.changesApplied = Math.max(this.changesApplied, message.changes);
      return;
    }
    if (message.op === 'found' || message.op === 'matched') {
      if (message.op === 'found') this.answered++;
      else this.matched++;
      this.changesApplied = Math.max(this.changesApplied, message.changes);
    }
    const waiting = this.waiting.get(message.seq);
    if (!waiting) return;
    this.waiting.delete(message.seq);
    if (message.op === 'found') waiting.resolve(rankedHits(message.ids, message.scores));
    else if (message.op === 'matched') waiting.resolve(message.ids.map((id, i) => ({ id, score: message.scores[i] })));
    else waiting.reject(new Error(message.message));
  }

  private fail(err: Error): void {
    if (this.failed) return;
    this.failed = true;
    for (const replica of this.replicas.values()) {
      replica.lost = true;
      replica.ready = false;
    }
    this.replicas.clear();
    for (const [, { reject }] of this.waiting.list()) reject(err);
    this.waiting.clear();
    if (!this.closing) this.onFailure?.(err);
  }
}

/** The worker's ranking as hits (search-protocol.ts: three scores per id). */
function rankedHits(ids: string[], scores: Float64Array): RankedHit[] {
  return ids.map((id, i) => {
    const lexical = scores[3 * i + 2];
    return { id, fused: scores[3 * i], vector: scores[3 * i + 1], lexical: lexical > 0 ? lexical : undefined };
  });
}
