/**
 * Where a single-item write's CPU goes, this build against another in one run: each build's
 * three processes started side by side, tenants filled by batches, a first warm-up, then
 * rounds of single-item ingest at 16 clients over 50 tenants (default settings: dedupe on),
 * alternating the builds and their order round by round. Each round gives writes/s, p99 and
 * the CPU each process spent a write (/proc, over the measured writes); the comparison is
 * the median of the rounds' ratios and their range, since on a shared machine a round's
 * speed moves more than the difference sought. Quicker than `writes` (no million, no recovery).
 * With BENCH_NEW_TENANTS=1 every write goes to a tenant that does not exist yet (issue 38's
 * stall of writes to fresh tenants), and the p99 is compared with its 50 ms target; that run
 * adds "ingestNewTenants" to bench/results.json.
 *
 *   BENCH_BASELINE  folder of the other build (built with `npm run build`), e.g. a `git worktree` of main
 *   BENCH_ROUNDS    rounds per build (default 12)
 *   BENCH_WRITES    measured writes a round (default 3,000, after 2 s of the same load)
 *   BENCH_FILL      tenants of 100 memories stored first (default 300)
 *   BENCH_NEW_TENANTS  1: each write to a new tenant, not over 50
 *   BENCH_SNAPSHOT_LOG_BYTES  both builds' SNAPSHOT_LOG_BYTES (e.g. 4000000, so that snapshots fall inside the rounds)
 *
 * Each round also reads the enclave's longest event-loop delay over it (/metrics, which
 * starts it again at each read): what a write held up by the enclave's own work waited.
 *
 * Profiles: CPU_PROF_DIR=<dir> writes each process's V8 profile when it stops.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { repoRoot } from '../common/paths.js';
import { cpuMs, startService, untilIdle, type Service } from '../scripts/lib/run-service.js';
import { memoryText } from './corpus.js';
import { sendEach } from './http-load.js';
import { LoadClient, type LoadRequest } from './load-client.js';
import { median, percentile } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 12);
const WRITES = Number(process.env.BENCH_WRITES ?? 3_000);
const FILL = Number(process.env.BENCH_FILL ?? 300);
const WARM_UP_MS = 2_000;
const NEW_TENANTS = process.env.BENCH_NEW_TENANTS === '1';
/** Issue 38's target for single-item ingest at 16 clients. */
const P99_TARGET_MS = 50;

const PROCESSES = ['proxy', 'enclave', 'hostStore'] as const;
type Figures = Record<'perSecond' | 'p50' | 'p99' | 'loopMaxMs' | 'load' | (typeof PROCESSES)[number] | 'service', number>;

interface Build {
  name: string;
  svc: Service;
  client: LoadClient;
  dir: string;
  rounds: Figures[];
}

/** Write i of a series from `from`: to one of 50 tenants, or (BENCH_NEW_TENANTS) to a tenant of its own, new. */
const single = (from: number) => (i: number): LoadRequest => ({
  method: 'POST', path: '/v1/memory', body: JSON.stringify({ tenant_id: NEW_TENANTS ? `new-${from + i}` : `single-${i % 50}`, content: memoryText(from + i) }),
});

async function start(name: string, root?: string): Promise<Build> {
  const dir = mkdtempSync(join(tmpdir(), `bench-ingest-${name}-`));
  const snapshots = process.env.BENCH_SNAPSHOT_LOG_BYTES ? { SNAPSHOT_LOG_BYTES: process.env.BENCH_SNAPSHOT_LOG_BYTES } : {};
  const env = { DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0', ...snapshots };
  const svc = await startService(env, join(dir, 'service.log'), root);
  return { name, svc, client: new LoadClient(svc.baseUrl, 16), dir, rounds: [] };
}

async function send(b: Build, concurrency: number, more: (sent: number) => boolean, make: (i: number) => LoadRequest): Promise<number[]> {
  const { latencies, errors } = await sendEach(concurrency, more, async (i) => (await b.client.request(make(i))).status);
  if (errors > 0) throw new Error(`${b.name}: ${errors} requests failed`);
  return latencies;
}

/** The enclave's longest event-loop delay since the last read, in ms (prom-client starts it again at each read of /metrics). */
async function loopMaxMs(b: Build): Promise<number> {
  const text = await (await fetch(`${b.svc.baseUrl}/metrics`)).text();
  const seconds = /^agent_enclave_nodejs_eventloop_lag_max_seconds\{[^}]*\} (\S+)$/m.exec(text)?.[1];
  return seconds === undefined ? Number.NaN : Math.round(Number(seconds) * 1000);
}

