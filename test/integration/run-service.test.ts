import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { repoRoot } from '../../common/paths.js';
import { waitFor } from '../helpers/service.js';

/**
 * The benchmarks' launcher (scripts/lib/run-service.ts startService) killed outright, as a
 * crashed or interrupted benchmark is: the host store, enclave and proxy it started stop too,
 * instead of running on, idle, holding memory and ports on a shared machine.
 */
const dir = mkdtempSync(join(tmpdir(), 'run-service-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const alive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };

it('a benchmark killed with SIGKILL leaves none of the processes it started running', async () => {
  const script = `
    const { startService } = await import(${JSON.stringify(join(repoRoot, 'dist/scripts/lib/run-service.js'))});
    const svc = await startService({ DATA_DIR: ${JSON.stringify(join(dir, 'data'))}, LOG_LEVEL: 'warn' }, ${JSON.stringify(join(dir, 'service.log'))});
    console.log(JSON.stringify([svc.hostStore.pid, svc.enclave.pid, svc.proxy.pid]));
    setInterval(() => {}, 1000);
  `;
  const bench = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const pids = await new Promise<number[]>((resolve, reject) => {
    let out = '';
    bench.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split('\n').find((l) => l.startsWith('['));
      if (line) resolve(JSON.parse(line) as number[]);
    });
    bench.once('exit', (code) => reject(new Error(`the script exited (${code}) before the service was up: ${out}`)));
  });
  expect(pids).toHaveLength(3);
  expect(pids.every(alive)).toBe(true);
  bench.kill('SIGKILL');
  await waitFor(async () => !pids.some(alive), 30_000, () => `still running: ${pids.filter(alive).join(', ')}`);
}, 120_000);
