/**
 * Timed loads over HTTP for the benchmarks that drive the real processes: requests from N
 * concurrent clients, each timed, after a warm-up made the same way.
 */
import { LoadClient, type LoadRequest } from './load-client.js';
import { memoryText, questionText } from './corpus.js';
import { percentile } from './stats.js';

const quick = process.env.BENCH_QUICK === '1';

export interface Load {
  perSecond: number;
  p50: number;
  p99: number;
  errors: number;
  /** CPU the load generator (this process) spent a request, in us: taken from the service's two cores. */
  clientCpuUs: number;
  /** CPU the service's processes spent a request, in us, when the caller said how to read it. */
  serviceCpuUs?: number;
}

export type Make = (i: number) => LoadRequest;

/** Request number i, made and answered by whatever client (the load client, the sdk, fetch): its status. */
export type Perform = (i: number) => Promise<number>;

/** Requests made by `make`, sent on the load client's keep-alive connections. */
export const over = (client: LoadClient, make: Make): Perform => async (i) => (await client.request(make(i))).status;

/** Sends requests from `concurrency` clients while `more(sent)` holds, and times each. */
export async function sendEach(concurrency: number, more: (sent: number) => boolean, perform: Perform): Promise<{ latencies: number[]; errors: number }> {
  const latencies: number[] = [];
  let next = 0;
  let errors = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (more(next)) {
      const i = next++;
      const t = performance.now();
      const status = await perform(i);
      latencies.push(performance.now() - t);
      if (status !== 200) errors++;
    }
  }));
  return { latencies, errors };
}

/** Sends `total` requests from `concurrency` clients and times each. */
export async function loadEach(concurrency: number, total: number, perform: Perform): Promise<Load> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  const { latencies, errors } = await sendEach(concurrency, (sent) => sent < total, perform);
  const seconds = (performance.now() - started) / 1000;
  const { user, system } = process.cpuUsage(cpu);
  latencies.sort((a, b) => a - b);
  return {
    perSecond: Math.round(total / seconds), p50: round(percentile(latencies, 50)), p99: round(percentile(latencies, 99)), errors,
    clientCpuUs: Math.round((user + system) / total),
  };
}

/**
 * How long requests are sent, untimed, before each measured load at the same concurrency,
 * so the figures are for a service in use, not one still compiling its code: after a bulk
 * load every process gets cheaper per request for several seconds, and 10 s reaches the
 * level later rounds hold (docs/performance-log.md). Nothing in the service keeps an answer
 * or an embedding, so repeated questions cost what new ones do.
 */
export const WARM_UP_MS = quick ? 500 : 10_000;

/**
 * loadEach(), after WARM_UP_MS of requests made the same way (numbered after the measured ones).
 * `serviceCpuMs`: the service's processes' CPU so far, read before and after the measured
 * requests (CPU a request moves less with the machine's speed than requests a second do).
 */
export async function measureEach(concurrency: number, total: number, perform: Perform, serviceCpuMs?: () => number): Promise<Load> {
  const until = performance.now() + WARM_UP_MS;
  await sendEach(concurrency, () => performance.now() < until, (i) => perform(total + i));
  const before = serviceCpuMs?.();
  const measured = await loadEach(concurrency, total, perform);
  return before === undefined ? measured : { ...measured, serviceCpuUs: Math.round(((serviceCpuMs!() - before) * 1000) / total) };
}

/** Sends `total` requests from `concurrency` keep-alive connections and times each. */
export const load = (client: LoadClient, concurrency: number, total: number, make: Make) => loadEach(concurrency, total, over(client, make));

/** load(), after the warm-up. */
export const measure = (client: LoadClient, concurrency: number, total: number, make: Make, serviceCpuMs?: () => number) => measureEach(concurrency, total, over(client, make), serviceCpuMs);

export const round = (x: number, digits = 2) => Number(x.toFixed(digits));

/** A batch add of `count` corpus memories for `tenant`, from memory number `from`. */
export const addBatch = (tenant: string, from: number, count: number) => ({
  method: 'POST' as const,
  path: '/v1/memory',
  body: JSON.stringify({ memories: Array.from({ length: count }, (_, i) => ({ tenant_id: tenant, content: memoryText(from + i) })) }),
});
/** Query number i of the corpus's questions, top 10, of `tenant`. */
export const query = (tenant: string) => (i: number) => ({ method: 'GET' as const, path: `/v1/memory?tenant_id=${tenant}&top_k=10&query=${encodeURIComponent(questionText(i))}` });
