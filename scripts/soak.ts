/**
 * `npm run soak`: a bounded load test. Starts its own enclave and proxy on loopback (API
 * keys on, rate limits off so the figures measure capacity), preloads memories, then runs
 * autocannon for --duration seconds over a mixed cycle per connection:
 *
 *   POST /v1/memory (ingest) → GET /v1/memory (query) ×2 → GET /v1/memory/{id} → DELETE it
 *
 * so the stored set stays at the preload size and a growing RSS would mean a leak, not
 * data. Prints throughput, latency percentiles (overall and per kind), status counts and
 * errors, and the enclave's and proxy's RSS over time. Exits 1 if any request failed.
 *
 *   npm run soak -- --duration 60 --connections 16 --tenants 20 --preload 2000 --sample 5
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon, { type Request, type Result } from 'autocannon';
import { generateApiKey, hashApiKey } from '../enclave/auth/keys-file.js';
import { rssMiB, startService } from './lib/run-service.js';

const usage = `usage: npm run soak -- [options]
  --duration N      seconds of load (default 60)
  --connections N   concurrent connections (default 16)
  --tenants N       tenants the load is spread over (default 20)
  --preload N       memories stored before the load (default 2000)
  --sample N        seconds between RSS samples (default 5)
  --keep            keep the data folder and the service log
Loopback only. Prints throughput, latency, statuses and RSS; exits 1 if a request failed.
`;
let parsed;
try {
  parsed = parseArgs({
    options: {
      help: { type: 'boolean', short: 'h', default: false },
      duration: { type: 'string', default: '60' },
    connections: { type: 'string', default: '16' },
    tenants: { type: 'string', default: '20' },
    preload: { type: 'string', default: '2000' },
    sample: { type: 'string', default: '5' },
      keep: { type: 'boolean', default: false },
    },
  });
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n${usage}`);
  process.exit(2);
}
const args = parsed.values;
if (args.help) {
  process.stdout.write(usage);
  process.exit(0);
}
const positive = (name: string, v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer`);
  return n;
};
const duration = positive('duration', args.duration!);
const connections = positive('connections', args.connections!);
const tenantCount = positive('tenants', args.tenants!);
const preload = Number(args.preload);
const sampleEvery = positive('sample', args.sample!);

// A small vocabulary is enough to give the embedder real words and the index real neighbours.
const words = ('dog cat invoice meeting flight lisbon coffee garden tomato budget report deadline friday window seat '
  + 'password fridge wifi birthday sister doctor appointment train ticket hotel booking project launch code review '
  + 'holiday summer winter recipe pasta salad running shoes marathon piano lesson guitar book library museum').split(' ');
const pick = <T>(xs: T[]) => xs[Math.floor(Math.random() * xs.length)];
const sentence = (n: number) => Array.from({ length: n }, () => pick(words)).join(' ');
const tenants = Array.from({ length: tenantCount }, (_, i) => `soak-${i}`);

const dir = mkdtempSync(join(tmpdir(), 'agent-soak-'));
const key = generateApiKey();
writeFileSync(join(dir, 'keys.json'), JSON.stringify({ [`sha256:${hashApiKey(key).toString('hex')}`]: tenants }), { mode: 0o600 });
const logFile = join(dir, 'service.log');
const auth = { authorization: `Bearer ${key}` };

const service = await startService({
  DATA_DIR: join(dir, 'data'), API_KEYS_FILE: join(dir, 'keys.json'), RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0', LOG_LEVEL: 'info',
}, logFile);
const samples: { t: number; enclave: number; proxy: number; phase: string }[] = [];
const sample = (t: number, phase: string) => samples.push({ t, enclave: rssMiB(service.enclave.pid), proxy: rssMiB(service.proxy.pid), phase });
let failed = false;

try {
  sample(0, 'started');
  // Preload, a few requests at a time.
  let next = 0;
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (next < preload) {
      next++;
      const res = await fetch(`${service.baseUrl}/v1/memory`, {
        method: 'POST', headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ content: sentence(12), tenant_id: pick(tenants), metadata: { source: 'soak' } }),
      });
      if (res.status !== 200) throw new Error(`preload failed: ${res.status} ${await res.text()}`);
    }
  }));
  sample(0, 'preloaded');

  const latencies: Record<string, number[]> = { ingest: [], query: [], get: [], delete: [] };
  const timed = (kind: string, req: Request): Request => ({
    ...req,
    onResponse: (status, body, context) => {
      latencies[kind].push(performance.now() - (context.sentAt as number));
      if (kind === 'ingest' && status === 200) context.id = (JSON.parse(body) as { id: string }).id;
      req.onResponse?.(status, body, context, {});
    },
  });
  const stamp = (context: Record<string, unknown>) => { context.sentAt = performance.now(); };
  const requests: Request[] = [
    timed('ingest', {
      method: 'POST',
      setupRequest: (req, context) => {
        stamp(context);
        context.tenant = pick(tenants);
        return { ...req, headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ content: sentence(8 + Math.floor(Math.random() * 24)), tenant_id: context.tenant }) };
      },
    }),
    ...[0, 1].map(() => timed('query', {
      method: 'GET',
      setupRequest: (req, context) => {
        stamp(context);
        return { ...req, headers: auth, path: `/v1/memory?tenant_id=${pick(tenants)}&query=${encodeURIComponent(sentence(3))}&top_k=${1 + Math.floor(Math.random() * 10)}` };
      },
    })),
    timed('get', {
      method: 'GET',
      setupRequest: (req, context) => {
        stamp(context);
        return { ...req, headers: auth, path: `/v1/memory/${context.id}?tenant_id=${context.tenant}` };
      },
    }),
    timed('delete', {
      method: 'DELETE',
      setupRequest: (req, context) => {
        stamp(context);
        return { ...req, headers: auth, path: `/v1/memory/${context.id}?tenant_id=${context.tenant}` };
      },
    }),
  ].map((r) => ({ path: '/v1/memory', ...r }));

  const started = Date.now();
  const sampler = setInterval(() => sample(Math.round((Date.now() - started) / 1000), 'load'), sampleEvery * 1000);
  const result = await new Promise<Result>((res, rej) => {
    autocannon({ url: service.baseUrl, connections, duration, timeout: 30, requests }, (err, r) => (err ? rej(err) : res(r)));
  });
  clearInterval(sampler);
  sample(Math.round((Date.now() - started) / 1000), 'end');
  await new Promise((r) => setTimeout(r, 5000));
  sample(Math.round((Date.now() - started) / 1000), 'idle+5s');

  failed = report(result, latencies);
} finally {
  await service.stop();
  if (args.keep) process.stdout.write(`kept ${dir}\n`);
  else rmSync(dir, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;

function pct(xs: number[], p: number): number {
  if (!xs.length) return Number.NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Prints the figures; returns true when something failed. */
