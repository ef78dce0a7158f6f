/**
 * Writes against a baseline build, in one run: single-item ingest at 16 clients and the
 * recovery of a store of a million memories after kill -9, for this build and for another
 * (BENCH_BASELINE: a checkout of the commit to compare, built with `npm run build`, e.g. a
 * `git worktree`), measured in alternating rounds so both see the same machine. Without
 * BENCH_BASELINE it measures this build alone. Adds "writes" to bench/results.json.
 *
 *   BENCH_BASELINE  folder of the baseline checkout (its dist/ is started)
 *   BENCH_QUICK     1 for 100k memories and fewer writes
 *   BENCH_ROUNDS    rounds of each measurement per build (default 3; 2 with BENCH_QUICK)
 *
 * Each figure comes with the CPU it cost (a write: the three processes' CPU over the measured
 * requests; a recovery: the new enclave's CPU until it answers), compared the same way: on a
 * shared machine whose speed moves within a run, time moves with it, CPU much less.
 *
 * Like for like: a build that has near-duplicate updates (issue 36) is sent `dedupe: false`
 * for the fill, so both stores recover the same number of memories (the corpus repeats
 * itself: deduplicated, a million adds keep a fraction of that). Single-item ingest is
 * measured both ways on such a build: with the default (what users get) and without.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { repoRoot } from '../common/paths.js';
import { cpuMs, rssMiB, startService, untilIdle, type Service } from '../scripts/lib/run-service.js';
import { memoryText } from './corpus.js';
import { load, measure, round, type Load } from './http-load.js';
import { LoadClient } from './load-client.js';
import { median } from './stats.js';

const quick = process.env.BENCH_QUICK === '1';
const TENANTS = quick ? 1_000 : 10_000;
const PER_TENANT = 100;
const SINGLES = quick ? 2_000 : 8_000;
/** Rounds of each measurement per build, alternating builds; the comparison takes medians. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (quick ? 2 : 3));

interface Build {
  name: string;
  svc: Service;
  client: LoadClient;
  dir: string;
  /** Whether the build takes `dedupe` (and so dedupes by default). */
  dedupes: boolean;
  single: Load[];
  singleNoDedupe: Load[];
  recoveryMs: number[];
  /** The new enclave's CPU from its start to its first answer, each recovery. */
  recoveryCpuMs: number[];
}

