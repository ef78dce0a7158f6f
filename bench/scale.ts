/**
 * Scale: the real processes on loopback (host store, enclave, proxy), loaded with realistic
 * memories (bench/corpus.ts) over HTTP. Measures query latency and throughput as one tenant
 * grows to 1k, 10k and 100k memories, single-item and batch ingest, attestation, enclave
 * memory per memory and per tenant with many tenants, and recovery time; then, in process on
 * the same vectors, the recall of the served vector index against exact search, beside raw
 * hnswlib (the limit) and LanceDB (an embedded vector database a user might pick instead).
 * Writes bench/results.json.
 *
 *   BENCH_QUICK=1 (npm run bench -- --quick): smaller sizes, for development.
 */
import { cpus } from 'node:os';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import hnswlib from 'hnswlib-node';
import { modelsDir, repoRoot } from '../common/paths.js';
import { loadEmbedder, type Embedder } from '../enclave/embedding/embedder.js';
import { FlatIndex } from '../enclave/vectors/flat-index.js';
import { DEFAULT_TIERS, TieredIndex } from '../enclave/vectors/tiered-index.js';
import { rssMiB, startService, untilIdle, type Service } from '../scripts/lib/run-service.js';
import { memoryText, questionText } from './corpus.js';
import { LoadClient } from './load-client.js';
import { addBatch, load, loadEach, measure, over, query, round, sendEach, WARM_UP_MS } from './http-load.js';
import { cpuIdentity, describeSpeed, machineSpeed } from './machine-speed.js';
import { percentile } from './stats.js';
import { watchWritePath } from './write-path.js';

const quick = process.env.BENCH_QUICK === '1';
const SIZES = quick ? [1_000, 10_000] : [1_000, 10_000, 100_000];
const MANY_TENANTS = quick ? 500 : 10_000;
const PER_TENANT = 100;
/** Queries in each measured 1-client load. */
const QUERIES_1 = quick ? 400 : 1_000;
/**
 * Queries in each measured 16-client load: enough to span several of the service's pauses,
 * so that whether one fell in the window does not decide the p99
 * (docs/performance-log.md#a-newer-machine-and-a-full-gc-every-few-seconds-2026-11-27-night).
 */
const QUERIES_16 = quick ? 400 : 8_000;
/**
 * Longest wait, after a load, for the enclave to come to rest before measuring. A bulk load
 * leaves work behind it: a compaction's snapshot, sealed in slices on the event loop, and the
 * search worker's copy of the large tenant taking the same memories into its own graph
 * (90k HNSW inserts after the load to 100k: tens of seconds of a core). A fixed 8 s wait
 * sometimes measured the 1-client query while the worker still indexed on the other core.
 */
const SETTLE_MAX_MS = quick ? 10_000 : 120_000;

