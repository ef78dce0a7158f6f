import { modelsDir } from '../common/paths.js';
import { loadEmbedder } from '../enclave/embedding/embedder.js';
import { MemoryService } from '../enclave/memory/memory-service.js';
import { timeIt } from './stats.js';

const topics = ['dog', 'invoice', 'flight', 'birthday', 'doctor', 'coffee', 'project', 'password', 'garden', 'car'];
const sentence = (i: number) => `Note ${i}: the ${topics[i % topics.length]} reminder about ${topics[(i * 7) % topics.length]} on day ${i % 31}`;

/**
 * In-process memory benchmark (no HTTP): embedding one text vs. a batch, and query
 * latency as a tenant grows. Ratios are computed within this one run.
 */
export async function run(): Promise<void> {
  const embedder = await loadEmbedder({ name: 'static', modelsDir });

  const texts = Array.from({ length: 100 }, (_, i) => sentence(i));
  const one = await timeIt(200, () => embedder.embed([texts[0]]));
  const batch = await timeIt(50, () => embedder.embed(texts));
  console.log(`embed: 1 text p50 ${one.p50.toFixed(3)} ms; 100 texts in one run p50 ${batch.p50.toFixed(2)} ms ` +
    `(${(batch.p50 / 100).toFixed(4)} ms/text, ${(one.p50 / (batch.p50 / 100)).toFixed(1)}x cheaper per text batched)`);

  const memory = new MemoryService(embedder);
  let stored = 0;
  for (const size of [100, 1_000, 10_000]) {
    const before = stored;
    const started = performance.now();
    for (; stored < size; stored++) await memory.add({ tenant_id: 'bench', content: sentence(stored) });
    const addMs = performance.now() - started;
    const q = await timeIt(200, async () => {
      const hits = await memory.query({ tenant_id: 'bench', query: 'when is the doctor appointment', top_k: 5 });
      if (hits.length !== 5) throw new Error(`expected 5 results, got ${hits.length}`);
    });
    console.log(`tenant of ${size.toLocaleString('en')} memories: query top-5 p50 ${q.p50.toFixed(3)} ms, p99 ${q.p99.toFixed(3)} ms; ` +
      `adds ran at ${Math.round((size - before) / (addMs / 1000)).toLocaleString('en')}/s`);
  }
  await embedder.close();
}
