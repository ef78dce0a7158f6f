/**
 * `npm run bench -- open`: how long an enclave takes to open a store holding one large tenant
 * (the failover's floor, issue 38), this build against BENCH_BASELINE on the same data, in
 * alternating rounds. The store is filled once, by this build, and compacted with the tenant
 * whole, so its snapshot has the tenant's HNSW graph beside it (graph-<g>.sealed); a build
 * from before saved graphs ignores that blob and inserts every vector again. Each round starts
 * a build's three processes on the data, kills its enclave with SIGKILL and starts it again:
 * the time until the API answers, the new enclave's CPU until then, and a first query of the
 * large tenant.
 *
 *   BENCH_BASELINE        folder of the baseline checkout (its dist/ is started); without it, this build alone
 *   BENCH_OPEN_MEMORIES   memories of the large tenant (default 99,000: under MAX_MEMORIES_PER_TENANT)
 *   BENCH_ROUNDS          rounds per build (default 2)
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { cpuMs, startService, untilIdle } from '../scripts/lib/run-service.js';
import { memoryText, questionText } from './corpus.js';
import { load } from './http-load.js';
import { LoadClient } from './load-client.js';

const MEMORIES = Number(process.env.BENCH_OPEN_MEMORIES || 99_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS || 2);
const load1 = () => loadavg()[0].toFixed(1);
const count = (text: string, line: string) => text.split(line).length - 1;

/** The fields of the last log line carrying `message`. */
function lastLine(logFile: string, message: string): Record<string, unknown> | undefined {
  const lines = readFileSync(logFile, 'utf8').split('\n').filter((l) => l.includes(`"${message}"`));
  return lines.length === 0 ? undefined : JSON.parse(lines[lines.length - 1]) as Record<string, unknown>;
}

export async function run(): Promise<void> {
  const baseline = process.env.BENCH_BASELINE;
  if (baseline && !existsSync(join(baseline, 'dist/enclave/main.js'))) throw new Error(`BENCH_BASELINE=${baseline} has no dist/enclave/main.js: build it there first (npm run build)`);
  const dir = mkdtempSync(join(tmpdir(), 'bench-open-'));
  const logFile = join(dir, 'service.log');
  const env = { DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'info', RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0' };
  try {
    const svc = await startService(env, logFile);
    const client = new LoadClient(svc.baseUrl, 4);
    const started = performance.now();
    const done = await load(client, 4, Math.ceil(MEMORIES / 100), (b) => ({
      method: 'POST', path: '/v1/memory',
      body: JSON.stringify({ memories: Array.from({ length: 100 }, (_, i) => ({ tenant_id: 'big', content: memoryText(b * 100 + i), dedupe: false })) }),
    }));
    if (done.errors > 0) throw new Error(`${done.errors} batch adds failed`);
    console.log(`one tenant of ${MEMORIES.toLocaleString('en')} memories added in ${Math.round((performance.now() - started) / 1000)} s (load ${load1()})`);
    // Another tenant's large memories until a compaction runs with the large tenant whole.
    const saved = count(readFileSync(logFile, 'utf8'), 'vector graphs saved with the snapshot');
    for (let i = 0; count(readFileSync(logFile, 'utf8'), 'vector graphs saved with the snapshot') === saved; i++) {
      const res = await client.request({
        method: 'POST', path: '/v1/memory',
        body: JSON.stringify({ memories: Array.from({ length: 10 }, (_, j) => ({ tenant_id: 'filler', content: `filler ${i}-${j} ${'many short words to fill the log '.repeat(900)}`, dedupe: false })) }),
      });
      if (res.status !== 200) throw new Error(`filler add: ${res.status}`);
    }
    await untilIdle(svc.enclave.pid, 180_000);
    const snapshot = lastLine(logFile, 'memory snapshot written; older logs deleted');
    const graphs = lastLine(logFile, 'vector graphs saved with the snapshot');
    console.log(`snapshot ${JSON.stringify(snapshot && { memories: snapshot.memories, bytes: snapshot.bytes, ms: snapshot.ms })}; graphs ${JSON.stringify(graphs && { tenants: graphs.tenants, bytes: graphs.bytes, ms: graphs.ms })}`);
    client.close();
    await svc.stop();

    const builds: Array<[name: string, root: string | undefined]> = [['this', undefined], ...(baseline ? [['baseline', resolve(baseline, 'dist')] as [string, string]] : [])];
    const results: Record<string, Array<{ ms: number; cpuMs: number; firstQueryMs: number; recovered: unknown }>> = {};
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, root] of r % 2 === 0 ? builds : [...builds].reverse()) {
        const s = await startService(env, logFile, root);
        await untilIdle(s.enclave.pid, 60_000);
        const ms = Math.round(await s.restartEnclave());
        const cpu = Math.round(cpuMs(s.enclave.pid));
        const asked = performance.now();
        const res = await fetch(`${s.baseUrl}/v1/memory/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tenant_id: 'big', query: questionText(r), top_k: 10 }) });
        if (res.status !== 200) throw new Error(`${name}: first query ${res.status}`);
        await res.arrayBuffer();
        const firstQueryMs = Math.round(performance.now() - asked);
        const recovered = lastLine(logFile, 'memories recovered');
        (results[name] ??= []).push({ ms, cpuMs: cpu, firstQueryMs, recovered: recovered && { ms: recovered.ms, graphs: recovered.graphs, events: recovered.events } });
        console.log(`${name}, round ${r + 1}: kill -9 to the API answering ${(ms / 1000).toFixed(1)} s, enclave CPU ${(cpu / 1000).toFixed(1)} s, first query of the large tenant ${firstQueryMs} ms; ${JSON.stringify(recovered && { ms: recovered.ms, graphs: recovered.graphs, events: recovered.events })} (load ${load1()})`);
        await s.stop();
      }
    }
    if (results.baseline) {
      const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
      const ratio = (f: (x: { ms: number; cpuMs: number }) => number) => (median(results.this.map(f)) / median(results.baseline.map(f))).toFixed(3);
      console.log(`this / baseline: time ${ratio((x) => x.ms)}, enclave CPU ${ratio((x) => x.cpuMs)} (medians)`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
