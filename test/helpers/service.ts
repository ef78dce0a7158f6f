import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from '../../scripts/lib/run-service.js';
import { nodeArgs } from '../../scripts/lib/node-args.js';
import { track } from './children.js';
import { isSupervisorMessage } from '../../common/supervised.js';

const root = resolve(import.meta.dirname, '../..');

export { freePort };

/** How long a restarted enclave may take to replay its store and answer, under load. */
const RESTART_BUDGET_MS = 120_000;

export interface RunningService {
  baseUrl: string;
  /** The host store's folder. */
  dataDir: string;
  enclaveAddr: string;
  hostStoreAddr: string;
  env: NodeJS.ProcessEnv;
  hostStore: ChildProcess;
  enclave: ChildProcess;
  proxy: ChildProcess;
  /** Output of both processes so far (for assertions about logs). */
  output(): string;
  killEnclave(signal?: NodeJS.Signals): Promise<void>;
  /** Starts the enclave again on the same data; `overrides`: settings of this start only (e.g. JOIN_ENCLAVE_ADDR, to come back with the service's keys). */
  startEnclave(overrides?: NodeJS.ProcessEnv): Promise<void>;
  killHostStore(signal?: NodeJS.Signals): Promise<void>;
  /** Starts the host store again (on the same folder and address). */
  startHostStore(): Promise<void>;
  stop(): Promise<void>;
}

export interface StartOptions {
  /**
   * The address the proxy should use for the enclave, given the enclave's own: e.g. a
   * relay that records the channel. Default: the enclave's address.
   */
  proxyEnclaveAddr?: (enclaveAddr: string) => Promise<string>;
  /** The proxy serves HTTPS (TLS_CERT/TLS_KEY are in the env). */
  https?: boolean;
  /** The proxy's port at the first attempt (to test what happens when another program holds it); default a free one. */
  firstPort?: number;
}

/** How many times a start is tried again after one of its processes lost its port to another test. */
const PORT_ATTEMPTS = 3;

/**
 * Starts the built host store, enclave and proxy (dist/) as three real processes on free
 * ports with a fresh data directory, the way `npm start` runs them, and waits until the
 * API answers. A free port is only free when it is chosen: another test may take it before
 * the process here listens on it. Then that process exits 2 naming the port, and the
 * start is tried again on new ports.
 */
export async function startService(extraEnv: NodeJS.ProcessEnv = {}, options: StartOptions = {}): Promise<RunningService> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(extraEnv, options, attempt === 1 ? options.firstPort : undefined);
    } catch (err) {
      // A relay the test made for the first ports cannot follow new ones.
      if (!(err instanceof PortTaken) || attempt >= PORT_ATTEMPTS || options.proxyEnclaveAddr) throw err;
    }
  }
}

/** A process lost its port to another program between choosing it and listening on it. */
class PortTaken extends Error {}
/** A process exited before it was ready, for another reason. */
class StartFailed extends Error {}

/**
 * A child that tells when it listens, the way `npm start`'s supervisor hears it (common/supervised.ts):
 * over an IPC channel, from this very process. Probing the address instead can reach another
 * test's process that holds the same port, and a test then speaks to a service not its own.
 */
interface Launched {
  child: ChildProcess;
  /** Set once the child said it listens. */
  ready: boolean;
  /** The configuration error it stopped with, if any (e.g. its port was in use). */
  configError?: string;
}

