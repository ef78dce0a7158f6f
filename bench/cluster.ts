/**
 * `npm run bench -- cluster` (issue 38, "How we will know"): the service as three enclaves
 * placed through etcd (bench/cluster-service.ts, start:cluster's defaults: 12 shards,
 * LEASE_TTL_S 3) against `npm start`'s one enclave, the same data in both, in one run:
 *
 * 1. query throughput at 16 clients over every tenant, and the CPU a query of all the
 *    service's processes (from /proc), alternating the two services round by round; with the
 *    load client and with wrk (bench/wrk-query-tenants.lua);
 * 2. single-item ingest at 16 clients over 200 tenants (default settings: dedupe on);
 * 3. a planned move (`cluster:move`) of a loaded shard under 8 writers and 8 readers, once
 *    every shard's standby has had its first (whole) read and the processes are at rest: the
 *    longest write and the reads that failed;
 * 4. failover: SIGKILL of an enclave, then the time to the first signed 200 (a write and a
 *    read, through the sdk, which checks the signature and the state head) for tenants of
 *    each of its shards, broken down from etcd (the lease's end) and the placement
 *    processes' log lines (the controller's assignment, OpenShard on the new owner);
 * 5. (not with --quick; BENCH_CLUSTER_BIG=0 skips it) the killed enclave restarted, one
 *    tenant of 99,000 memories added, and the failover of its owner.
 *
 * Every figure is printed with the load average beside it (the machine is shared); the
 * comparisons are ratios within this run. Adds "cluster" to bench/results.json.
 *
 *   BENCH_QUICK              1 (npm run bench -- --quick): 30,000 memories, one round, no large tenant
 *   BENCH_CLUSTER_ENCLAVES   enclaves in the cluster (default 3; 1 adds "cluster1" and stops after the throughput)
 *   BENCH_CLUSTER_BIG        0 skips the large tenant's failover
 *   BENCH_KEEP               1 keeps every process's log in the temp folder it names
 *   BENCH_CLUSTER_ONLY       move: only the cluster, filled, and BENCH_CLUSTER_MOVES planned moves (default 1) of its
 *                            shard, back and forth; no one enclave, no throughput, no failover, results.json untouched;
 *                            failover: only the cluster, filled, its warm standbys read (STANDBYS=on, the default),
 *                            what one standby refresh costs, and the SIGKILL failover; results.json untouched
 *   LEASE_TTL_S, SHARDS, …   passed to the cluster's processes like any setting
 */
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from '../common/paths.js';
import { clusterKeys } from '../placement/cluster-keys.js';
import { GrpcShardHosts } from '../placement/enclave-admin.js';
import { shardOf } from '../protocol/shards.js';
import { StateTracker } from '../protocol/response-signature.js';
import { cpuMs, startService, untilIdle, type Service } from '../scripts/lib/run-service.js';
import { connect, RollbackError } from '../sdk/client.js';
import { CLUSTER_PREFIX, logLines, startClusterService, type ClusterService } from './cluster-service.js';
import { memoryText, questionText } from './corpus.js';
import { load, loadEach, over, round, sendEach, WARM_UP_MS, type Load, type Make } from './http-load.js';
import { LoadClient } from './load-client.js';
import { cpuIdentity } from './machine-speed.js';
import { median } from './stats.js';

const quick = process.env.BENCH_QUICK === '1';
const TENANTS = quick ? 300 : 3_000;
const PER_TENANT = 100;
const QUERIES = quick ? 2_000 : 8_000;
const SINGLES = quick ? 2_000 : 8_000;
/** Rounds of each measurement per service, alternating the services. */
const ROUNDS = quick ? 1 : 2;
const WRK_SECONDS = quick ? 5 : 15;
/** The large tenant: just under MAX_MEMORIES_PER_TENANT's default (100,000), so the probe's writes fit. */
const BIG = quick || process.env.BENCH_CLUSTER_BIG === '0' ? 0 : 99_000;
/** Enclaves in the cluster (BENCH_CLUSTER_ENCLAVES; 1 compares the cluster's processes alone with npm start's, and skips the move and the failover). */
const ENCLAVES = Number(process.env.BENCH_CLUSTER_ENCLAVES || 3);
const CLUSTER = `${ENCLAVES} enclave${ENCLAVES === 1 ? '' : 's'} (cluster)`;
/** BENCH_CLUSTER_ONLY=move: the planned move alone (BENCH_CLUSTER_MOVES times), on the cluster alone. */
const ONLY_MOVE = process.env.BENCH_CLUSTER_ONLY === 'move';
const MOVES = Number(process.env.BENCH_CLUSTER_MOVES || 1);
/** BENCH_CLUSTER_ONLY=failover: the SIGKILL failover alone, on the cluster alone. */
const ONLY_FAILOVER = process.env.BENCH_CLUSTER_ONLY === 'failover';

const tenant = (t: number) => `agent-${t}`;
const exec = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load1 = () => round(loadavg()[0], 1);
const n = (x: number) => Math.round(x).toLocaleString('en');

