import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { RANKING_SPARE } from '../../enclave/memory/tenant-query.js';
import { REPLICATE_AFTER_QUERIES } from '../../enclave/memory/tenant-memories.js';
import type { MemoryRecord, ScoredMemory } from '../../enclave/memory/types.js';
import type { QueryMemoryInput } from '../../common/schemas.js';
import { MAX_UNAPPLIED_CHANGES, Replica, SearchReplicas } from '../../enclave/search-worker/search-replicas.js';
import { DEFAULT_TIERS } from '../../enclave/vectors/tiered-index.js';
import { memoryText, questionText } from '../../bench/corpus.js';
import { buildStaticSifModel } from '../../scripts/build-model.js';

// A large tenant: past both the vector (4,096) and the lexical (2,048) thresholds.
const SIZE = 5_000;
let embedder: Embedder;
const services: Array<{ memory: MemoryService; replicas?: SearchReplicas }> = [];

beforeAll(async () => {
  await buildStaticSifModel();
  embedder = await loadEmbedder({ name: 'static', modelsDir });
});
afterAll(async () => {
  await Promise.all(services.map((s) => s.replicas?.close()));
  await embedder?.close();
});

/**
 * A memory service with SIZE memories of tenant 'big', with or without a search worker. They
 * are stored in runs of 20 (run_id), so every query's hits lend to their neighbouring turns
 * (retrieval/neighbour-lending.ts), which the paths must do alike too.
 */
async function service(withWorker: boolean, onFailure?: (err: Error) => void) {
  const replicas = withWorker ? new SearchReplicas({ dimension: embedder.dimension, hnsw: DEFAULT_TIERS.hnsw }, onFailure) : undefined;
  const memory = new MemoryService(embedder, { searchReplicas: replicas });
  for (let i = 0; i < SIZE; i += 500) {
    await memory.addMany(Array.from({ length: 500 }, (_, j) => ({ tenant_id: 'big', content: memoryText(i + j), run_id: `run-${Math.floor((i + j) / 20)}` })));
  }
  services.push({ memory, replicas });
  return { memory, replicas };
}

/**
 * The service without a worker that tests compare against: it is only queried, never
 * changed, so one serves every test (building SIZE memories takes seconds of CPU).
 */
let reference: ReturnType<typeof service> | undefined;
const eventLoopOnly = () => (reference ??= service(false));

/**
 * Runs `query` with other queries under way, as under load, and answers it. A query alone
 * is ranked on the event loop, its BM25 search sent to the worker: the first begins alone;
 * `query` begins second, and is still ranking after its embedding while the third waits
 * for its own, so the worker ranks it whole.
 */
async function underLoad(memory: MemoryService, query: QueryMemoryInput): Promise<ScoredMemory[]> {
  const other = { tenant_id: 'big', query: 'another question', top_k: 1 };
  const [, hits] = await Promise.all([memory.query(other), memory.query(query), memory.query(other)]);
  return hits;
}

/** Queries until the worker answers (the REPLICATE_AFTER_QUERIES-th query starts the tenant's copy there). */
async function untilServedByWorker(memory: MemoryService, replicas: SearchReplicas): Promise<void> {
  const before = replicas.answered;
  for (let i = 0; i < 400 && replicas.answered === before; i++) {
    await underLoad(memory, { tenant_id: 'big', query: 'warm up', top_k: 1 });
    await new Promise((r) => setTimeout(r, 25));
  }
  expect(replicas.answered).toBeGreaterThan(before);
}

/** Runs `then` once, as the first search goes to the worker; the answer says whether it has. */
function onFirstSearch(replicas: SearchReplicas, then: () => void): () => boolean {
  const search = replicas.search.bind(replicas);
  let done = false;
  replicas.search = (...args) => {
    const found = search(...args);
    if (found && !done) {
      done = true;
      then();
    }
    return found;
  };
  return () => done;
}

