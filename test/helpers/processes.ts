import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { nodeArgs } from '../../scripts/lib/node-args.js';
import { freePort, waitFor } from './service.js';
import { track } from './children.js';

const root = resolve(import.meta.dirname, '../..');

/** Runs the built `agent-keys` CLI as an operator would; returns its exit status and output. */
export function agentKeys(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(root, 'dist/scripts/agent-keys.js'), ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Issues a key for `tenants` into `file` with the CLI and returns it. */
export function issueKey(file: string, tenants: string[]): string {
  const r = agentKeys(['issue', '--file', file, ...tenants.flatMap((t) => ['--tenant', t])]);
  if (r.status !== 0) throw new Error(`agent-keys issue failed: ${r.stderr}`);
  return r.stdout.trim();
}

export interface Lone {
  child: ChildProcess;
  output(): string;
  /** Resolves with the exit code once the process ends. */
  exited: Promise<number | null>;
  /** Waits until the output contains `text`. */
  waitForOutput(text: string, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** Runs node with `args`, collecting stdout and stderr as one output; `exited` resolves with its exit code. */
export function spawnCapturing(args: string[], env: NodeJS.ProcessEnv): { child: ChildProcess; out: () => string; exited: Promise<number | null> } {
  const child = track(spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] }), args.find((a) => a.endsWith('.js')) ?? 'node');
  let out = '';
  child.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  child.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  return { child, out: () => out, exited };
}

/** Starts one built process (e.g. 'enclave/main.js') alone with exactly `env` added. */
export function startLone(script: string, env: NodeJS.ProcessEnv): Lone {
  const fullEnv = { ...process.env, LOG_LEVEL: 'info', ...env };
  const { child, out, exited } = spawnCapturing(nodeArgs(join(root, 'dist', script), fullEnv), fullEnv);
  return {
    child,
    output: out,
    exited,
    waitForOutput: (text, timeoutMs = 60_000) => waitFor(async () => out().includes(text), timeoutMs, out),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}

/**
 * Starts the enclave alone, the way `npm run start:enclave` runs it, with a host store of
 * its own on env.DATA_DIR (unless env.HOST_STORE_ADDR names one already running); stop()
 * stops both. `exited` and the output are the enclave's.
 */
export async function startLoneEnclave(env: NodeJS.ProcessEnv): Promise<Lone & { hostStore?: Lone }> {
  if (env.HOST_STORE_ADDR) return startLone('enclave/main.js', env);
  const hostStoreAddr = `127.0.0.1:${await freePort()}`;
  const hostStore = startLone('host-store/main.js', { DATA_DIR: env.DATA_DIR, HOST_STORE_ADDR: hostStoreAddr });
  await hostStore.waitForOutput('host store listening', 30_000);
  const enclave = startLone('enclave/main.js', { ...env, HOST_STORE_ADDR: hostStoreAddr });
  return {
    ...enclave,
    hostStore,
    async stop() {
      await enclave.stop();
      await hostStore.stop();
    },
  };
}