/** One of the two services measured: its address, a client, and its processes. */
interface Target {
  name: string;
  baseUrl: string;
  client: LoadClient;
  procs(): Array<{ name: string; pid: number }>;
}

/** CPU ms each process has used so far. */
const cpuOf = (procs: Array<{ name: string; pid: number }>) => new Map(procs.map((p) => [p.name, cpuMs(p.pid)]));

/** Context switches of all a process's threads so far (voluntary and not, from /proc), or NaN. */
function switchesOf(pid: number): number {
  try {
    let sum = 0;
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const status = readFileSync(`/proc/${pid}/task/${task}/status`, 'utf8');
      sum += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0) + Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
    }
    return sum;
  } catch {
    return Number.NaN;
  }
}
const switchesAll = (procs: Array<{ name: string; pid: number }>) => procs.reduce((sum, p) => sum + switchesOf(p.pid), 0);
/** µs of CPU a request over a window, each process's and the sum. */
function cpuPerRequest(procs: Array<{ name: string; pid: number }>, before: Map<string, number>, requests: number): { total: number; byProcess: Record<string, number> } {
  const after = cpuOf(procs);
  const byProcess: Record<string, number> = {};
  let total = 0;
  for (const [name, ms] of after) {
    const us = ((ms - before.get(name)!) * 1000) / requests;
    byProcess[name] = Math.round(us);
    total += us;
  }
  return { total: Math.round(total), byProcess };
}
const settle = (t: Target, maxMs = quick ? 20_000 : 120_000) => Promise.all(t.procs().map((p) => untilIdle(p.pid, maxMs)));

/** Every tenant's 100 corpus memories in one batch each, from 4 clients (`dedupe: false`: the corpus repeats its templates, and each tenant should hold 100). */
async function fill(t: Target): Promise<number> {
  const started = performance.now();
  const done = await load(t.client, 4, TENANTS, (k) => ({
    method: 'POST', path: '/v1/memory',
    body: JSON.stringify({ memories: Array.from({ length: PER_TENANT }, (_, i) => ({ tenant_id: tenant(k), content: memoryText(k * PER_TENANT + i), dedupe: false })) }),
  }));
  if (done.errors > 0) throw new Error(`${t.name}: ${done.errors} batch adds failed`);
  return Math.round((TENANTS * PER_TENANT) / ((performance.now() - started) / 1000));
}

interface Window extends Load {
  /** CPU of all the service's processes a request, in µs. */
  serviceCpuUs: number;
  /** The same, each process's. */
  cpuUs: Record<string, number>;
  /** Context switches of all the service's threads a request. */
  switches: number;
  load: number;
}

/** WARM_UP_MS of requests, then `total` timed, with the service's CPU over the timed ones only. */
async function window(t: Target, total: number, make: Make): Promise<Window> {
  const perform = over(t.client, make);
  const until = performance.now() + WARM_UP_MS;
  await sendEach(16, () => performance.now() < until, (i) => perform(total + i));
  const procs = t.procs();
  const before = cpuOf(procs);
  const switched = switchesAll(procs);
  const measured = await loadEach(16, total, perform);
  const cpu = cpuPerRequest(procs, before, total);
  return { ...measured, serviceCpuUs: cpu.total, cpuUs: cpu.byProcess, switches: round((switchesAll(procs) - switched) / total, 1), load: load1() };
}

interface WrkWindow { requests: number; perSecond: number; p50: number; p99: number; non2xx: number; errors: number; serviceCpuUs: number; cpuUs: Record<string, number>; switches: number; load: number }

const hasWrk = () => spawnSync('sh', ['-c', 'command -v wrk']).status === 0;

/** One wrk window (1 thread, 16 connections) with a script of bench/, and the service's CPU over it. */
async function wrk(t: Target, script: string, env: NodeJS.ProcessEnv): Promise<WrkWindow> {
  const procs = t.procs();
  const before = cpuOf(procs);
  const switched = switchesAll(procs);
  const { stdout } = await exec('wrk', ['-t1', '-c16', `-d${WRK_SECONDS}s`, '-s', join(repoRoot, 'bench', script), t.baseUrl], { env: { ...process.env, ...env } });
  const cpu = cpuPerRequest(procs, before, 1);
  const switches = switchesAll(procs) - switched;
  const line = stdout.split('\n').find((l) => l.startsWith('JSON '));
  if (!line) throw new Error(`wrk printed no summary:\n${stdout}`);
  const r = JSON.parse(line.slice(5)) as { requests: number; seconds: number; p50_ms: number; p99_ms: number; non2xx: number; errors: number };
  return {
    requests: r.requests, perSecond: Math.round(r.requests / r.seconds), p50: round(r.p50_ms), p99: round(r.p99_ms), non2xx: r.non2xx, errors: r.errors,
    serviceCpuUs: Math.round(cpu.total / r.requests), cpuUs: Object.fromEntries(Object.entries(cpu.byProcess).map(([k, v]) => [k, Math.round(v / r.requests)])),
    switches: round(switches / r.requests, 1), load: load1(),
  };
}