const shape = (hits: ScoredMemory[]) => hits.map((h) => ({ content: h.record.content, score: h.score, scores: h.scores }));

describe('the search worker', () => {
  it('answers a large tenant\'s queries from its copy, exactly as the event loop would', async () => {
    const here = await eventLoopOnly();
    const there = await service(true);
    await untilServedByWorker(there.memory, there.replicas!);
    // The two services hold the same memories under different ids: compare contents and scores.
    const [answered, matched] = [there.replicas!.answered, there.replicas!.matched];
    for (let i = 0; i < 60; i++) {
      const query = { tenant_id: 'big', query: questionText(i), top_k: 10 };
      expect(shape(await underLoad(there.memory, query))).toEqual(shape(await here.memory.query(query)));
    }
    // Each compared query went to the worker whole (the third of each trio may have too), and
    // the first of each, alone when it began, sent its BM25 search there.
    expect(there.replicas!.answered).toBeGreaterThanOrEqual(answered + 60);
    expect(there.replicas!.matched).toBe(matched + 60);
  });

  it('keeps no copy of a large tenant queried only now and then, and ranks a query alone on the event loop', async () => {
    const { memory, replicas } = await service(true);
    for (let i = 0; i < REPLICATE_AFTER_QUERIES - 1; i++) await memory.query({ tenant_id: 'big', query: questionText(i), top_k: 5 });
    expect(replicas!.copies).toBe(0);
    expect(replicas!.matched).toBe(0);
    await memory.query({ tenant_id: 'big', query: questionText(99), top_k: 5 });
    expect(replicas!.copies).toBe(1);
    await untilServedByWorker(memory, replicas!);
    const [answered, matched] = [replicas!.answered, replicas!.matched];
    await memory.query({ tenant_id: 'big', query: questionText(100), top_k: 5 });
    // Only its BM25 search went to the worker.
    expect(replicas!.answered).toBe(answered);
    expect(replicas!.matched).toBe(matched + 1);
  });

  it('gives a query alone the same answer when the worker finds its BM25 hits', async () => {
    const here = await eventLoopOnly();
    const there = await service(true);
    await untilServedByWorker(there.memory, there.replicas!);
    const matched = there.replicas!.matched;
    for (let i = 0; i < 60; i++) {
      const query = { tenant_id: 'big', query: questionText(200 + i), top_k: 10 };
      expect(shape(await there.memory.query(query))).toEqual(shape(await here.memory.query(query)));
    }
    expect(there.replicas!.matched).toBe(matched + 60);
    // A memory added since the copy was built is found.
    const added = await there.memory.add({ tenant_id: 'big', content: 'My pet axolotl is called Quetzalcoatl.' });
    const [best] = await there.memory.query({ tenant_id: 'big', query: 'Quetzalcoatl', top_k: 1 });
    expect(best.record.id).toBe(added.id);
    expect(best.scores.lexical).toBeGreaterThan(0);
  });

  it('sees every change made after its copy was built', async () => {
    const { memory, replicas } = await service(true);
    await untilServedByWorker(memory, replicas!);
    const find = async (query: string) => (await underLoad(memory, { tenant_id: 'big', query, top_k: 3 })).map((h) => h.record.content);

    const added = await memory.add({ tenant_id: 'big', content: 'My pet axolotl is called Quetzalcoatl.' });
    expect((await find('what is my axolotl called'))[0]).toBe(added.content);

    const updated = await memory.update('big', added.id, { content: 'My pet iguana is called Moctezuma.' });
    expect((await find('what is my iguana called'))[0]).toBe(updated!.content);
    expect(await find('Quetzalcoatl axolotl')).not.toContain(added.content);

    await memory.delete('big', added.id);
    expect(await find('what is my iguana called Moctezuma')).not.toContain(updated!.content);
    // Every one of those queries went to the worker.
    expect(replicas!.answered).toBeGreaterThanOrEqual(4);
  });

  it('leaves out a memory deleted while the worker ranks the query, and answers top_k from the rest', async () => {
    const { memory, replicas } = await service(true);
    await untilServedByWorker(memory, replicas!);
    const target = await memory.add({ tenant_id: 'big', content: 'My pet axolotl is called Quetzalcoatl.' });
    // The worker ranks without the records: delete the best answer once the query is on its way there.
    const sent = onFirstSearch(replicas!, () => void memory.delete('big', target.id));
    const answered = replicas!.answered;
    const hits = await underLoad(memory, { tenant_id: 'big', query: 'what is my axolotl called Quetzalcoatl', top_k: 3 });
    expect(sent()).toBe(true);
    expect(replicas!.answered).toBeGreaterThan(answered);
    expect(memory.get('big', target.id)).toBeUndefined();
    expect(hits.map((h) => h.record.id)).not.toContain(target.id);
    expect(hits).toHaveLength(3);
  });

  it('ranks a query on the event loop when more of the worker\'s ranking was deleted meanwhile than it sent to spare', async () => {
    const { memory, replicas } = await service(true);
    await untilServedByWorker(memory, replicas!);
    // More than the worker sends (top_k + RANKING_SPARE), all better answers than the corpus.
    const pets = await memory.addMany(Array.from({ length: RANKING_SPARE + 8 }, (_, i) => ({ tenant_id: 'big', content: `My axolotl number ${i} is called Quetzalcoatl.` })));
    const survivors = pets.slice(0, 2).map((p) => p.id);
    const sent = onFirstSearch(replicas!, () => {
      for (const pet of pets.slice(2)) void memory.delete('big', pet.id);
    });
    const query = { tenant_id: 'big', query: 'what is my axolotl called Quetzalcoatl', top_k: 3 };
    const answered = replicas!.answered;
    const hits = await underLoad(memory, query);
    expect(sent()).toBe(true);
    expect(replicas!.answered).toBeGreaterThan(answered);
    // The worker's first 13 held at most the 2 survivors: the third answer needed a ranking here.
    expect(hits).toHaveLength(3);
    expect(hits.slice(0, 2).map((h) => h.record.id).sort()).toEqual([...survivors].sort());
    // The same memories as a query now (its scores differ in the last digits: the tenant's mean moved with the deletions).
    expect(hits.map((h) => h.record.id)).toEqual((await memory.query(query)).map((h) => h.record.id));
  });

  it('searches on the event loop while the worker has many changes still to apply', async () => {
    const { memory, replicas } = await service(true);
    await untilServedByWorker(memory, replicas!);
    // Enough that the worker takes far longer to apply them (a tenth of a second or more)
    // than the queries below take to be answered.
    await memory.addMany(Array.from({ length: MAX_UNAPPLIED_CHANGES * 30 }, (_, i) => ({ tenant_id: 'big', content: `Parcel ${i} of the garden is planted with kohlrabi.` })));
    // Whether the worker took each search or match. Only the first ask is certain to be
    // refused: the worker may catch up (and say so) before the others ask, if this thread stalls.
    const taken: boolean[] = [];
    const search = replicas!.search.bind(replicas);
    const match = replicas!.match.bind(replicas);
    replicas!.search = (...args) => record(search(...args));
    replicas!.match = (...args) => record(match(...args));
    const record = <T>(found: T | undefined) => {
      taken.push(found !== undefined);
      return found;
    };
    const hits = await underLoad(memory, { tenant_id: 'big', query: 'which parcel has kohlrabi', top_k: 5 });
    expect(hits).toHaveLength(5);
    expect(hits.every((h) => h.record.content.includes('kohlrabi'))).toBe(true);
    expect(taken[0]).toBe(false);
    // Once the worker has caught up, searches go there again, and see those memories.
    await untilServedByWorker(memory, replicas!);
    const again = await underLoad(memory, { tenant_id: 'big', query: 'which parcel has kohlrabi', top_k: 5 });
    expect(again.map((h) => h.record.id)).toEqual(hits.map((h) => h.record.id));
  });

  it('leaves filtered queries on the event loop', async () => {
    const { memory, replicas } = await service(true);
    await untilServedByWorker(memory, replicas!);
    const tagged: MemoryRecord = await memory.add({ tenant_id: 'big', content: 'My locker code is 4471.', metadata: { kind: 'secret' } });
    const answered = replicas!.answered;
    const filtered = { tenant_id: 'big', query: 'locker code', top_k: 5, filters: { kind: 'secret' } };
    const [hits] = await Promise.all([memory.query(filtered), memory.query(filtered)]);
    expect(hits.map((h) => h.record.id)).toEqual([tagged.id]);
    expect(replicas!.answered).toBe(answered);
  });

  it('when the worker fails, every query is still answered, on the event loop', async () => {
    const failures: Error[] = [];
    const here = await eventLoopOnly();
    const there = await service(true, (err) => failures.push(err));
    await untilServedByWorker(there.memory, there.replicas!);
    // A change the copy cannot take (a vector of the wrong size) ends the worker; the tenant's copy is its first, number 1.
    there.replicas!.add(new Replica(1), 'mem_x', 'text', new Float32Array(3));
    await expect.poll(() => failures.length, { timeout: 10_000 }).toBe(1);
    const answered = there.replicas!.answered;
    const query = { tenant_id: 'big', query: questionText(3), top_k: 10 };
    const contents = (hits: ScoredMemory[]) => hits.map((h) => h.record.content);
    expect(contents(await underLoad(there.memory, query))).toEqual(contents(await here.memory.query(query)));
    expect(there.replicas!.answered).toBe(answered);
  });

  it('refuses a search or a match for a copy it does not hold, so the event loop searches instead', async () => {
    const replicas = new SearchReplicas({ dimension: embedder.dimension, hnsw: DEFAULT_TIERS.hnsw });
    services.push({ memory: new MemoryService(embedder), replicas });
    const unknown = new Replica(999);
    unknown.ready = true;
    const vector = new Float32Array(embedder.dimension);
    await expect(replicas.match(unknown, 'any question', 5)).rejects.toThrow('no replica 999');
    await expect(replicas.search(unknown, 'any question', vector, vector, 5, 5)).rejects.toThrow('no replica 999');
    // The worker lives on: a failed query is not a failed worker.
    expect(replicas.exitCode).toBeUndefined();
  });

  it('stops a busy worker between two hnswlib calls instead of terminating it inside one', async () => {
    // A worker terminated inside an hnswlib call takes the whole process down (a FATAL ERROR
    // from node-addon-api; seen once in twelve closes under heavy changes): close() raises
    // the stop flag and the worker ends by itself (exit code 0; terminated, it would be 1).
    const replicas = new SearchReplicas({ dimension: embedder.dimension, hnsw: DEFAULT_TIERS.hnsw });
    let seed = 7;
    const vector = () => Float32Array.from({ length: embedder.dimension }, () => ((seed = (seed * 16807) % 2147483647) / 2147483647) - 0.5);
    const replica = replicas.create({
      texts: function* () {
        for (let i = 0; i < 3_000; i++) yield [`m${i}`, `memory ${i}`];
      },
      vectors: () => {
        const vectors = new Float32Array(3_000 * embedder.dimension);
        for (let i = 0; i < 3_000; i++) vectors.set(vector(), i * embedder.dimension);
        return { ids: Array.from({ length: 3_000 }, (_, i) => `m${i}`), vectors };
      },
    })!;
    for (let i = 3_000; i < 8_000; i++) replicas.add(replica, `m${i}`, `memory ${i}`, vector());
    // Mid-build or mid-changes: either takes the worker seconds.
    await new Promise((r) => setTimeout(r, 200));
    await replicas.close();
    expect(replicas.exitCode).toBe(0);
  });
});