async function round(b: Build, from: number): Promise<Figures> {
  const until = performance.now() + WARM_UP_MS;
  await send(b, 16, () => performance.now() < until, single(from + WRITES));
  const cpu = () => PROCESSES.map((p) => cpuMs(b.svc[p].pid));
  await loopMaxMs(b);
  const before = cpu();
  const started = performance.now();
  const latencies = (await send(b, 16, (sent) => sent < WRITES, single(from))).sort((x, y) => x - y);
  const seconds = (performance.now() - started) / 1000;
  const used = cpu().map((ms, i) => Math.round(((ms - before[i]) * 1000) / WRITES));
  const [proxy, enclave, hostStore] = used;
  return {
    loopMaxMs: await loopMaxMs(b),
    perSecond: Math.round(WRITES / seconds), p50: Math.round(percentile(latencies, 50) * 10) / 10, p99: Math.round(percentile(latencies, 99) * 10) / 10, proxy, enclave, hostStore,
    service: proxy + enclave + hostStore, load: Number(loadavg()[0].toFixed(1)),
  };
}

const span = (xs: number[], digits = 0) => `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`;

export async function run(): Promise<void> {
  const baseline = process.env.BENCH_BASELINE;
  if (baseline && !existsSync(join(baseline, 'dist/enclave/main.js'))) throw new Error(`BENCH_BASELINE=${baseline} has no dist/enclave/main.js: build it there first`);
  const builds: Build[] = [];
  try {
    builds.push(await start('this'));
    if (baseline) builds.push(await start('baseline', resolve(baseline, 'dist')));
    for (const b of builds) {
      await send(b, 4, (sent) => sent < FILL, (t) => ({
        method: 'POST', path: '/v1/memory',
        body: JSON.stringify({ memories: Array.from({ length: 100 }, (_, i) => ({ tenant_id: `agent-${t}`, content: memoryText(t * 100 + i), dedupe: false })) }),
      }));
      const until = performance.now() + 10_000;
      await send(b, 16, () => performance.now() < until, single(90_000_000));
      await untilIdle(b.svc.enclave.pid, 60_000);
    }
    for (let r = 0; r < ROUNDS; r++) {
      for (const b of r % 2 === 0 ? builds : [...builds].reverse()) {
        const figures = await round(b, 10_000_000 + r * 100_000);
        b.rounds.push(figures);
        console.log(`round ${r + 1} ${b.name}: ${figures.perSecond}/s, p50 ${figures.p50} ms, p99 ${figures.p99} ms, enclave's longest loop delay ${figures.loopMaxMs} ms, CPU a write proxy ${figures.proxy} µs, enclave ${figures.enclave}, host store ${figures.hostStore} (load ${figures.load})`);
        await untilIdle(b.svc.enclave.pid, 60_000);
      }
    }
    const keys = ['perSecond', 'p50', 'p99', 'loopMaxMs', 'service', ...PROCESSES] as const;
    for (const key of keys) {
      const line = builds.map((b) => `${b.name} ${span(b.rounds.map((f) => f[key]))} (median ${Math.round(median(b.rounds.map((f) => f[key])) * 10) / 10})`).join('; ');
      const ratios = builds.length === 2 ? builds[0].rounds.map((f, i) => f[key] / builds[1].rounds[i][key]) : [];
      console.log(`${key}: ${line}${ratios.length ? `; this/baseline by round: median ${median(ratios).toFixed(3)}, ${span(ratios, 2)}` : ''}`);
    }
    if (NEW_TENANTS) {
      const p99 = median(builds[0].rounds.map((f) => f.p99));
      console.log(`writes to new tenants, this build: p99 median ${p99} ms against ${P99_TARGET_MS} ms: ${p99 <= P99_TARGET_MS ? 'met' : '**not met**'}`);
      const file = resolve(repoRoot, 'bench/results.json');
      const all = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>) : {};
      all.ingestNewTenants = {
        date: new Date().toISOString(), writesPerRound: WRITES, filledTenants: FILL, snapshotLogBytes: process.env.BENCH_SNAPSHOT_LOG_BYTES ?? 'default', p99TargetMs: P99_TARGET_MS,
        ...Object.fromEntries(builds.map((b) => [b.name, b.rounds])), ...(baseline ? { baseline } : {}),
      };
      writeFileSync(file, `${JSON.stringify(all, null, 2)}\n`);
      console.log(`\nadded "ingestNewTenants" to ${file}`);
    }
  } finally {
    for (const b of builds) {
      b.client.close();
      await b.svc.stop();
      rmSync(b.dir, { recursive: true, force: true });
    }
  }
}