const queryOf = (i: number) => ({ method: 'GET' as const, path: `/v1/memory?tenant_id=${tenant((i * 37) % TENANTS)}&top_k=10&query=${encodeURIComponent(questionText(i))}` });
const singleOf = (offset: number) => (i: number) => ({ method: 'POST' as const, path: '/v1/memory', body: JSON.stringify({ tenant_id: `ingest-${i % 200}`, content: memoryText(offset + i) }) });

const show = (w: Window | WrkWindow) => `${n(w.perSecond)}/s, p50 ${w.p50} ms, p99 ${w.p99} ms, service CPU ${n(w.serviceCpuUs)} µs a request ` +
  `(${Object.entries(w.cpuUs).filter(([, us]) => us > 0).map(([name, us]) => `${name} ${n(us)}`).join(', ')}), ${w.switches} context switches a request` +
  `${'clientCpuUs' in w ? `, load client ${w.clientCpuUs} µs` : ''}, ${'non2xx' in w ? w.non2xx + w.errors : w.errors} failed (load ${w.load})`;

interface MoveResult {
  shard: number; from: string; to: string; moveMs: number; controllerPauseMs?: number; prepareMs?: number;
  longestWriteMs: number; longestAckGapMs: number;
  /** Writes in flight across the switch (the controller's close to open) and, for scale, in the 2 s before the move was asked for. */
  longestSwitchWriteMs?: number; longestWriteBeforeMs: number;
  writes: number; failedWrites: number; reads: number; failedReads: number; load: number;
}

/** A planned move of a loaded shard, as an operator asks it (npm run cluster:move), under 8 writers and 8 readers of its tenants. */
async function plannedMove(c: ClusterService): Promise<MoveResult> {
  const view = await c.placed();
  const shard = shardOf(tenant(0), c.shards);
  const from = view.shards.get(shard)!.owner;
  const to = [...view.members.keys()].filter((id) => id !== from).sort()[0];
  const tenants = [...Array(TENANTS).keys()].map(tenant).filter((t) => shardOf(t, c.shards) === shard).slice(0, 16);
  const client = new LoadClient(c.baseUrl, 16);
  const ops: Array<{ write: boolean; start: number; end: number; ok: boolean }> = [];
  let stop = false;
  let k = 0;
  const loop = (write: boolean) => async () => {
    while (!stop) {
      const i = k++;
      const t = tenants[i % tenants.length];
      const start = Date.now();
      const status = await client.request(write
        ? { method: 'POST', path: '/v1/memory', body: JSON.stringify({ tenant_id: t, content: memoryText(40_000_000 + i) }) }
        : { method: 'GET', path: `/v1/memory?tenant_id=${t}&top_k=10&query=${encodeURIComponent(questionText(i))}` }).then((r) => r.status, () => 0);
      ops.push({ write, start, end: Date.now(), ok: status === 200 });
    }
  };
  try {
    const loops = Promise.all([...Array(8).fill(true), ...Array(8).fill(false)].map((w: boolean) => loop(w)()));
    await sleep(2000);
    const moveStart = Date.now();
    const { stdout } = await exec(process.execPath, [join(repoRoot, 'dist/scripts/move-shard.js'), '--shard', String(shard), '--to', to], { env: { ...process.env, ETCD_ENDPOINTS: c.etcdEndpoint } });
    const moveEnd = Date.now();
    await sleep(2000);
    stop = true;
    await loops;
    const writes = ops.filter((o) => o.write);
    const during = writes.filter((o) => o.end >= moveStart && o.start <= moveEnd);
    // The longest stretch, from the request to 2 s after, with no write acknowledged.
    const acks = [moveStart, ...writes.filter((o) => o.ok && o.end >= moveStart && o.end <= moveEnd + 2000).map((o) => o.end).sort((a, b) => a - b), moveEnd + 2000];
    let gap = 0;
    for (let i = 1; i < acks.length; i++) gap = Math.max(gap, acks[i] - acks[i - 1]);
    const moved = c.enclaves.flatMap((e) => logLines(e.placement.log)).find((l) => l.msg === 'shard moved' && l.shard === shard && l.time >= moveStart);
    process.stdout.write(`  (${stdout.trim()})\n`);
    const switchEnd = moved?.time as number | undefined;
    const switchStart = switchEnd === undefined ? undefined : switchEnd - (moved?.pauseMs as number);
    const across = switchStart === undefined ? [] : writes.filter((o) => o.end >= switchStart && o.start <= switchEnd!);
    const before = writes.filter((o) => o.end < moveStart);
    return {
      shard, from, to, moveMs: moveEnd - moveStart, controllerPauseMs: moved?.pauseMs as number | undefined, prepareMs: moved?.prepareMs as number | undefined,
      longestWriteMs: Math.max(...during.map((o) => o.end - o.start)), longestAckGapMs: gap,
      ...(across.length > 0 ? { longestSwitchWriteMs: Math.max(...across.map((o) => o.end - o.start)) } : {}),
      longestWriteBeforeMs: Math.max(0, ...before.map((o) => o.end - o.start)),
      writes: writes.length, failedWrites: writes.filter((o) => !o.ok).length,
      reads: ops.length - writes.length, failedReads: ops.filter((o) => !o.write && !o.ok).length, load: load1(),
    };
  } finally {
    client.close();
  }
}

