import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from '../../scripts/lib/run-service.js';
import { nodeArgs } from '../../scripts/lib/node-args.js';
import { track } from './children.js';

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
}

/**
 * Starts the built host store, enclave and proxy (dist/) as three real processes on free
 * ports with a fresh data directory, the way `npm start` runs them, and waits until the
 * API answers.
 */
export async function startService(extraEnv: NodeJS.ProcessEnv = {}, options: StartOptions = {}): Promise<RunningService> {
  const dataDir = extraEnv.DATA_DIR ?? mkdtempSync(join(tmpdir(), 'agent-test-'));
  const enclaveAddr = `127.0.0.1:${await freePort()}`;
  const hostStoreAddr = `127.0.0.1:${await freePort()}`;
  const port = await freePort();
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
  const launch = (script: string, overrides: NodeJS.ProcessEnv = {}) => {
    const childEnv = { ...env, ...overrides };
    // The same node arguments as npm start (scripts/lib/node-args.ts): flags, and the enclave's heap.
    const child = track(spawn(process.execPath, nodeArgs(join(root, 'dist', script), childEnv), { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] }), script);
    child.stdout!.on('data', (d: Buffer) => { logs += d.toString(); });
    child.stderr!.on('data', (d: Buffer) => { logs += d.toString(); });
    return child;
  };
  const baseUrl = `${options.https ? 'https' : 'http'}://127.0.0.1:${port}`;
  // Readiness: /healthz answers 200 once the proxy reaches the enclave. Over TLS this poll
  // skips certificate checks; the TLS tests check the certificate themselves.
  const ready = async () => (options.https ? (await fetchInsecure(`${baseUrl}/healthz`)) : (await fetch(`${baseUrl}/healthz`)).status) === 200;

  const service: RunningService = {
    baseUrl,
    dataDir,
    enclaveAddr,
    hostStoreAddr,
    env,
    hostStore: launch('host-store/main.js'),
    enclave: launch('enclave/main.js'),
    proxy: undefined as unknown as ChildProcess,
    output: () => logs,
    async killEnclave(signal = 'SIGKILL') {
      await stopChild(service.enclave, signal);
    },
    async startEnclave(overrides = {}) {
      service.enclave = launch('enclave/main.js', overrides);
      // A restart replays the store: its own budget, longer with both cores busy.
      await waitFor(ready, RESTART_BUDGET_MS, () => `waiting for the restarted enclave to be ready (GET /healthz 200)\n${logs}`);
    },
    async killHostStore(signal = 'SIGKILL') {
      await stopChild(service.hostStore, signal);
    },
    async startHostStore() {
      service.hostStore = launch('host-store/main.js');
      const listening = logs.split('host store listening').length;
      // Its own budget, and a message that names what was awaited.
      await waitFor(async () => logs.split('host store listening').length > listening && service.hostStore.exitCode === null, 30_000,
        () => `waiting for the restarted host store to log "host store listening"\n${logs}`);
    },
    async stop() {
      await Promise.all([stopChild(service.proxy, 'SIGTERM'), stopChild(service.enclave, 'SIGTERM')]);
      await stopChild(service.hostStore, 'SIGTERM');
      if (!extraEnv.DATA_DIR) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  const proxyEnclaveAddr = options.proxyEnclaveAddr ? await options.proxyEnclaveAddr(enclaveAddr) : enclaveAddr;
  service.proxy = launch('proxy/main.js', { ENCLAVE_ADDR: proxyEnclaveAddr });
  try {
    await waitFor(ready, 60_000, () => logs);
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
    } catch {
      // not up yet
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
