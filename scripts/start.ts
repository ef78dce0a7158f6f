import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { configFromCli, hostPort, logFormat, logLevel } from '../common/config.js';
import { createLogger } from '../common/logger.js';
import { CONFIG_ERROR_EXIT } from '../common/supervised.js';
import { GrpcBlobStore } from '../enclave/storage/grpc-blob-store.js';
import { EnclaveConnection } from '../proxy/enclave-client.js';
import { NODE_FLAGS } from '../common/node-flags.js';

/**
 * `npm start`: runs the host store, then the enclave once the store answers, then the proxy
 * once the enclave answers; restarts any of them if it dies, and stops all on Ctrl-C /
 * SIGTERM. The children get this process's environment, so the same variables configure
 * a supervised or a lone run.
 */
const config = configFromCli(
  'agent-service: starts the host store, the enclave and the proxy together (see also start:host-store, start:enclave, start:proxy --help).',
  {
    enclaveAddr: hostPort('ENCLAVE_ADDR', 'Address of the enclave\'s gRPC server', '127.0.0.1:50051'),
    hostStoreAddr: hostPort('HOST_STORE_ADDR', 'Address of the host store', '127.0.0.1:50052'),
    logLevel: logLevel(),
    logFormat: logFormat(),
  },
);
const log = createLogger('supervisor', config.logLevel, config.logFormat);
const distRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

interface Supervised {
  name: 'host-store' | 'enclave' | 'proxy';
  script: string;
  child?: ChildProcess;
  restarts: number;
  startedAt: number;
}

const hostStore: Supervised = { name: 'host-store', script: resolve(distRoot, 'host-store/main.js'), restarts: 0, startedAt: 0 };
const enclave: Supervised = { name: 'enclave', script: resolve(distRoot, 'enclave/main.js'), restarts: 0, startedAt: 0 };
const proxy: Supervised = { name: 'proxy', script: resolve(distRoot, 'proxy/main.js'), restarts: 0, startedAt: 0 };
let stopping = false;

/** A process that dies this many times in a row within START_WINDOW_MS of starting is not restarted again. */
const MAX_FAILED_STARTS = 5;
const START_WINDOW_MS = 30_000;

/** Stops everything with one line on stderr and a non-zero exit: for what a restart cannot fix. */
function giveUp(message: string, exitCode: number): void {
  process.stderr.write(`agent-service: ${message}\n`);
  log.error({ reason: message }, 'stopping');
  stop('SIGTERM', exitCode);
}

function run(s: Supervised): void {
  s.startedAt = Date.now();
  // The IPC channel lets the child notice when the supervisor is gone (common/supervised.ts).
  const child = spawn(process.execPath, [...NODE_FLAGS, s.script], { stdio: ['inherit', 'inherit', 'inherit', 'ipc'], env: process.env });
  s.child = child;
  child.on('exit', (code, signal) => {
    s.child = undefined;
    if (stopping) return;
    if (code === CONFIG_ERROR_EXIT) {
      giveUp(`the ${s.name} cannot run with this configuration (its message is above); fix it and start again`, CONFIG_ERROR_EXIT);
      return;
    }
    // Back off when a process keeps dying at start, and stop trying after a few times.
    if (Date.now() - s.startedAt > START_WINDOW_MS) s.restarts = 0;
    if (s.restarts >= MAX_FAILED_STARTS) {
      giveUp(`the ${s.name} failed ${MAX_FAILED_STARTS + 1} times in a row within ${START_WINDOW_MS / 1000} s of starting (last: ${signal ?? `exit ${code}`}); not restarting it`, 1);
      return;
    }
    const delay = Math.min(10_000, 500 * 2 ** s.restarts++);
    log.warn({ process: s.name, code, signal, restartInMs: delay }, 'process exited; restarting');
    setTimeout(() => { if (!stopping) run(s); }, delay);
  });
}

async function waitForHostStore(timeoutMs: number): Promise<void> {
  const blobs = new GrpcBlobStore(config.hostStoreAddr);
  try {
    await blobs.ready(timeoutMs);
  } finally {
    await blobs.close();
  }
}

async function waitForEnclave(timeoutMs: number): Promise<void> {
  const connection = new EnclaveConnection(config.enclaveAddr, 1000);
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      try {
        await connection.health(1000);
        return;
      } catch {
        // A running enclave may be re-embedding every memory after a model change (progress
        // in its log), which can take minutes: give up only on one that keeps exiting.
        if (Date.now() > deadline && !enclave.child) throw new Error(`enclave did not answer on ${config.enclaveAddr} within ${timeoutMs / 1000}s and is not running`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  } finally {
    connection.close();
  }
}

function stop(signal: NodeJS.Signals, exitCode = 0): void {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'stopping');
  const running = (list: Supervised[]) => list.map((s) => s.child).filter((c): c is ChildProcess => c !== undefined);
  const ended = (children: ChildProcess[]) => Promise.all(children.map((c) => new Promise<void>((res) => {
    if (c.exitCode !== null || c.signalCode !== null) res();
    else c.once('exit', () => res());
    c.kill('SIGTERM');
  })));
  setTimeout(() => { for (const c of running([proxy, enclave, hostStore])) c.kill('SIGKILL'); process.exit(1); }, 10_000).unref();
  // The host store last: the enclave may still be handing it its last writes as it stops.
  void ended(running([proxy, enclave])).then(() => ended(running([hostStore]))).then(() => process.exit(exitCode));
}
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
// `npm start` runs this under npm, which does not always pass SIGTERM on: when the process
// that started us is gone (we are re-parented), stop as if told to.
const parentPid = process.ppid;
setInterval(() => { if (process.ppid !== parentPid) stop('SIGTERM'); }, 1000).unref();
// SIGHUP reloads the enclave's API keys; pass it on rather than die of it.
process.on('SIGHUP', () => { enclave.child?.kill('SIGHUP'); });

run(hostStore);
try {
  await waitForHostStore(30_000);
  run(enclave);
  await waitForEnclave(120_000);
} catch (err) {
  log.error({ err: (err as Error).message }, 'failed to start');
  stop('SIGTERM', 1);
}
if (!stopping) {
  log.info('enclave ready; starting proxy');
  run(proxy);
}
