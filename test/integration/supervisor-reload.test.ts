import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { issueKey } from '../helpers/processes.js';
import { freePort, waitFor } from '../helpers/service.js';

const dir = mkdtempSync(join(tmpdir(), 'agent-supervisor-'));
let stop = async () => {};
afterAll(async () => {
  await stop();
  rmSync(dir, { recursive: true, force: true });
});

it('npm start passes SIGHUP to the enclave, which reloads its keys', async () => {
  const file = join(dir, 'keys.json');
  const first = issueKey(file, ['t1']);
  const port = await freePort();
  const supervisor = spawn(process.execPath, [resolve(import.meta.dirname, '../../dist/scripts/start.js')], {
    env: { ...process.env, API_KEYS_FILE: file, DATA_DIR: join(dir, 'data'), PORT: String(port), HOST: '127.0.0.1', ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, HOST_STORE_ADDR: `127.0.0.1:${await freePort()}`, LOG_LEVEL: 'warn' },
    stdio: 'ignore',
  });
  stop = () => new Promise<void>((res) => {
    if (supervisor.exitCode !== null) return res();
    supervisor.once('exit', () => res());
    supervisor.kill('SIGTERM');
  });
  const base = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${base}/healthz`)).status === 200, 60_000);
  const query = (key: string) => request(base, 'GET', '/v1/memory?tenant_id=t1&query=x', undefined, { authorization: `Bearer ${key}` });
  expect((await query(first)).status).toBe(200);

  const second = issueKey(file, ['t1']);
  expect((await query(second)).status).toBe(401);
  supervisor.kill('SIGHUP');
  await waitFor(async () => (await query(second)).status === 200, 10_000);
  expect(supervisor.exitCode).toBeNull();
  expect((await query(first)).status).toBe(200);
});
