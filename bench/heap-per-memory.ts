/**
 * The V8 heap a memory costs the enclave's MemoryService besides its content: the source of
 * the figures in docs/configuration.md ("Words and heap") that enclave/memory/heap-budget.ts
 * sizes the heap from. In process, corpus memories (bench/corpus.ts), the heap measured after
 * two full collections before and after the adds and one query a tenant (up to 50).
 *
 *   node --expose-gc dist/bench/heap-per-memory.js [memories = 100000] [per tenant = memories]
 */
import { modelsDir } from '../common/paths.js';
import { loadEmbedder } from '../enclave/embedding/embedder.js';
import { MemoryService } from '../enclave/memory/memory-service.js';
import { memoryText } from './corpus.js';

const collect = globalThis.gc;
if (!collect) {
  process.stderr.write('run with node --expose-gc\n');
  process.exit(2);
}
const memories = Number(process.argv[2] ?? 100_000);
const perTenant = Number(process.argv[3] ?? memories);
const heapUsed = () => {
  collect();
  collect();
  return process.memoryUsage().heapUsed;
};

const model = await loadEmbedder({ name: 'static', modelsDir });
const service = new MemoryService(model);
const before = heapUsed();
let contentBytes = 0;
for (let start = 0; start < memories; start += 500) {
  const batch = [];
  for (let i = start; i < Math.min(memories, start + 500); i++) {
    const content = memoryText(i);
    contentBytes += Buffer.byteLength(content);
    batch.push({ content, tenant_id: `t${Math.floor(i / perTenant)}` });
  }
  await service.addMany(batch);
}
// Indexes built on a tenant's first query exist once it is served.
for (let t = 0; t < Math.min(50, Math.ceil(memories / perTenant)); t++) await service.query({ tenant_id: `t${t}`, query: 'where is the meeting', top_k: 10 });
const grew = heapUsed() - before;
console.log(JSON.stringify({
  memories,
  perTenant,
  heapMiB: Number((grew / 2 ** 20).toFixed(1)),
  contentBytesPerMemory: Number((contentBytes / memories).toFixed(1)),
  heapBytesPerMemoryBesidesContent: Math.round((grew - contentBytes) / memories),
}));
await model.close();