function printMove(c: ClusterService, move: MoveResult): void {
  console.log(`planned move of shard ${move.shard} (${n(TENANTS * PER_TENANT / c.shards)} memories or so) from ${move.from} to ${move.to}: ${n(move.moveMs)} ms for cluster:move ` +
    `(controller: ${move.prepareMs === undefined ? '' : `read ahead ${move.prepareMs} ms, then `}close to open ${move.controllerPauseMs ?? '?'} ms); longest write ${n(move.longestWriteMs)} ms (target ≤ 500: ${move.longestWriteMs <= 500 ? 'met' : '**not met**'}), ` +
    `longest stretch with no write acknowledged ${n(move.longestAckGapMs)} ms; longest write across the switch ${move.longestSwitchWriteMs === undefined ? '?' : n(move.longestSwitchWriteMs)} ms, ` +
    `in the 2 s before the move ${n(move.longestWriteBeforeMs)} ms; failed reads ${move.failedReads} of ${n(move.reads)} (target 0: ${move.failedReads === 0 ? 'met' : '**not met**'}), ` +
    `failed writes ${move.failedWrites} of ${n(move.writes)} (load ${move.load})`);
}

interface FailoverResult {
  victim: string; memoriesLost: string; load: number;
  leaseEndedMs?: number;
  shards: Array<{ shard: number; to?: string; assignedMs?: number; openMs?: number; openedMs?: number; tenant: string; writeMs?: number; readMs?: number }>;
  /** The first tenant of the killed enclave with both a write and a read answered 200 (sent after the kill). */
  firstMs?: number;
  /** Every shard's tenant with both. */
  allMs?: number;
  refusals: number; rollbacks: number;
  /** Why requests failed after the kill: status and code, or the sdk's error. */
  why: Record<string, number>;
}

/**
 * SIGKILL of enclave `victim`; for a tenant of each of its shards, a writer and a reader
 * through the sdk (signatures and state heads checked) send one request after another; the
 * time from the kill to the first 200 of a request sent after it, and where it went.
 */
async function failover(c: ClusterService, victim: number, candidates: string[], timeoutMs: number, what: string): Promise<FailoverResult> {
  const view = await c.placed();
  const id = c.enclaves[victim].id;
  const lost = [...view.shards].filter(([, p]) => p.owner === id).map(([s]) => s);
  const probes = lost.map((s) => ({ shard: s, tenant: candidates.find((t) => shardOf(t, c.shards) === s) })).filter((p): p is { shard: number; tenant: string } => p.tenant !== undefined);
  const rootPem = readFileSync(join(c.dataDir, 'simulated-root.pem'), 'utf8');
  let killedAt = 0;
  let leaseEndedAt = 0;
  let done = false;
  let refusals = 0;
  let rollbacks = 0;
  const why: Record<string, number> = {};
  const watcher = await c.etcd.watch().key(clusterKeys(CLUSTER_PREFIX).member(id)).create();
  watcher.on('delete', () => { if (!leaseEndedAt) leaseEndedAt = Date.now(); });
  const firsts = new Map<string, number>();
  const okBefore = new Set<string>();
  const loops: Array<() => Promise<void>> = [];
  // One client a loop, connected one after another: the enclave makes a few attestation documents at once, no more.
  for (const [p, write] of probes.flatMap((x) => [[x, true], [x, false]] as const)) {
    const sdk = await connect({ insecureSkipPcrPinning: true, baseUrl: c.baseUrl, rootPem, stateTracker: new StateTracker() });
    const key = `${p.tenant} ${write ? 'write' : 'read'}`;
    loops.push(async () => {
      for (let i = 0; !done; i++) {
        const sent = Date.now();
        let ok = false;
        let reason = '';
        try {
          const res = await sdk.call<{ error?: { code?: string } }>(write ? 'POST' : 'GET', write ? '/v1/memory' : `/v1/memory?tenant_id=${p.tenant}&top_k=5&query=${encodeURIComponent(questionText(i))}`,
            write ? { tenant_id: p.tenant, content: `a failover probe, ${i}` } : undefined);
          ok = res.status === 200;
          reason = `${res.status} ${res.body.error?.code ?? ''}`.trim();
        } catch (err) {
          if (err instanceof RollbackError) rollbacks++;
          reason = err instanceof Error ? `${err.name}${'status' in err ? ` ${String(err.status)}` : ''}` : String(err);
        }
        if (!ok && killedAt) why[reason] = (why[reason] ?? 0) + 1;
        if (ok && !killedAt) okBefore.add(key);
        if (ok && killedAt && sent >= killedAt && !firsts.has(key)) firsts.set(key, Date.now() - killedAt);
        if (!ok) {
          if (killedAt) refusals++;
          await sleep(20);
        }
      }
    });
  }
  const running = Promise.all(loops.map((l) => l()));
  const started = Date.now();
  while (okBefore.size < loops.length && Date.now() - started < 30_000) await sleep(50);
  if (okBefore.size < loops.length) {
    done = true;
    await running;
    throw new Error(`failover probes never answered 200 before the kill: ${probes.flatMap((p) => [`${p.tenant} write`, `${p.tenant} read`]).filter((k) => !okBefore.has(k)).join(', ')}`);
  }
  const load = load1();
  killedAt = Date.now();
  c.enclaves[victim].enclave.child.kill('SIGKILL');
  while (firsts.size < loops.length && Date.now() - killedAt < timeoutMs) await sleep(20);
  done = true;
  await running;
  await watcher.cancel();

  const lines = c.enclaves.flatMap((e) => logLines(e.placement.log)).filter((l) => l.time >= killedAt);
  const shards = probes.map((p) => {
    const assigned = lines.find((l) => l.msg === 'shard assigned' && l.shard === p.shard && l.from === id);
    const opened = assigned && lines.find((l) => l.msg === 'shard opened' && l.shard === p.shard && l.generation === assigned.generation);
    return {
      shard: p.shard, tenant: p.tenant, to: assigned?.owner as string | undefined,
      assignedMs: assigned && assigned.time - killedAt, openMs: opened?.ms as number | undefined, openedMs: opened && opened.time - killedAt,
      writeMs: firsts.get(`${p.tenant} write`), readMs: firsts.get(`${p.tenant} read`),
    };
  });
  const both = shards.map((s) => (s.writeMs === undefined || s.readMs === undefined ? Infinity : Math.max(s.writeMs, s.readMs)));
  const first = Math.min(...both);
  const all = Math.max(...both);
  return {
    victim: id, memoriesLost: what, load, leaseEndedMs: leaseEndedAt ? leaseEndedAt - killedAt : undefined, shards,
    firstMs: Number.isFinite(first) ? first : undefined, allMs: Number.isFinite(all) ? all : undefined, refusals, rollbacks, why,
  };
}