async function start(name: string, root: string | undefined): Promise<Build> {
  const dir = mkdtempSync(join(tmpdir(), `bench-writes-${name}-`));
  // The corpus's 10k tenants hold ~210 distinct words each: past MAX_TERMS's default (2M, counted
  // per tenant), so both builds are given room; the benchmark measures writes, not that limit.
  const env = { DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0', MAX_TERMS: '4000000' };
  const svc = await startService(env, join(dir, 'service.log'), root);
  const client = new LoadClient(svc.baseUrl, 16);
  // A build from before near-duplicate updates refuses the unknown field.
  const probe = await client.request({ method: 'POST', path: '/v1/memory', body: JSON.stringify({ tenant_id: 'probe', content: 'a probe', dedupe: false }) });
  return { name, svc, client, dir, dedupes: probe.status === 200, single: [], singleNoDedupe: [], recoveryMs: [], recoveryCpuMs: [] };
}

async function fill(b: Build): Promise<number> {
  const started = performance.now();
  const extra = b.dedupes ? { dedupe: false } : {};
  const done = await load(b.client, 4, TENANTS, (t) => ({
    method: 'POST', path: '/v1/memory',
    body: JSON.stringify({ memories: Array.from({ length: PER_TENANT }, (_, i) => ({ tenant_id: `agent-${t}`, content: memoryText(t * PER_TENANT + i), ...extra })) }),
  }));
  if (done.errors > 0) throw new Error(`${b.name}: ${done.errors} batch adds failed`);
  return Math.round((TENANTS * PER_TENANT) / ((performance.now() - started) / 1000));
}

/** The CPU of the build's three processes so far, in ms. */
const serviceCpuMs = (b: Build) => () => cpuMs(b.svc.proxy.pid) + cpuMs(b.svc.enclave.pid) + cpuMs(b.svc.hostStore.pid);

/** 16 clients, one memory a request, over 50 tenants; `offset` keeps each round's texts new. */
const singles = (b: Build, offset: number, dedupe: boolean) => measure(b.client, 16, SINGLES, (i) => ({
  method: 'POST', path: '/v1/memory',
  body: JSON.stringify({ tenant_id: `single-${i % 50}`, content: memoryText(offset + i), ...(dedupe ? {} : { dedupe: false }) }),
}), serviceCpuMs(b));

const range = (xs: number[], unit = '') => `${Math.min(...xs).toLocaleString('en')}–${Math.max(...xs).toLocaleString('en')}${unit}`;

export async function run(): Promise<void> {
  const baseline = process.env.BENCH_BASELINE;
  if (baseline && !existsSync(join(baseline, 'dist/enclave/main.js'))) throw new Error(`BENCH_BASELINE=${baseline} has no dist/enclave/main.js: build it there first (npm run build)`);
  const builds: Build[] = [];
  try {
    builds.push(await start('this', undefined));
    if (baseline) builds.push(await start('baseline', resolve(baseline, 'dist')));
    for (const b of builds) {
      const perSecond = await fill(b);
      await untilIdle(b.svc.enclave.pid, 180_000);
      console.log(`${b.name}: ${(TENANTS * PER_TENANT).toLocaleString('en')} memories stored by batches at ${perSecond.toLocaleString('en')}/s; enclave RSS ${Math.round(rssMiB(b.svc.enclave.pid))} MiB`);
    }
    for (let r = 0; r < ROUNDS; r++) {
      for (const b of builds) {
        b.single.push(await singles(b, 10_000_000 + r * 100_000, true));
        if (b.dedupes) b.singleNoDedupe.push(await singles(b, 20_000_000 + r * 100_000, false));
        await untilIdle(b.svc.enclave.pid, 60_000);
      }
      for (const b of builds) {
        b.recoveryMs.push(Math.round(await b.svc.restartEnclave()));
        b.recoveryCpuMs.push(Math.round(cpuMs(b.svc.enclave.pid)));
        await untilIdle(b.svc.enclave.pid, 60_000);
      }
    }
    const results: Record<string, unknown> = {};
    for (const b of builds) {
      const show = (loads: Load[]) => `${range(loads.map((l) => l.perSecond), '/s')} (p50 ${range(loads.map((l) => l.p50))} ms, p99 ${range(loads.map((l) => l.p99))} ms, ` +
        `service CPU ${range(loads.map((l) => l.serviceCpuUs ?? 0), ' us')} a write, errors ${loads.reduce((s, l) => s + l.errors, 0)})`;
      console.log(`${b.name}: single-item ingest, 16 clients ${show(b.single)}` +
        (b.dedupes ? `; with dedupe: false ${show(b.singleNoDedupe)}` : ' (no near-duplicate updates in this build)') +
        `; recovery of ${(TENANTS * PER_TENANT).toLocaleString('en')} memories after kill -9 ${range(b.recoveryMs.map((ms) => round(ms / 1000, 1)), ' s')}` +
        ` (enclave CPU ${range(b.recoveryCpuMs.map((ms) => round(ms / 1000, 1)), ' s')})`);
      results[b.name] = { dedupes: b.dedupes, single: b.single, singleNoDedupe: b.singleNoDedupe, recoveryMs: b.recoveryMs, recoveryCpuMs: b.recoveryCpuMs };
    }
    if (builds.length === 2) {
      const [now, base] = builds;
      // Like for like: the same storage work a write (no dedupe where the baseline has none).
      const nowSingles = now.dedupes && !base.dedupes ? now.singleNoDedupe : now.single;
      const ingest = median(nowSingles.map((l) => l.perSecond)) / median(base.single.map((l) => l.perSecond)) - 1;
      const recovery = median(now.recoveryMs) / median(base.recoveryMs) - 1;
      // The same in CPU, which the machine's speed moves less than time: a write's, and a recovery's.
      const ingestCpu = median(nowSingles.map((l) => l.serviceCpuUs!)) / median(base.single.map((l) => l.serviceCpuUs!)) - 1;
      const recoveryCpu = median(now.recoveryCpuMs) / median(base.recoveryCpuMs) - 1;
      const within = (x: number, good: 'up' | 'down') => (good === 'up' ? x >= -0.1 : x <= 0.1);
      const pct = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`;
      console.log(`this build against the baseline (medians): single-item ingest ${pct(ingest)} (${within(ingest, 'up') ? 'within' : '**not** within'} 10%), ` +
        `CPU a write ${pct(ingestCpu)} (${within(ingestCpu, 'down') ? 'within' : '**not** within'} 10%); ` +
        `recovery time ${pct(recovery)} (${within(recovery, 'down') ? 'within' : '**not** within'} 10%), CPU ${pct(recoveryCpu)} (${within(recoveryCpu, 'down') ? 'within' : '**not** within'} 10%)`);
      results.comparison = { baseline, ingestChange: round(ingest, 3), ingestCpuChange: round(ingestCpu, 3), recoveryChange: round(recovery, 3), recoveryCpuChange: round(recoveryCpu, 3) };
    }
    const file = resolve(repoRoot, 'bench/results.json');
    const all = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>) : {};
    all.writes = { date: new Date().toISOString(), quick, memories: TENANTS * PER_TENANT, ...results };
    writeFileSync(file, `${JSON.stringify(all, null, 2)}\n`);
    console.log(`\nadded "writes" to ${file}`);
  } finally {
    for (const b of builds) {
      b.client.close();
      await b.svc.stop();
      rmSync(b.dir, { recursive: true, force: true });
    }
  }
}
