import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeArgs } from './node-args.js';

const distRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** A port nobody listens on right now, on loopback. */
export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => res(port));
    });
  });
}

export interface Service {
  baseUrl: string;
  hostStore: ChildProcess;
  enclave: ChildProcess;
  proxy: ChildProcess;
  /** SIGKILLs the enclave, starts a new one, and resolves with the ms until the API answers again. */
  restartEnclave(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * Starts the built host store, enclave and proxy on loopback only (free ports), their
 * output appended to `logFile`, and resolves once the API answers. `root`: the `dist` folder
 * of another build to start instead of this one (a benchmark's baseline).
 */
export async function startService(env: NodeJS.ProcessEnv, logFile: string, root = distRoot): Promise<Service> {
  const port = await freePort();
  const fullEnv = {
    ...process.env, ...env, HOST: '127.0.0.1', PORT: String(port),
    ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, HOST_STORE_ADDR: `127.0.0.1:${await freePort()}`,
  };
  const log = createWriteStream(logFile, { flags: 'a' });
  const launch = (script: string) => {
    // An IPC channel, as under npm start's supervisor: each process stops when it closes, so a
    // benchmark that crashes or is killed leaves none behind (common/supervised.ts). Unref'd:
    // the channel alone does not keep this process alive.
    const child = spawn(process.execPath, nodeArgs(resolve(root, script), fullEnv), { env: fullEnv, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    child.channel?.unref();
    child.stdout!.pipe(log, { end: false });
    child.stderr!.pipe(log, { end: false });
    return child;
  };
  const hostStore = launch('host-store/main.js');
  let enclave = launch('enclave/main.js');
  const proxy = launch('proxy/main.js');
  const baseUrl = `http://127.0.0.1:${port}`;
  const ready = async (timeoutMs: number, pollMs: number) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (hostStore.exitCode !== null || enclave.exitCode !== null || proxy.exitCode !== null) {
        throw new Error(`a process exited at start; the end of ${logFile}:\n${readFileSync(logFile, 'utf8').slice(-3000)}`);
      }
      try {
        if ((await fetch(`${baseUrl}/healthz`)).status === 200) return;
      } catch {
        // not up yet
      }
      if (Date.now() > deadline) throw new Error(`the service did not come up; see ${logFile}`);
      await new Promise((r) => setTimeout(r, pollMs));
    }
  };
  const stopChild = (c: ChildProcess) => new Promise<void>((res) => {
    if (c.exitCode !== null || c.signalCode !== null) return res();
    c.once('exit', () => res());
    c.kill('SIGTERM');
  });
  try {
    await ready(120_000, 200);
  } catch (err) {
    // One failed to start: the others must not stay behind holding ports and memory.
    await Promise.all([stopChild(proxy), stopChild(enclave), stopChild(hostStore)]);
    log.end();
    throw err;
  }
  return {
    baseUrl,
    hostStore,
    get enclave() { return enclave; },
    proxy,
    async restartEnclave() {
      await new Promise<void>((res) => { enclave.once('exit', () => res()); enclave.kill('SIGKILL'); });
      const started = performance.now();
      enclave = launch('enclave/main.js');
      await ready(600_000, 20);
      return performance.now() - started;
    },
    async stop() {
      await Promise.all([stopChild(proxy), stopChild(enclave)]);
      await stopChild(hostStore);
      log.end();
    },
  };
}

/** Resident set size of a process in MiB (Linux /proc), or NaN where unavailable. */
export function rssMiB(pid: number | undefined): number {
  try {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb ? Number(kb) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** CPU time a process has used so far (user + system) in ms (Linux /proc), or NaN where unavailable. */
export function cpuMs(pid: number | undefined): number {
  try {
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th, in clock ticks (100 a second).
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return Number.NaN;
  }
}

/**
 * Waits until a process is at rest: under 5% of a core over a whole second (no background
 * indexing, compaction or copy going on), or `maxMs` has passed. Resolves with the ms waited.
 */
export async function untilIdle(pid: number | undefined, maxMs: number): Promise<number> {
  const started = performance.now();
  let used = cpuMs(pid);
  for (;;) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = cpuMs(pid);
    if (!(now - used >= 50) || performance.now() - started > maxMs) return performance.now() - started;
    used = now;
  }
}