function printFailover(f: FailoverResult): void {
  const ms = (x?: number) => (x === undefined ? 'never' : `${n(x)} ms`);
  console.log(`failover (${f.memoriesLost}), SIGKILL of ${f.victim} (load ${f.load}): first signed write and read of one of its tenants ${ms(f.firstMs)} after the kill, ` +
    `every shard's ${ms(f.allMs)} (target ≤ 5 s: ${f.allMs !== undefined && f.allMs <= 5000 ? 'met' : '**not met**'}); ${f.refusals} refused or unsigned answers meanwhile (${Object.entries(f.why).map(([k, v]) => `${k}: ${v}`).join(', ')}), ${f.rollbacks} rollbacks`);
  console.log(`  where it went: lease ended (member key deleted in etcd) ${ms(f.leaseEndedMs)} after the kill`);
  for (const s of f.shards) {
    console.log(`  shard ${s.shard} → ${s.to ?? '?'}: assigned by the controller at ${ms(s.assignedMs)}, OpenShard took ${ms(s.openMs)} (open at ${ms(s.openedMs)}); ` +
      `${s.tenant}: first write 200 at ${ms(s.writeMs)}, first read 200 at ${ms(s.readMs)}` +
      (s.openedMs !== undefined && s.writeMs !== undefined && s.readMs !== undefined ? ` (the proxy's first answer ${n(Math.min(s.writeMs, s.readMs) - s.openedMs)} ms after the open)` : ''));
  }
}

/**
 * Waits for every shard's standby read (where the enclaves report read-aheads), prints what the
 * reads took, then reads one standby again alone, the rest idle: a refresh's wall time and CPU.
 */
/**
 * Waits (up to 5 minutes) until every shard has a standby read ahead: the first reads after a
 * fill are whole reads of every shard, work a cluster in steady state no longer does. Resolves
 * with shard → the standby's address, or undefined when the enclaves keep no read-aheads.
 */
async function untilStandbysRead(c: ClusterService, hosts: GrpcShardHosts): Promise<Map<number, string> | undefined> {
  const deadline = Date.now() + 300_000;
  for (;;) {
    const replies = await Promise.all(c.enclaves.map(async (e) => [e, await hosts.shards(e.address)] as const));
    if (replies.some(([, h]) => h.prepared === undefined)) return undefined;
    const standbys = new Map(replies.flatMap(([e, h]) => [...h.prepared!.keys()].map((s) => [s, e.address] as const)));
    if (standbys.size >= c.shards || Date.now() > deadline) return standbys;
    await sleep(1000);
  }
}