async function startOnce(extraEnv: NodeJS.ProcessEnv, options: StartOptions, proxyPort?: number): Promise<RunningService> {
  const dataDir = extraEnv.DATA_DIR ?? mkdtempSync(join(tmpdir(), 'agent-test-'));
  const enclaveAddr = `127.0.0.1:${await freePort()}`;
  const hostStoreAddr = `127.0.0.1:${await freePort()}`;
  const port = proxyPort ?? await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LOG_LEVEL: 'info',
    // Rate limits are tested on their own (limits.test.ts); elsewhere they would only
    // turn a test's bursts of requests into 429s.
    RATE_LIMIT_MAX: '0',
    RATE_LIMIT_IP_MAX: '0',
    ...extraEnv,
    DATA_DIR: dataDir,
    ENCLAVE_ADDR: enclaveAddr,
    HOST_STORE_ADDR: hostStoreAddr,
    HOST: '127.0.0.1',
    PORT: String(port),
  };
  let logs = '';
  const launch = (script: string, overrides: NodeJS.ProcessEnv = {}): Launched => {
    const childEnv = { ...env, ...overrides };
    // The same node arguments as npm start (scripts/lib/node-args.ts): flags, and the enclave's heap.
    const child = track(spawn(process.execPath, nodeArgs(join(root, 'dist', script), childEnv), { env: childEnv, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] }), script);
    // Unref'd: the channel alone does not keep the test's process alive. While it is open the
    // child stops with the test's process, as under npm start.
    child.channel?.unref();
    const launched: Launched = { child, ready: false };
    child.on('message', (message) => {
      if (!isSupervisorMessage(message)) return;
      if ('ready' in message) launched.ready = true;
      else {
        launched.configError = message.configError;
        logs += `${script}: ${message.configError}\n`;
      }
    });
    child.stdout!.on('data', (d: Buffer) => { logs += d.toString(); });
    child.stderr!.on('data', (d: Buffer) => { logs += d.toString(); });
    return launched;
  };
  const baseUrl = `${options.https ? 'https' : 'http'}://127.0.0.1:${port}`;
  // Readiness: each process said it listens, and /healthz answers 200 once the proxy reaches
  // the enclave. Over TLS this poll skips certificate checks; the TLS tests check the certificate themselves.
  const answers = async () => (options.https ? (await fetchInsecure(`${baseUrl}/healthz`)) : (await fetch(`${baseUrl}/healthz`)).status) === 200;
  const ready = (...children: Launched[]) => async () => {
    for (const c of children) {
      if (c.child.exitCode === null && c.child.signalCode === null) continue;
      const line = `${c.child.spawnargs.find((a) => a.endsWith('.js')) ?? 'a process'} exited (${c.child.exitCode ?? c.child.signalCode})`;
      if (c.configError && / is in use by another program/.test(c.configError)) throw new PortTaken(`${line}: ${c.configError}`);
      throw new StartFailed(`${line}\n${logs.slice(-4000)}`);
    }
    return children.every((c) => c.ready) && await answers();
  };

  let hostStore = launch('host-store/main.js');
  let enclave = launch('enclave/main.js');
  let proxy: Launched | undefined;
  const service: RunningService = {
    baseUrl,
    dataDir,
    enclaveAddr,
    hostStoreAddr,
    env,
    get hostStore() { return hostStore.child; },
    get enclave() { return enclave.child; },
    get proxy() { return proxy!.child; },
    output: () => logs,
    async killEnclave(signal = 'SIGKILL') {
      await stopChild(enclave.child, signal);
    },
    async startEnclave(overrides = {}) {
      enclave = launch('enclave/main.js', overrides);
      // A restart replays the store: its own budget, longer with both cores busy.
      await waitFor(ready(enclave), RESTART_BUDGET_MS, () => `waiting for the restarted enclave to be ready (its message, then GET /healthz 200)\n${logs}`);
    },
    async killHostStore(signal = 'SIGKILL') {
      await stopChild(hostStore.child, signal);
    },
    async startHostStore() {
      hostStore = launch('host-store/main.js');
      // Its own budget, and a message that names what was awaited.
      await waitFor(async () => hostStore.ready && hostStore.child.exitCode === null, 30_000,
        () => `waiting for the restarted host store to say it listens\n${logs}`);
    },
    async stop() {
      await Promise.all([stopChild(proxy?.child, 'SIGTERM'), stopChild(enclave.child, 'SIGTERM')]);
      await stopChild(hostStore.child, 'SIGTERM');
      if (!extraEnv.DATA_DIR) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    const proxyEnclaveAddr = options.proxyEnclaveAddr ? await options.proxyEnclaveAddr(enclaveAddr) : enclaveAddr;
    proxy = launch('proxy/main.js', { ENCLAVE_ADDR: proxyEnclaveAddr });
    await waitFor(ready(hostStore, enclave, proxy), 60_000, () => logs);
  } catch (err) {
    // One failed to start: the others must not outlive the test, holding ports and memory.
    await service.stop();
    throw err;
  }
  return service;
}

async function stopChild(child: ChildProcess | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((res) => {
    child.once('exit', () => res());
    child.kill(signal);
  });
}

export async function waitFor(check: () => Promise<boolean>, timeoutMs: number, describe: () => string = () => ''): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch (err) {
      // Not up yet, unless the check knows it never will be.
      if (err instanceof StartFailed || err instanceof PortTaken) throw err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms\n${describe().slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** GET over HTTPS without checking the certificate: only for readiness polling. */
async function fetchInsecure(url: string): Promise<number> {
  const { request } = await import('node:https');
  return new Promise((res, rej) => {
    request(url, { rejectUnauthorized: false }, (r) => { r.resume(); res(r.statusCode ?? 0); }).on('error', rej).end();
  });
}
