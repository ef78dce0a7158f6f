import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort, waitFor } from './service.js';
import { track } from './children.js';

const root = resolve(import.meta.dirname, '../..');

export interface Supervisor {
  child: ChildProcess;
  /** The settings it was started with (DATA_DIR, PORT, ENCLAVE_ADDR, HOST_STORE_ADDR, …). */
  env: NodeJS.ProcessEnv;
  baseUrl: string;
  /** Resolves with the exit code once it ends. */
  exited: Promise<number | null>;
  /** stdout and stderr as one terminal would show them, in the order they were written. */
  output(): string;
  lastLine(): string;
  /** Waits until GET /healthz answers 200. */
  ready(timeoutMs?: number): Promise<void>;
  /** The pids of the processes it started (its children). */
  children(): number[];
  stop(): Promise<void>;
}

const started: Supervisor[] = [];

/** A folder for one test file's supervisors; remove() stops any still running (a failed test's) and deletes it. */
export function scratch(): { dir: string; remove(): Promise<void> } {
  const dir = mkdtempSync(join(tmpdir(), 'agent-supervisor-'));
  return {
    dir,
    async remove() {
      await Promise.all(started.splice(0).map((s) => s.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * `npm start` (dist/scripts/start.js) as an operator runs it, on loopback with free ports
 * and a data folder in `dir`, `env` overriding any of them.
 */
export async function startSupervisor(dir: string, env: NodeJS.ProcessEnv = {}): Promise<Supervisor> {
  const fullEnv: NodeJS.ProcessEnv = {
    ...process.env, DATA_DIR: mkdtempSync(join(dir, 'data-')), PORT: String(await freePort()), HOST: '127.0.0.1', LOG_LEVEL: 'warn',
    ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, HOST_STORE_ADDR: `127.0.0.1:${await freePort()}`, ...env,
  };
  // One file for both streams, as a terminal has one screen: the order of lines is kept.
  const outFile = join(mkdtempSync(join(dir, 'out-')), 'output.txt');
  const fd = openSync(outFile, 'a');
  const child = track(spawn(process.execPath, [join(root, 'dist/scripts/start.js')], { env: fullEnv, stdio: ['ignore', fd, fd] }), 'npm start (dist/scripts/start.js)');
  closeSync(fd);
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  const output = () => readFileSync(outFile, 'utf8');
  const baseUrl = `http://127.0.0.1:${fullEnv.PORT}`;
  const supervisor: Supervisor = {
    child,
    env: fullEnv,
    baseUrl,
    exited,
    output,
    lastLine: () => output().trimEnd().split('\n').at(-1) ?? '',
    ready: (timeoutMs = 60_000) => waitFor(async () => (await fetch(`${baseUrl}/healthz`)).status === 200, timeoutMs, output),
    children: () => execFileSync('ps', ['-o', 'pid=', '--ppid', String(child.pid)], { encoding: 'utf8' }).split('\n').map((l) => Number(l.trim())).filter(Boolean),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await exited;
    },
  };
  started.push(supervisor);
  return supervisor;
}

/** No line of a stack trace ("    at f (file:1:2)"). */
export const stackTraceLine = /\n\s+at /;