async function service(name: string, env: NodeJS.ProcessEnv = {}): Promise<{ svc: Service; client: LoadClient; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), `bench-scale-${name}-`));
  const svc = await startService({ DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0', ...env }, join(dir, 'service.log'));
  return { svc, client: new LoadClient(svc.baseUrl, 16), dir };
}

async function overHttp(results: Record<string, unknown>): Promise<void> {
  const { svc, client, dir } = await service('http');
  try {
    // One tenant grows; queries at each size, from one client and from 16.
    const queries: Record<string, unknown> = {};
    /** ms the enclave took to come to rest after each load. */
    const settled: Record<string, number> = {};
    let stored = 0;
    let loadMs = 0;
    for (const size of SIZES) {
      const started = performance.now();
      const batches = Math.ceil((size - stored) / 100);
      const filled = await load(client, 4, batches, (b) => addBatch('big', stored + b * 100, 100));
      if (filled.errors > 0) throw new Error(`${filled.errors} batch adds failed`);
      loadMs += performance.now() - started;
      stored = size;
      // Let the load's compaction and the worker's indexing finish, so the figures are for a store at rest.
      settled[`${size}`] = Math.round(await untilIdle(svc.enclave.pid, SETTLE_MAX_MS));
      const one = await measure(client, 1, QUERIES_1, query('big'));
      const sixteen = await measure(client, 16, QUERIES_16, query('big'));
      queries[`${size}`] = { c1: one, c16: sixteen };
      console.log(`one tenant of ${size.toLocaleString('en')} (enclave at rest ${(settled[`${size}`] / 1000).toFixed(0)} s after the load): query p50 ${one.p50} ms p99 ${one.p99} ms (1 client, ${one.perSecond}/s); ` +
        `16 clients p50 ${sixteen.p50} ms p99 ${sixteen.p99} ms, ${sixteen.perSecond} queries/s (load generator ${sixteen.clientCpuUs} us CPU a query)`);
    }
    results.query = queries;
    results.settledMs = settled;
    results.bigTenantLoad = { memories: stored, perSecond: Math.round(stored / (loadMs / 1000)) };

    const single1 = await measure(client, 1, quick ? 300 : 1_000, (i) => ({ method: 'POST', path: '/v1/memory', body: JSON.stringify({ tenant_id: `single-${i % 50}`, content: memoryText(5_000_000 + i) }) }));
    // As measure(), with the write path watched over the measured writes only (not the warm-up).
    const singles = quick ? 2_000 : 8_000;
    const addOne = over(client, (i) => ({ method: 'POST', path: '/v1/memory', body: JSON.stringify({ tenant_id: `single-${i % 50}`, content: memoryText(6_000_000 + i) }) }));
    const warmUntil = performance.now() + WARM_UP_MS;
    await sendEach(16, () => performance.now() < warmUntil, (i) => addOne(singles + i));
    const watched = await watchWritePath(client, svc);
    const single16 = await loadEach(16, singles, addOne);
    const writePath = await watched(singles);
    console.log(`single-item ingest: 1 client ${single1.perSecond}/s (p50 ${single1.p50} ms); 16 clients ${single16.perSecond}/s (p50 ${single16.p50} ms, p99 ${single16.p99} ms); ` +
      `${writePath.entriesPerCommit} writes per group commit of ${writePath.commitMs} ms; CPU ms per write: proxy ${writePath.cpuMsPerWrite.proxy}, enclave ${writePath.cpuMsPerWrite.enclave}, host store ${writePath.cpuMsPerWrite.hostStore}`);
    const attestation = await measure(client, 16, quick ? 2_000 : 6_000, () => ({ method: 'GET', path: '/v1/attestation' }));
    console.log(`attestation (no nonce), 16 clients: ${attestation.perSecond} req/s (p50 ${attestation.p50} ms)`);
    results.ingest = { single: { c1: single1, c16: single16, writePath } };
    results.attestation = { c16: attestation };
  } finally {
    client.close();
    await svc.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function manyTenants(results: Record<string, unknown>): Promise<void> {
  // The corpus's tenants hold ~210 distinct words each: 10,000 of them pass MAX_TERMS's default
  // (2,000,000, each tenant's words counted apart), which refuses the last ~500.
  const { svc, client, dir } = await service('tenants', { MAX_TERMS: '4000000' });
  try {
    const before = rssMiB(svc.enclave.pid);
    // Each agent's memories in one batch of 100, from 4 clients, in two halves. The growth over
    // the second half is what a memory and a tenant cost: the first also carries what the
    // enclave frees or grows once after its start (at 500 tenants the total came out smaller
    // than the baseline).
    const half = Math.floor(MANY_TENANTS / 2);
    const started = performance.now();
    const firstHalf = await load(client, 4, half, (t) => addBatch(`agent-${t}`, t * PER_TENANT, PER_TENANT));
    const halfway = rssMiB(svc.enclave.pid);
    const secondHalf = await load(client, 4, MANY_TENANTS - half, (t) => addBatch(`agent-${half + t}`, (half + t) * PER_TENANT, PER_TENANT));
    const seconds = (performance.now() - started) / 1000;
    if (firstHalf.errors + secondHalf.errors > 0) throw new Error(`${firstHalf.errors + secondHalf.errors} batch adds failed`);
    const memories = MANY_TENANTS * PER_TENANT;
    const perSecond = Math.round(memories / seconds);
    const loaded = rssMiB(svc.enclave.pid);
    const recoveryMs = await svc.restartEnclave();
    const recovered = rssMiB(svc.enclave.pid);
    const check = await load(client, 4, 200, (i) => ({ method: 'GET', path: `/v1/memory?tenant_id=agent-${(i * 37) % MANY_TENANTS}&top_k=5&query=${encodeURIComponent(questionText(i))}` }));
    const rss = {
      tenants: MANY_TENANTS, memories, baselineMiB: round(before, 0), halfwayMiB: round(halfway, 0), loadedMiB: round(loaded, 0), recoveredMiB: round(recovered, 0),
      bytesPerMemory: Math.round(((loaded - halfway) * 2 ** 20) / ((MANY_TENANTS - half) * PER_TENANT)),
      bytesPerTenant: Math.round(((loaded - halfway) * 2 ** 20) / (MANY_TENANTS - half)),
    };
    console.log(`${MANY_TENANTS.toLocaleString('en')} tenants x ${PER_TENANT} memories: batch ingest ${perSecond.toLocaleString('en')} memories/s; ` +
      `enclave RSS ${rss.baselineMiB} -> ${rss.halfwayMiB} -> ${rss.loadedMiB} MiB (second half: ${rss.bytesPerMemory} B/memory, ${rss.bytesPerTenant.toLocaleString('en')} B/tenant); ` +
      `recovery after kill -9 ${round(recoveryMs / 1000, 1)} s, RSS then ${rss.recoveredMiB} MiB; queries after recovery: ${check.errors} errors`);
    results.ingest = { ...(results.ingest as object), batch: { requestsOf: PER_TENANT, clients: 4, perSecond } };
    results.rss = rss;
    results.recovery = { memories, ms: Math.round(recoveryMs) };
  } finally {
    client.close();
    await svc.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Recall@10 of an index's top 10 against exact search, over the same queries. Template
 * memories have many equal vectors, so a result counts when its exact score is at least the
 * exact 10th best (ties are as good as each other), not only when its id is in the exact list.
 */
function measureIndex(search: (q: Float32Array) => string[], queries: Float32Array[], exact: FlatIndex, tenth: number[]): { recall: number; p50: number } {
  const times: number[] = [];
  let found = 0;
  queries.forEach((q, i) => {
    const t = performance.now();
    const ids = search(q);
    times.push(performance.now() - t);
    found += ids.filter((id) => exact.similarity(id, q)! >= tenth[i] - 1e-6).length;
  });
  times.sort((a, b) => a - b);
  return { recall: round(found / (queries.length * 10), 3), p50: round(percentile(times, 50), 3) };
}

async function peers(results: Record<string, unknown>, embedder: Embedder): Promise<void> {
  const n = SIZES[SIZES.length - 1];
  const texts = Array.from({ length: n }, (_, i) => memoryText(i));
  const vectors: Float32Array[] = [];
  for (let i = 0; i < n; i += 1000) vectors.push(...await embedder.embed(texts.slice(i, i + 1000)));
  const queries = await embedder.embed(Array.from({ length: 200 }, (_, i) => questionText(10_000 + i)));
  const dim = embedder.dimension;

  const exact = new FlatIndex(dim, n);
  vectors.forEach((v, i) => exact.add(`m${i}`, v));
  const tenth = queries.map((q) => exact.search(q, 10)[9].score);
  const out: Record<string, unknown> = { memories: n, exact: measureIndex((q) => exact.search(q, 10).map((h) => h.id), queries, exact, tenth) };

  let t = performance.now();
  const served = new TieredIndex(dim, DEFAULT_TIERS);
  vectors.forEach((v, i) => served.add(`m${i}`, v));
  out.served = { ...measureIndex((q) => served.search(q, 10).map((h) => h.id), queries, exact, tenth), kind: served.kind, buildS: round((performance.now() - t) / 1000, 1), ...DEFAULT_TIERS.hnsw };

  t = performance.now();
  const raw = new hnswlib.HierarchicalNSW('cosine', dim);
  raw.initIndex(n, DEFAULT_TIERS.hnsw.m, DEFAULT_TIERS.hnsw.efConstruction, 100);
  vectors.forEach((v, i) => raw.addPoint(Array.from(v), i));
  const rawBuildS = round((performance.now() - t) / 1000, 1);
  for (const ef of [64, 128]) {
    raw.setEf(ef);
    const arrays = queries.map((q) => Array.from(q));
    out[`hnswlib_ef${ef}`] = { ...measureIndex((q) => raw.searchKnn(arrays[queries.indexOf(q)], 10).neighbors.map((l) => `m${l}`), queries, exact, tenth), buildS: rawBuildS };
  }

  try {
    const lancedb = await import('@lancedb/lancedb');
    const dir = mkdtempSync(join(tmpdir(), 'bench-lancedb-'));
    try {
      t = performance.now();
      const db = await lancedb.connect(dir);
      const table = await db.createTable('memories', vectors.map((v, i) => ({ id: `m${i}`, vector: Array.from(v) })));
      await table.createIndex('vector', { config: lancedb.Index.ivfPq({ numPartitions: Math.round(Math.sqrt(n)), numSubVectors: dim / 4, distanceType: 'cosine' }) });
      const buildS = round((performance.now() - t) / 1000, 1);
      const times: number[] = [];
      let found = 0;
      for (let i = 0; i < queries.length; i++) {
        const started = performance.now();
        const rows = await table.vectorSearch(Array.from(queries[i])).distanceType('cosine').nprobes(20).refineFactor(5).limit(10).toArray();
        times.push(performance.now() - started);
        found += rows.filter((r: { id: string }) => exact.similarity(r.id, queries[i])! >= tenth[i] - 1e-6).length;
      }
      times.sort((a, b) => a - b);
      out.lancedb = { recall: round(found / (queries.length * 10), 3), p50: round(percentile(times, 50), 3), buildS, index: 'IVF_PQ, nprobes 20, refine 5' };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  } catch (err) {
    out.lancedb = { error: (err as Error).message };
  }
  results.vectorSearch = out;
  const fmt = (name: string, r: { recall?: number; p50?: number; error?: string }) => `${name} ${r.error ? `unavailable (${r.error})` : `recall@10 ${r.recall}, p50 ${r.p50} ms`}`;
  console.log(`top-10 by vector on ${n.toLocaleString('en')} memories (in process, same vectors): ` +
    [fmt('exact scan', out.exact as object), fmt('served index', out.served as object), fmt('raw hnswlib ef64', out.hnswlib_ef64 as object),
      fmt('raw hnswlib ef128', out.hnswlib_ef128 as object), fmt('LanceDB', out.lancedb as object)].join('; '));
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- results.json is a loose record that each part fills in
type Results = Record<string, any>;

function targets(results: Results): Array<{ what: string; target: string; measured: string; met: boolean }> {
  const q = results.query?.['100000'];
  const rows = [];
  if (results.rss) {
    rows.push({ what: `enclave RSS, ${results.rss.tenants} tenants x ${PER_TENANT}`, target: '≤ 2 GiB at 10,000 x 100', measured: `${results.rss.loadedMiB} MiB`, met: results.rss.loadedMiB <= 2048 });
    rows.push({ what: 'recovery after restart', target: '≤ 60 s', measured: `${round(results.recovery.ms / 1000, 1)} s`, met: results.recovery.ms <= 60_000 });
  }
  if (q) {
    rows.push({ what: 'query p50, 100k, 1 client', target: '≤ 2 ms', measured: `${q.c1.p50} ms`, met: q.c1.p50 <= 2 });
    rows.push({ what: 'query p99, 100k, 16 clients', target: '≤ 15 ms', measured: `${q.c16.p99} ms`, met: q.c16.p99 <= 15 });
    rows.push({ what: 'queries/s, 100k, 16 clients', target: '≥ 1,000', measured: `${q.c16.perSecond}`, met: q.c16.perSecond >= 1000 });
  }
  if (results.vectorSearch?.served) rows.push({ what: 'recall@10 vs exact (served index)', target: '≥ 0.97', measured: `${results.vectorSearch.served.recall}`, met: results.vectorSearch.served.recall >= 0.97 });
  if (results.ingest?.single) rows.push({ what: 'single-item ingest, 16 clients', target: '≥ 1,500/s', measured: `${results.ingest.single.c16.perSecond}/s`, met: results.ingest.single.c16.perSecond >= 1500 });
  if (results.ingest?.batch) rows.push({ what: 'batch ingest (100 per request, 4 clients)', target: '≥ 5,000/s', measured: `${results.ingest.batch.perSecond}/s`, met: results.ingest.batch.perSecond >= 5000 });
  if (results.attestation) rows.push({ what: 'attestation (no nonce), 16 clients', target: '≥ 2,000/s', measured: `${results.attestation.c16.perSecond}/s`, met: results.attestation.c16.perSecond >= 2000 });
  return rows;
}

export async function run(): Promise<void> {
  const speedAtStart = machineSpeed();
  const cpu = cpuIdentity();
  console.log(`machine: ${cpus().length} × ${cpu}, Node ${process.version}`);
  console.log(`machine speed at the start (a fixed workload; larger is slower, see bench/machine-speed.ts): ${describeSpeed(speedAtStart)}`);
  const results: Results = {
    machine: { cpus: cpus().length, cpu, node: process.version, date: new Date().toISOString(), speed: { start: speedAtStart } },
    quick,
  };
  await overHttp(results);
  await manyTenants(results);
  const embedder = await loadEmbedder({ name: 'static', modelsDir });
  try {
    await peers(results, embedder);
  } finally {
    await embedder.close();
  }
  results.machine.speed.end = machineSpeed();
  console.log(`\nmachine speed at the end: ${describeSpeed(results.machine.speed.end)}`);
  results.targets = targets(results);
  console.log('\n| target | measured | met |\n|---|---|---|');
  for (const row of results.targets) console.log(`| ${row.what}: ${row.target} | ${row.measured} | ${row.met ? 'yes' : '**no**'} |`);
  const file = resolve(repoRoot, 'bench/results.json');
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`\nwrote ${file}`);
}
