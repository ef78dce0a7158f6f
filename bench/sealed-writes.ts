/**
 * Single-item sealed writes (POST /v1/memory inside POST /v1/sealed, one at a time, through
 * the sdk) against this build and another (a baseline's `dist`), both running, in alternating
 * rounds so the machine's noise falls on both: latency, the enclave's CPU and the log's bytes
 * per write. Not part of `npm run bench`.
 *
 *   node dist/bench/sealed-writes.js <baseline dist> [writes per round, default 200] [rounds, default 6]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { cpuMs, startService, type Service } from '../scripts/lib/run-service.js';
import { connect, type TeeClient } from '../sdk/client.js';
import { invokedDirectly } from '../sdk/bin/invoked-directly.js';
import { percentile } from './stats.js';

interface Running {
  svc: Service;
  tee: TeeClient;
  dir: string;
  ms: number[];
  cpuMs: number;
}

/** The bytes of every log segment under `dir` (the host store's folder). */
function logBytes(dir: string): number {
  let total = 0;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) total += logBytes(path);
    else if (/^log-\d+\.sealed$/.test(name)) total += statSync(path).size;
  }
  return total;
}

async function start(root: string | undefined): Promise<Running> {
  const dir = mkdtempSync(join(tmpdir(), 'sealed-writes-'));
  const data = join(dir, 'data');
  const svc = await startService({ DATA_DIR: data, LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0' }, join(dir, 'service.log'), root);
  const tee = await connect({ baseUrl: svc.baseUrl, rootPem: readFileSync(join(data, 'simulated-root.pem'), 'utf8'), insecureSkipPcrPinning: true });
  return { svc, tee, dir, ms: [], cpuMs: 0 };
}

async function main(baseline: string, perRound: number, rounds: number): Promise<void> {
  const builds = { baseline: await start(resolve(baseline)), this: await start(undefined) };
  let n = 0;
  const write = async (run: Running) => {
    const answer = await run.tee.sealedCall('POST', '/v1/memory', { tenant_id: 'bench', content: `sealed memory ${n++} about boats, harbours and the weather` });
    if (answer.status !== 200) throw new Error(`HTTP ${answer.status}`);
  };
  try {
    for (const run of Object.values(builds)) for (let i = 0; i < 50; i++) await write(run);
    const before = { baseline: logBytes(builds.baseline.dir), this: logBytes(builds.this.dir) };
    for (let round = 0; round < rounds; round++) {
      for (const name of round % 2 === 0 ? ['baseline', 'this'] as const : ['this', 'baseline'] as const) {
        const run = builds[name];
        const cpu = cpuMs(run.svc.enclave.pid);
        for (let i = 0; i < perRound; i++) {
          const started = performance.now();
          await write(run);
          run.ms.push(performance.now() - started);
        }
        run.cpuMs += cpuMs(run.svc.enclave.pid) - cpu;
      }
    }
    const writes = perRound * rounds;
    const figures = (name: keyof typeof builds) => {
      const sorted = [...builds[name].ms].sort((a, b) => a - b);
      const mean = sorted.reduce((a, b) => a + b, 0) / sorted.length;
      return { p50: percentile(sorted, 50), p90: percentile(sorted, 90), mean, cpu: builds[name].cpuMs / writes, log: (logBytes(builds[name].dir) - before[name]) / writes };
    };
    const [a, b] = [figures('baseline'), figures('this')];
    for (const [name, f] of [['baseline', a], ['this', b]] as const) {
      process.stdout.write(`${name}: ${writes} writes, p50 ${f.p50.toFixed(2)} ms, p90 ${f.p90.toFixed(2)}, mean ${f.mean.toFixed(2)}, enclave CPU ${f.cpu.toFixed(2)} ms/write, log ${f.log.toFixed(1)} B/write\n`);
    }
    const ratio = (key: keyof typeof a) => (b[key] / a[key]).toFixed(3);
    process.stdout.write(`this/baseline: p50 ${ratio('p50')}, p90 ${ratio('p90')}, mean ${ratio('mean')}, enclave CPU ${ratio('cpu')}, log bytes ${ratio('log')} (${(b.log - a.log).toFixed(1)} B)\n`);
  } finally {
    for (const run of Object.values(builds)) {
      await run.svc.stop();
      rmSync(run.dir, { recursive: true, force: true });
    }
  }
}

if (invokedDirectly(import.meta.url)) {
  const [baseline, perRound, rounds] = process.argv.slice(2);
  if (!baseline) {
    process.stderr.write('usage: node dist/bench/sealed-writes.js <baseline dist> [writes per round] [rounds]\n');
    process.exit(2);
  }
  await main(baseline, Number(perRound ?? 200), Number(rounds ?? 6));
}