/** untilStandbysRead on its own connections, for the steps that only wait. */
async function standbysSettled(c: ClusterService): Promise<void> {
  const hosts = new GrpcShardHosts(5000, 300_000);
  try {
    await untilStandbysRead(c, hosts);
  } finally {
    hosts.closeAll();
  }
}

async function standbysRead(c: ClusterService): Promise<void> {
  const hosts = new GrpcShardHosts(5000, 300_000);
  try {
    const standbys = await untilStandbysRead(c, hosts);
    if (!standbys) {
      console.log('no standbys (the enclaves report no read-aheads)');
      return;
    }
    const reads = c.enclaves.flatMap((e) => logLines(e.placement.log)).filter((l) => l.msg === 'standby read the shard ahead').map((l) => l.ms as number);
    console.log(`standbys: ${standbys.size} of ${c.shards} shards read ahead; ${reads.length} reads, ${n(Math.min(...reads))}-${n(Math.max(...reads))} ms each (load ${load1()})`);
    const [shard, address] = [...standbys][0];
    const pid = c.enclaves.find((e) => e.address === address)!.enclave.child.pid!;
    const cpu = cpuMs(pid);
    const started = performance.now();
    const seq = await hosts.prepare(address, shard, 600_000);
    console.log(`a standby refresh alone (shard ${shard}, ${n(seq)} changes): ${n(performance.now() - started)} ms, ${n(cpuMs(pid) - cpu)} ms of its enclave's CPU (load ${load1()})`);
    await refreshAfterWrites(c, hosts, shard, address, pid, Math.round(seq / 4));
  } finally {
    hosts.closeAll();
  }
}

/**
 * A quarter more changes written to the shard (the growth at which placement refreshes a
 * standby), then its standby read again alone: what a refresh costs when there is something to
 * read. The controller may refresh it first: the line says from which seq the read went on.
 */
async function refreshAfterWrites(c: ClusterService, hosts: GrpcShardHosts, shard: number, address: string, pid: number, more: number): Promise<void> {
  const tenants = [...Array(TENANTS).keys()].map(tenant).filter((t) => shardOf(t, c.shards) === shard);
  const client = new LoadClient(c.baseUrl, 4);
  try {
    const done = await load(client, 4, Math.ceil(more / PER_TENANT), (b) => ({
      method: 'POST', path: '/v1/memory',
      body: JSON.stringify({ memories: Array.from({ length: PER_TENANT }, (_, i) => ({ tenant_id: tenants[b % tenants.length], content: memoryText(60_000_000 + b * PER_TENANT + i), dedupe: false })) }),
    }));
    if (done.errors > 0) throw new Error(`${done.errors} batch adds to shard ${shard} failed`);
  } finally {
    client.close();
  }
  const from = (await hosts.shards(address)).prepared?.get(shard);
  const cpu = cpuMs(pid);
  const started = performance.now();
  const seq = await hosts.prepare(address, shard, 600_000);
  console.log(`a standby refresh after ${n(more)} more changes (shard ${shard}, from seq ${from === undefined ? '?' : n(from)} to ${n(seq)}): ${n(performance.now() - started)} ms, ${n(cpuMs(pid) - cpu)} ms of its enclave's CPU (load ${load1()})`);
}

async function bigTenant(c: ClusterService): Promise<{ memories: number; perSecond: number }> {
  const client = new LoadClient(c.baseUrl, 4);
  try {
    const started = performance.now();
    const done = await load(client, 4, BIG / 100, (b) => ({
      method: 'POST', path: '/v1/memory',
      body: JSON.stringify({ memories: Array.from({ length: 100 }, (_, i) => ({ tenant_id: 'big', content: memoryText(50_000_000 + b * 100 + i), dedupe: false })) }),
    }));
    if (done.errors > 0) throw new Error(`${done.errors} batch adds to the large tenant failed`);
    return { memories: BIG, perSecond: Math.round(BIG / ((performance.now() - started) / 1000)) };
  } finally {
    client.close();
  }
}

function texts(dir: string): { questions: string; writes: string } {
  const questions = join(dir, 'questions.txt');
  const writes = join(dir, 'texts.txt');
  writeFileSync(questions, `${Array.from({ length: 2000 }, (_, i) => questionText(300_000 + i)).join('\n')}\n`);
  writeFileSync(writes, `${Array.from({ length: 20_000 }, (_, i) => memoryText(30_000_000 + i)).join('\n')}\n`);
  return { questions, writes };
}

