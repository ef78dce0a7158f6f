import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, waitFor } from '../helpers/service.js';

/** `npm start`'s supervisor as an operator meets it: bad configuration, signals, a supervisor killed outright. */
const root = resolve(import.meta.dirname, '../..');
const dirs: string[] = [];
afterAll(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

async function supervisor(env: NodeJS.ProcessEnv) {
  const dir = mkdtempSync(join(tmpdir(), 'agent-supervisor-'));
  dirs.push(dir);
  const port = await freePort();
  const child = spawn(process.execPath, [join(root, 'dist/scripts/start.js')], {
    env: {
      ...process.env, DATA_DIR: join(dir, 'data'), PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn',
      ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, HOST_STORE_ADDR: `127.0.0.1:${await freePort()}`, ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => { output += d.toString(); });
  child.stderr!.on('data', (d: Buffer) => { output += d.toString(); });
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  return { child, port, exited, output: () => output };
}

const alive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };
const childrenOf = (sup: ChildProcess) => {
  // Our three children are the processes whose parent is the supervisor.
  return execFileSync('ps', ['-o', 'pid=', '--ppid', String(sup.pid)], { encoding: 'utf8' }).split('\n').map((l) => Number(l.trim())).filter(Boolean);
};

describe('the supervisor (npm start)', () => {
  it('a configuration error (PORT=abc) stops it with one line and exit 2, without a restart loop or a stack trace', async () => {
    const s = await supervisor({ PORT: 'abc' });
    expect(await s.exited).toBe(2);
    expect(s.output()).toMatch(/PORT/);
    expect(s.output()).toMatch(/agent-service: the proxy cannot run with this configuration/);
    expect(s.output()).not.toMatch(/restarting/);
    expect(s.output()).not.toMatch(/\n\s+at /);
  });

  it('an embedding model that is not installed stops it the same way', async () => {
    const s = await supervisor({ EMBEDDING_MODEL: 'no-such-model' });
    expect(await s.exited).toBe(2);
    expect(s.output()).toMatch(/cannot load embedding model "no-such-model"/);
    expect(s.output()).not.toMatch(/\n\s+at /);
  });

  it('kill -9 of the supervisor leaves no child running, so the next start finds its ports free', async () => {
    const s = await supervisor({});
    await waitFor(async () => (await fetch(`http://127.0.0.1:${s.port}/healthz`)).status === 200, 60_000, s.output);
    const children = childrenOf(s.child);
    expect(children.length).toBe(3);
    s.child.kill('SIGKILL');
    await waitFor(async () => children.every((pid) => !alive(pid)), 20_000, () => `still running: ${children.filter(alive).join(' ')}`);
  });

  it('SIGTERM stops all three processes and exits 0', async () => {
    const s = await supervisor({});
    await waitFor(async () => (await fetch(`http://127.0.0.1:${s.port}/healthz`)).status === 200, 60_000, s.output);
    const children = childrenOf(s.child);
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
    expect(children.filter(alive)).toEqual([]);
  });
});
