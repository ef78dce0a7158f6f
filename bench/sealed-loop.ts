/**
 * A small loop of sealed and plain memory queries through the sdk against a local service:
 * what the sealing costs a query, end to end, and a script to profile the client with
 * (`node --cpu-prof dist/bench/sealed-loop.js`). Not part of `npm run bench` (bench/gateway.ts is).
 *
 *   node dist/bench/sealed-loop.js [queries, default 1000]
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startService } from '../scripts/lib/run-service.js';
import { connect } from '../sdk/client.js';
import { invokedDirectly } from '../sdk/bin/invoked-directly.js';
import { percentile } from './stats.js';

async function main(queries: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'sealed-loop-'));
  const dataDir = join(dir, 'data');
  const svc = await startService({ DATA_DIR: dataDir, LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0' }, join(dir, 'service.log'));
  try {
    const tee = await connect({ baseUrl: svc.baseUrl, rootPem: readFileSync(join(dataDir, 'simulated-root.pem'), 'utf8'), insecureSkipPcrPinning: true });
    for (let i = 0; i < 50; i++) await tee.call('POST', '/v1/memory', { tenant_id: 'loop', content: `memory ${i} about dogs and cats number ${i}` });
    const target = '/v1/memory?tenant_id=loop&query=dogs&top_k=5';
    const time = async (sealed: boolean) => {
      const ms: number[] = [];
      for (let i = 0; i < queries; i++) {
        const start = performance.now();
        const answer = sealed ? await tee.sealedCall('GET', target) : await tee.call('GET', target);
        ms.push(performance.now() - start);
        if (answer.status !== 200) throw new Error(`HTTP ${answer.status}`);
      }
      return ms;
    };
    await time(false);
    await time(true); // warm-up of both paths
    const plain = await time(false);
    const sealed = await time(true);
    const p50 = (xs: number[]) => percentile([...xs].sort((a, b) => a - b), 50);
    process.stdout.write(`${queries} queries each: plain p50 ${p50(plain).toFixed(2)} ms, sealed p50 ${p50(sealed).toFixed(2)} ms, sealing adds ${(p50(sealed) - p50(plain)).toFixed(2)} ms\n`);
  } finally {
    await svc.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (invokedDirectly(import.meta.url)) await main(Number(process.argv[2] ?? 1000));
