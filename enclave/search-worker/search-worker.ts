/**
 * The search worker: a thread of the enclave holding a copy (HNSW graph, vectors and BM25
 * postings) of each large tenant the event loop hands it, and searching and ranking a hybrid
 * query there, so the event loop is free for other requests meanwhile and only looks up the
 * records of the winners (search-worker/search-replicas.ts is the other side). It holds no
 * records, keys or secrets beyond the memories' texts and vectors, and talks only to its parent.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { HnswIndex } from '../vectors/hnsw-index.js';
import { Bm25Index, type KeyedHit } from '../lexical/bm25.js';
import type { SearchCost } from '../lexical/lexical-index.js';
import type { FromWorker, ToWorker, WorkerData } from './search-protocol.js';
import { rankHybrid } from '../retrieval/hybrid.js';
import { centred } from '../retrieval/tenant-centre.js';
import { candidatesOf, type Similarities, type TenantSearch } from '../retrieval/tenant-search.js';

interface Replica {
  vectors: HnswIndex;
  lexical: Bm25Index;
}

const setup = workerData as WorkerData;
const replicas = new Map<number, Replica>();
const port = parentPort!;
const reply = (message: FromWorker) => port.postMessage(message);
/** Raised by the event loop when it closes the worker (search-protocol.ts WorkerData). */
const stop = new Int32Array(setup.stop);
const stopping = () => Atomics.load(stop, 0) !== 0;

/** The copy a query names; a query for one the worker does not hold fails (answered 'failed' below). */
function queried(id: number): Replica {
  const replica = replicas.get(id);
  if (!replica) throw new Error(`no replica ${id}`);
  return replica;
}

/**
 * The hits' ids in an array built by push: Array.prototype.map makes a holey array, which
 * postMessage writes, and the event loop reads, element by element as a sparse one.
 */
function packedIds(hits: ReadonlyArray<{ id: string }>): string[] {
  const ids: string[] = [];
  for (const hit of hits) ids.push(hit.id);
  return ids;
}

/** BM25 keys a memory by its label in the graph (-1 for none: a zero vector, or no vector). */
function addText(replica: Replica, id: string, text: string): void {
  replica.lexical.add(id, text, replica.vectors.labelOf(id) ?? -1);
}

/**
 * searchTenant() on the copy, by label: the graph's finds are scored by BM25 and the BM25
 * finds by similarity through their labels, with no lookup by id (the same scores as the
 * event loop's, which looks up by id: tested).
 */
function searchReplica(replica: Replica, query: string, vector: Float32Array, mean: Float32Array, depth: number): { searched: TenantSearch<KeyedHit>; similarity: Similarities<KeyedHit> } {
  const { vectors, lexical } = replica;
  const labels = vectors.searchLabels(centred(vector, mean), depth);
  const cost: SearchCost = { terms: 0, postingsRead: 0, postingsHeld: 0 };
  const { hits, askedScores } = lexical.searchKeyed(query, depth, labels, cost);
  const score = vectors.labelScorer(vector, mean);
  return {
    searched: { ids: labels.map((label) => vectors.idOf(label)), hits, lexicalScores: askedScores, cost },
    // A hit with no label has a zero vector or none: similarity 0, as scorer() gives it.
    similarity: { found: (j) => score(labels[j]), matched: (hit) => (hit.key >= 0 ? score(hit.key) : 0) },
  };
}

function handle(message: ToWorker): void {
  switch (message.op) {
    case 'build': {
      const { ids, texts, vectorIds, vectors } = message;
      const replica: Replica = {
        vectors: new HnswIndex(setup.dimension, setup.hnsw, Math.max(1024, vectorIds.length * 2)),
        lexical: new Bm25Index(),
      };
      for (let i = 0; i < vectorIds.length; i++) {
        // A large copy takes seconds to build: stop between two additions when asked.
        if (stopping()) return;
        replica.vectors.add(vectorIds[i], vectors.subarray(i * setup.dimension, (i + 1) * setup.dimension));
      }
      for (let i = 0; i < ids.length; i++) addText(replica, ids[i], texts[i]);
      replicas.set(message.replica, replica);
      reply({ op: 'built', replica: message.replica });
      return;
    }
    case 'add': {
      const replica = replicas.get(message.replica);
      if (!replica) return;
      if (message.vector) replica.vectors.add(message.id, message.vector);
      addText(replica, message.id, message.text);
      return;
    }
    case 'remove': {
      const replica = replicas.get(message.replica);
      if (!replica) return;
      replica.vectors.remove(message.id);
      replica.lexical.remove(message.id, message.text);
      return;
    }
    case 'drop':
      replicas.delete(message.replica);
      return;
    case 'sync':
      reply({ op: 'synced', changes: message.changes });
      return;
    case 'stop':
      return;
    case 'search': {
      const replica = queried(message.replica);
      // The same steps as the event loop's (memory/tenant-query.ts rankHere), on the copy.
      const { dimension } = setup;
      const vector = message.vectors.subarray(0, dimension);
      const mean = message.vectors.subarray(dimension, 2 * dimension);
      const { searched, similarity } = searchReplica(replica, message.query, vector, mean, message.depth);
      const ranked = rankHybrid([...candidatesOf(searched, similarity).values()], { lexicalIdeal: searched.cost.idealScore ?? 0 });
      const kept = ranked.slice(0, message.keep);
      const scores = new Float64Array(3 * kept.length);
      kept.forEach((hit, i) => {
        scores[3 * i] = hit.fused;
        scores[3 * i + 1] = hit.vector;
        scores[3 * i + 2] = hit.lexical ?? 0;
      });
      reply({ op: 'found', seq: message.seq, ids: packedIds(kept), scores, changes: message.changes });
      return;
    }
    case 'match': {
      const replica = queried(message.replica);
      const hits = replica.lexical.search(message.query, message.depth);
      reply({ op: 'matched', seq: message.seq, ids: packedIds(hits), scores: Float64Array.from(hits, (hit) => hit.score), changes: message.changes });
      return;
    }
  }
}

port.on('message', (message: ToWorker) => {
  // Closing the port drops the messages still queued and lets the thread end by itself.
  if (stopping()) {
    port.close();
    return;
  }
  try {
    handle(message);
  } catch (err) {
    // A search that failed is answered; a change that failed leaves the copy unlike the
    // tenant, so the worker ends and the event loop searches itself from then on.
    if (message.op === 'search' || message.op === 'match') reply({ op: 'failed', seq: message.seq, message: err instanceof Error ? err.message : String(err) });
    else throw err;
  }
});