export async function run(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-cluster-'));
  const withWrk = hasWrk();
  console.log(`machine: ${cpus().length} × ${cpuIdentity()}; ${n(TENANTS)} tenants × ${PER_TENANT} memories (${n(TENANTS * PER_TENANT)}) in each service; ` +
    `${CLUSTER} with start:cluster's defaults (SHARDS ${process.env.SHARDS || 12}, LEASE_TTL_S ${process.env.LEASE_TTL_S || 3}), one enclave as npm start runs it (one shard); LOG_LEVEL=warn, no rate limits; load ${load1()}` +
    (withWrk ? '' : '\nwrk is not installed (sudo apt-get install -y wrk): its rows are left out'));
  let single: Service | undefined;
  let cluster: ClusterService | undefined;
  const clients: LoadClient[] = [];
  /** The cluster alone, filled: what the move-only and failover-only runs measure. */
  const filledCluster = async () => {
    cluster = await startClusterService({ enclaves: ENCLAVES, dir: join(dir, 'three') });
    const c = cluster;
    const three: Target = { name: CLUSTER, baseUrl: c.baseUrl, client: new LoadClient(c.baseUrl, 16), procs: () => c.procs() };
    clients.push(three.client);
    console.log(`${three.name}: ${n(TENANTS * PER_TENANT)} memories stored by batches at ${n(await fill(three))}/s (load ${load1()})`);
    return { c, three };
  };
  try {
    if (ONLY_MOVE) {
      const { c, three } = await filledCluster();
      await standbysSettled(c);
      for (let m = 0; m < MOVES; m++) {
        await settle(three);
        printMove(c, await plannedMove(c));
      }
      return;
    }
    if (ONLY_FAILOVER) {
      const { c, three } = await filledCluster();
      await settle(three);
      await standbysRead(c);
      await settle(three);
      const failed = await failover(c, 1, [...Array(TENANTS).keys()].map(tenant), 60_000, `about ${n((TENANTS * PER_TENANT) / ENCLAVES)} memories on the enclave, ${n(TENANTS / ENCLAVES)} tenants`);
      printFailover(failed);
      const renewals = c.enclaves.flatMap((e) => logLines(e.placement.log)).filter((l) => l.msg.startsWith('enclave not answering') || l.msg.startsWith('lease expired'));
      console.log(`leases not renewed or lost while their enclave lived: ${renewals.filter((l) => l.member !== failed.victim).length}`);
      return;
    }
    single = await startService({ DATA_DIR: join(dir, 'one'), LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0' }, join(dir, 'one.log'));
    cluster = await startClusterService({ enclaves: ENCLAVES, dir: join(dir, 'three') });
    const one: Target = { name: 'one enclave', baseUrl: single.baseUrl, client: new LoadClient(single.baseUrl, 16), procs: () => [{ name: 'host-store', pid: single!.hostStore.pid! }, { name: 'enclave', pid: single!.enclave.pid! }, { name: 'proxy', pid: single!.proxy.pid! }] };
    const c = cluster;
    const three: Target = { name: CLUSTER, baseUrl: c.baseUrl, client: new LoadClient(c.baseUrl, 16), procs: () => c.procs() };
    clients.push(one.client, three.client);
    const targets = [three, one];
    const files = texts(dir);

    const filled: Record<string, number> = {};
    for (const t of targets) {
      filled[t.name] = await fill(t);
      console.log(`${t.name}: ${n(TENANTS * PER_TENANT)} memories stored by batches at ${n(filled[t.name])}/s (load ${load1()})`);
    }

    const queries: Record<string, { client: Window[]; wrk: WrkWindow[] }> = { [one.name]: { client: [], wrk: [] }, [three.name]: { client: [], wrk: [] } };
    const ingest: Record<string, { client: Window[]; wrk: WrkWindow[] }> = { [one.name]: { client: [], wrk: [] }, [three.name]: { client: [], wrk: [] } };
    for (let r = 0; r < ROUNDS; r++) {
      for (const t of r % 2 === 0 ? targets : [...targets].reverse()) {
        await settle(t);
        const w = await window(t, QUERIES, queryOf);
        queries[t.name].client.push(w);
        console.log(`${t.name}, round ${r + 1}: query top-10 over ${n(TENANTS)} tenants, 16 clients: ${show(w)}`);
        if (withWrk) {
          const ww = await wrk(t, 'wrk-query-tenants.lua', { QFILE: files.questions, TENANTS: String(TENANTS) });
          queries[t.name].wrk.push(ww);
          console.log(`${t.name}, round ${r + 1}: the same with wrk (${WRK_SECONDS} s): ${show(ww)}`);
        }
      }
    }
    for (let r = 0; r < ROUNDS; r++) {
      for (const t of r % 2 === 0 ? targets : [...targets].reverse()) {
        await settle(t);
        const w = await window(t, SINGLES, singleOf(10_000_000 + r * 100_000 + (t === one ? 0 : 1_000_000)));
        ingest[t.name].client.push(w);
        console.log(`${t.name}, round ${r + 1}: single-item ingest over 200 tenants, 16 clients: ${show(w)}`);
        if (withWrk) {
          const ww = await wrk(t, 'wrk-ingest-tenants.lua', { TFILE: files.writes, TENANTS: '200' });
          ingest[t.name].wrk.push(ww);
          console.log(`${t.name}, round ${r + 1}: the same with wrk (${WRK_SECONDS} s): ${show(ww)}`);
        }
      }
    }
    const ratio = (rows: Record<string, { client: Window[]; wrk: WrkWindow[] }>, tool: 'client' | 'wrk', key: 'perSecond' | 'serviceCpuUs') => {
      if (rows[one.name][tool].length === 0) return undefined;
      return round(median(rows[three.name][tool].map((w) => w[key])) / median(rows[one.name][tool].map((w) => w[key])), 3);
    };
    const throughput = {
      client: { queries: ratio(queries, 'client', 'perSecond'), cpu: ratio(queries, 'client', 'serviceCpuUs') },
      wrk: { queries: ratio(queries, 'wrk', 'perSecond'), cpu: ratio(queries, 'wrk', 'serviceCpuUs') },
    };
    for (const [tool, r] of Object.entries(throughput)) {
      if (r.queries === undefined) continue;
      console.log(`${CLUSTER} against one enclave (${tool === 'client' ? 'load client' : 'wrk'}, medians): queries/s ${round(r.queries * 100, 1)}% (target ≥ 90%: ${r.queries >= 0.9 ? 'met' : '**not met**'}), ` +
        `service CPU a query ${r.cpu! >= 1 ? '+' : ''}${round((r.cpu! - 1) * 100, 1)}% (target within 10%: ${Math.abs(r.cpu! - 1) <= 0.1 ? 'met' : '**not met**'})`);
    }
    for (const t of targets) {
      const all = [...ingest[t.name].client, ...ingest[t.name].wrk];
      const worstP99 = Math.max(...all.map((w) => w.p99));
      const leastRate = Math.min(...all.map((w) => w.perSecond));
      console.log(`${t.name}: single-item ingest, worst window p99 ${worstP99} ms (target ≤ 50: ${worstP99 <= 50 ? 'met' : '**not met**'}), ` +
        `slowest ${n(leastRate)}/s (target ≥ 2,500: ${leastRate >= 2500 ? 'met' : '**not met**'})`);
    }

    // The one enclave is done: the rest is the cluster's alone, with the machine to itself.
    one.client.close();
    await single.stop();
    single = undefined;

    const file = resolve(repoRoot, 'bench/results.json');
    const all = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>) : {};
    const results: Record<string, unknown> = {
      date: new Date().toISOString(), quick, enclaves: ENCLAVES, shards: c.shards, leaseTtlS: Number(process.env.LEASE_TTL_S || 3), tenants: TENANTS, perTenant: PER_TENANT, filled,
      queries, ingest, throughput,
    };
    if (ENCLAVES < 2) {
      all[`cluster${ENCLAVES}`] = results;
      writeFileSync(file, `${JSON.stringify(all, null, 2)}\n`);
      console.log(`\nadded "cluster${ENCLAVES}" to ${file} (no move or failover with one enclave)`);
      return;
    }

    await standbysSettled(c);
    await settle(three);
    const move = await plannedMove(c);
    printMove(c, move);

    await settle(three);
    const loaded = [...Array(TENANTS).keys()].map(tenant);
    const failovers: FailoverResult[] = [];
    failovers.push(await failover(c, 1, loaded, 60_000, `about ${n((TENANTS * PER_TENANT) / ENCLAVES)} memories on the enclave, ${n(TENANTS / ENCLAVES)} tenants`));
    printFailover(failovers[0]);

    let big: { memories: number; perSecond: number } | undefined;
    if (BIG > 0) {
      await c.restartEnclave(1);
      // Its placement process registers it again once it answers Health.
      const deadline = Date.now() + 60_000;
      while (!(await c.map.read()).members.has(c.enclaves[1].id) && Date.now() < deadline) await sleep(200);
      big = await bigTenant(c);
      console.log(`one tenant of ${n(BIG)} memories added at ${n(big.perSecond)}/s (load ${load1()})`);
      await settle(three, 300_000);
      const owner = (await c.placed()).shards.get(shardOf('big', c.shards))!.owner;
      failovers.push(await failover(c, c.enclaves.findIndex((e) => e.id === owner), ['big', ...loaded], 600_000, `with a tenant of ${n(BIG)} memories`));
      printFailover(failovers[1]);
    }

    // A lease that lapsed while its enclave lived (Health not answered in time under load) would move shards for nothing.
    const renewals = c.enclaves.flatMap((e) => logLines(e.placement.log)).filter((l) => l.msg.startsWith('enclave not answering') || l.msg.startsWith('lease expired'));
    const missed = renewals.filter((l) => !failovers.some((f) => f.victim === l.member)).length;
    console.log(`leases not renewed or lost while their enclave lived, over the whole run: ${missed} (placement warnings about the killed enclaves: ${renewals.length - missed})`);

    all.cluster = { ...results, move, failovers, big, missedRenewals: missed };
    writeFileSync(file, `${JSON.stringify(all, null, 2)}\n`);
    console.log(`\nadded "cluster" to ${file}`);
  } finally {
    for (const client of clients) client.close();
    await single?.stop();
    await cluster?.stop();
    if (process.env.BENCH_KEEP === '1') console.log(`logs kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}