function report(r: Result, latencies: Record<string, number[]>): boolean {
  const out: string[] = [];
  const f = (n: number, d = 1) => n.toFixed(d);
  out.push(`soak: ${r.duration} s, ${connections} connections, ${tenantCount} tenants, ${preload} memories preloaded, loopback, API keys on, rate limits off`);
  out.push(`requests: ${r.requests.total} (${f(r.requests.total / r.duration)} req/s; per second p50 ${r.requests.p50}, min ${r.requests.min}, max ${r.requests.max})`);
  out.push(`latency (ms, all): p50 ${r.latency.p50}  p90 ${r.latency.p90}  p99 ${r.latency.p99}  max ${r.latency.max}  mean ${f(r.latency.mean, 2)}`);
  for (const [kind, xs] of Object.entries(latencies)) {
    out.push(`  ${kind.padEnd(7)} n=${String(xs.length).padEnd(7)} p50 ${f(pct(xs, 50), 2)}  p90 ${f(pct(xs, 90), 2)}  p99 ${f(pct(xs, 99), 2)}  max ${f(pct(xs, 100), 2)}`);
  }
  const statuses = Object.entries(r.statusCodeStats).map(([s, { count }]) => `${s}×${count}`).join(' ');
  out.push(`statuses: ${statuses}; non-2xx ${r.non2xx}; connection errors ${r.errors}; timeouts ${r.timeouts}`);
  out.push('RSS (MiB):   t(s)  phase      enclave   proxy');
  for (const s of samples) out.push(`           ${String(s.t).padStart(5)}  ${s.phase.padEnd(9)} ${f(s.enclave).padStart(8)} ${f(s.proxy).padStart(7)}`);
  // Stability: the enclave's RSS growth over the second half of the load, per minute.
  const load = samples.filter((s) => s.phase === 'load' || s.phase === 'end');
  const half = load.filter((s) => s.t >= duration / 2);
  if (half.length >= 3) {
    // Least-squares slope, so one garbage collection does not decide the verdict.
    const n = half.length;
    const mt = half.reduce((a, s) => a + s.t, 0) / n;
    const mr = half.reduce((a, s) => a + s.enclave, 0) / n;
    const slope = half.reduce((a, s) => a + (s.t - mt) * (s.enclave - mr), 0) / half.reduce((a, s) => a + (s.t - mt) ** 2, 0);
    const rss = half.map((s) => s.enclave);
    out.push(`enclave RSS over the second half: ${f(Math.min(...rss))}–${f(Math.max(...rss))} MiB, trend ${slope >= 0 ? '+' : ''}${f(slope * 60, 2)} MiB/min`);
  }
  const failures = r.non2xx + r.errors + r.timeouts;
  out.push(failures ? `FAILED: ${failures} requests did not succeed` : 'no errors');
  process.stdout.write(`${out.join('\n')}\n`);
  return failures > 0;
}
