import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { configFromCli, logFormat, logLevel } from '../common/config.js';
import { createLogger } from '../common/logger.js';
import { CONFIG_ERROR_EXIT, isSupervisorMessage } from '../common/supervised.js';
import { nodeArgs } from './lib/node-args.js';

/**
 * `npm start`: runs the host store, then the enclave once the store listens, then the proxy
 * once the enclave listens; restarts any of them if it dies, and stops all on Ctrl-C /
 * SIGTERM. The children get this process's environment, so the same variables configure
 * a supervised or a lone run. It learns that a child listens, or cannot run with this
 * configuration, from that child's own IPC messages (common/supervised.ts), never by
 * dialling its address: another instance may be answering there.
 */
const config = configFromCli(
  'agent-service: starts the host store, the enclave and the proxy together (see also start:host-store, start:enclave, start:proxy --help).',
  {
    logLevel: logLevel(),
    logFormat: logFormat(),
  },
);
// Synchronous, so that the one line it may stop with (stop()) is the last one out.
const log = createLogger('supervisor', config.logLevel, config.logFormat, { sync: true });
const distRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

interface Supervised {
  name: 'host-store' | 'enclave' | 'proxy';
  script: string;
  child?: ChildProcess;
  restarts: number;
  startedAt: number;
  /** Called at the next "ready" message from this process (a restarted one included). */
  waiting: Array<(url?: string) => void>;
  /** The one line of its last configuration error, sent before it exits with CONFIG_ERROR_EXIT. */
  configError?: string;
}

const hostStore: Supervised = { name: 'host-store', script: resolve(distRoot, 'host-store/main.js'), restarts: 0, startedAt: 0, waiting: [] };
const enclave: Supervised = { name: 'enclave', script: resolve(distRoot, 'enclave/main.js'), restarts: 0, startedAt: 0, waiting: [] };
const proxy: Supervised = { name: 'proxy', script: resolve(distRoot, 'proxy/main.js'), restarts: 0, startedAt: 0, waiting: [] };
let stopping = false;

/** A process that dies this many times in a row within START_WINDOW_MS of starting is not restarted again. */
const MAX_FAILED_STARTS = 5;
const START_WINDOW_MS = 30_000;

/** Stops everything and exits non-zero, the message its last line: for what a restart cannot fix. */
function giveUp(message: string, exitCode: number): void {
  log.error({ reason: message }, 'stopping');
  stop('SIGTERM', exitCode, `agent-service: ${message}`);
}

function run(s: Supervised): void {
  if (stopping) return;
  s.startedAt = Date.now();
  // The IPC channel lets the child notice when the supervisor is gone (common/supervised.ts).
  const child = spawn(process.execPath, nodeArgs(s.script, process.env), { stdio: ['inherit', 'inherit', 'inherit', 'ipc'], env: process.env });
  s.child = child;
  s.configError = undefined;
  child.on('message', (message) => {
    if (!isSupervisorMessage(message)) return;
    if ('configError' in message) s.configError = message.configError;
    else for (const resolve of s.waiting.splice(0)) resolve(message.url);
  });
  child.on('exit', (code, signal) => {
    s.child = undefined;
    if (stopping) return;
    if (code === CONFIG_ERROR_EXIT) {
      const message = s.configError ? `the ${s.name} cannot start: ${s.configError}` : `the ${s.name} cannot run with this configuration (its message is above); fix it and start again`;
      giveUp(message, CONFIG_ERROR_EXIT);
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

/** Resolves once `s` listens (a restarted process counts): the next start waits for it. */
function listening(s: Supervised): Promise<string | undefined> {
  return new Promise((resolve) => s.waiting.push(resolve));
}

/** Stops all three; `lastLine`, if any, is printed once they have, so nothing comes after it. */
function stop(signal: NodeJS.Signals, exitCode = 0, lastLine?: string): void {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'stopping');
  const running = (list: Supervised[]) => list.map((s) => s.child).filter((c): c is ChildProcess => c !== undefined);
  const ended = (children: ChildProcess[]) => Promise.all(children.map((c) => new Promise<void>((res) => {
    if (c.exitCode !== null || c.signalCode !== null) res();
    else c.once('exit', () => res());
    c.kill('SIGTERM');
  })));
  const exit = (code: number) => {
    if (lastLine) process.stderr.write(`${lastLine}\n`);
    process.exit(code);
  };
  setTimeout(() => { for (const c of running([proxy, enclave, hostStore])) c.kill('SIGKILL'); exit(exitCode || 1); }, 10_000).unref();
  // The host store last: the enclave may still be handing it its last writes as it stops.
  void ended(running([proxy, enclave])).then(() => ended(running([hostStore]))).then(() => exit(exitCode));
}
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
// `npm start` runs this under npm, which does not always pass SIGTERM on: when the process
// that started us is gone (we are re-parented), stop as if told to.
const parentPid = process.ppid;
setInterval(() => { if (process.ppid !== parentPid) stop('SIGTERM'); }, 1000).unref();
// SIGHUP reloads the enclave's API keys; pass it on rather than die of it.
process.on('SIGHUP', () => { enclave.child?.kill('SIGHUP'); });

// A process that keeps failing, or cannot run with this configuration, stops everything
// (above); until then each start waits for the one before to listen, however long a model
// change's re-embedding keeps the enclave busy.
run(hostStore);
await listening(hostStore);
run(enclave);
await listening(enclave);
log.info('enclave ready; starting proxy');
run(proxy);
// The last line of a start: where to go (the console and the API).
log.info(`ready: ${await listening(proxy) ?? 'the proxy listens'}`);
