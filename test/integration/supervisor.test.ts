import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/service.js';
import { scratch, stackTraceLine, startSupervisor, type Supervisor } from '../helpers/supervisor.js';

/** `npm start`'s supervisor as an operator meets it: bad configuration, signals, a supervisor killed outright. */
const folder = scratch();
afterAll(() => folder.remove());

/**
 * A supervisor that a test left running, all three processes up, for the SIGTERM test to stop:
 * a start costs three processes and the embedding model's load, and what it tests is the stop.
 */
let running: Supervisor | undefined;
const alive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };
/** The settings that name an instance's folder and ports, to start another on the same ones. */
const sameInstance = (env: NodeJS.ProcessEnv) => Object.fromEntries(['DATA_DIR', 'PORT', 'ENCLAVE_ADDR', 'HOST_STORE_ADDR'].map((n) => [n, env[n]]));
/** The supervisor's JSON log records with message `msg`. */
const supervisorLogs = (output: string, msg: string) => output.split('\n').filter((l) => l.startsWith('{'))
  .map((l) => JSON.parse(l) as { name: string; msg: string; process: string; restartInMs?: number })
  .filter((r) => r.name === 'supervisor' && r.msg === msg);

describe('the supervisor (npm start)', () => {
  it('a configuration error (PORT=abc) stops it with one line and exit 2, without a restart loop or a stack trace', async () => {
    const s = await startSupervisor(folder.dir, { PORT: 'abc' });
    expect(await s.exited).toBe(2);
    expect(s.output()).toMatch(/PORT/);
    expect(s.lastLine()).toMatch(/^agent-service: the proxy cannot run with this configuration/);
    expect(s.output()).not.toMatch(/restarting/);
    expect(s.output()).not.toMatch(stackTraceLine);
  });

  it('an embedding model that is not installed stops it the same way', async () => {
    const s = await startSupervisor(folder.dir, { EMBEDDING_MODEL: 'no-such-model' });
    expect(await s.exited).toBe(2);
    expect(s.output()).toMatch(/cannot load embedding model "no-such-model"/);
    expect(s.output()).not.toMatch(stackTraceLine);
  });

  it('kill -9 of the supervisor leaves no child running, so the next start finds its ports free', async () => {
    const s = await startSupervisor(folder.dir);
    await s.ready();
    const children = s.children();
    expect(children.length).toBe(3);
    s.child.kill('SIGKILL');
    await waitFor(async () => children.every((pid) => !alive(pid)), 20_000, () => `still running: ${children.filter(alive).join(' ')}`);
    // The same ports and folder again: nothing of the first holds them.
    // Readable lines, as in a terminal (where they are the default).
    const again = await startSupervisor(folder.dir, { ...sameInstance(s.env), LOG_FORMAT: 'pretty', LOG_LEVEL: 'info' });
    await again.ready();
    expect(again.children().length).toBe(3);
    running = again;
    // Its start ends with one line saying where to go (first hour, 7).
    await waitFor(async () => again.output().includes('ready: '), 60_000, () => `waiting for the line "ready: …"\n${again.output()}`);
    const lines = again.output().trimEnd().split('\n');
    const readyAt = lines.findIndex((l) => / INFO +supervisor ready: /.test(l));
    expect(lines[readyAt]).toMatch(new RegExp(`^\\d\\d:\\d\\d:\\d\\d\\.\\d{3} INFO +supervisor ready: ${again.baseUrl.replace(/[.]/g, '\\.')}/$`));
    // The last line of the start: after it, only the log of requests (this test's /healthz polls).
    expect(readyAt).toBeGreaterThan(lines.findIndex((l) => / proxy +proxy listening /.test(l)));
    expect(lines.slice(readyAt + 1).every((l) => / proxy +request /.test(l))).toBe(true);
    expect(again.output()).not.toMatch(/^\{"level"/m);
  });

  it('restarts a process that keeps dying, with back-off, gives up after six fast failures, and the next start finds its ports and folder free', async () => {
    // Sealed blobs without their key: the enclave refuses to start (exit 1) every time.
    const dataDir = join(folder.dir, 'keyless-data');
    mkdirSync(join(dataDir, 'memory'), { recursive: true });
    writeFileSync(join(dataDir, 'memory', 'log-000000000001.sealed'), 'not sealed');
    const s = await startSupervisor(folder.dir, { DATA_DIR: dataDir });
    expect(await s.exited).toBe(1);
    const restarts = supervisorLogs(s.output(), 'process exited; restarting');
    expect(restarts.map((r) => [r.process, r.restartInMs])).toEqual([500, 1000, 2000, 4000, 8000].map((ms) => ['enclave', ms]));
    expect(s.output().match(/enclave: refusing to start/g)?.length).toBe(6);
    expect(s.lastLine()).toBe('agent-service: the enclave failed 6 times in a row within 30 s of starting (last: exit 1); not restarting it');

    rmSync(join(dataDir, 'memory'), { recursive: true });
    const again = await startSupervisor(folder.dir, sameInstance(s.env));
    await again.ready();
    again.child.kill('SIGTERM');
    expect(await again.exited).toBe(0);
  }, 120_000);

  it('SIGTERM stops all three processes and exits 0', async () => {
    const s = running ?? await startSupervisor(folder.dir);
    await s.ready();
    const children = s.children();
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
    expect(children.filter(alive)).toEqual([]);
  });
});
