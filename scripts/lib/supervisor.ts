import { spawn, type ChildProcess } from 'node:child_process';
import type { Logger } from '../../common/logger.js';
import { CONFIG_ERROR_EXIT, isSupervisorMessage } from '../../common/supervised.js';
import { nodeArgs } from './node-args.js';

/** One process a supervisor runs and restarts. */
export interface Supervised {
  name: string;
  /** A node script (dist/…/main.js) run with the service's node arguments, or another program. */
  script?: string;
  command?: { file: string; args: string[] };
  /** Its environment at each (re)start; by default the supervisor's own. */
  env?: (restart: boolean) => NodeJS.ProcessEnv;
  child?: ChildProcess;
  restarts: number;
  startedAt: number;
  /** Has been started before (the next start is a restart). */
  started?: boolean;
  /** Called at the next "ready" message from this process (a restarted one included). */
  waiting: Array<(url?: string) => void>;
  /** The one line of its last configuration error, sent before it exits with CONFIG_ERROR_EXIT. */
  configError?: string;
}

export const supervised = (name: string, how: Pick<Supervised, 'script' | 'command' | 'env'>): Supervised => ({ name, ...how, restarts: 0, startedAt: 0, waiting: [] });

/** A process that dies this many times in a row within START_WINDOW_MS of starting is not restarted again. */
const MAX_FAILED_STARTS = 5;
const START_WINDOW_MS = 30_000;

/**
 * Runs processes, restarts any that dies (backing off, giving up after a few quick deaths),
 * and stops them all in a given order. A node child tells it that it listens, or that it
 * cannot run with this configuration, over its IPC channel (common/supervised.ts), never by
 * the supervisor dialling its address: another instance may be answering there.
 */
export class Supervisor {
  private stopping = false;

  constructor(private readonly log: Logger, private readonly stopOrder: () => Supervised[][]) {}

  get isStopping(): boolean {
    return this.stopping;
  }

  run(s: Supervised): void {
    if (this.stopping) return;
    s.startedAt = Date.now();
    const env = s.env ? s.env(s.started === true) : process.env;
    s.started = true;
    // The IPC channel lets a node child notice when the supervisor is gone (common/supervised.ts).
    const child = s.script
      ? spawn(process.execPath, nodeArgs(s.script, env), { stdio: ['inherit', 'inherit', 'inherit', 'ipc'], env })
      : spawn(s.command!.file, s.command!.args, { stdio: ['ignore', 'inherit', 'inherit'], env });
    s.child = child;
    s.configError = undefined;
    child.on('message', (message) => {
      if (!isSupervisorMessage(message)) return;
      if ('configError' in message) s.configError = message.configError;
      else for (const resolve of s.waiting.splice(0)) resolve(message.url);
    });
    child.on('error', (err) => this.log.error({ process: s.name, err: err.message }, 'cannot start process'));
    child.on('exit', (code, signal) => {
      s.child = undefined;
      if (this.stopping) return;
      if (code === CONFIG_ERROR_EXIT && s.script) {
        const message = s.configError ? `the ${s.name} cannot start: ${s.configError}` : `the ${s.name} cannot run with this configuration (its message is above); fix it and start again`;
        this.giveUp(message, CONFIG_ERROR_EXIT);
        return;
      }
      // Back off when a process keeps dying at start, and stop trying after a few times.
      if (Date.now() - s.startedAt > START_WINDOW_MS) s.restarts = 0;
      if (s.restarts >= MAX_FAILED_STARTS) {
        this.giveUp(`the ${s.name} failed ${MAX_FAILED_STARTS + 1} times in a row within ${START_WINDOW_MS / 1000} s of starting (last: ${signal ?? `exit ${code}`}); not restarting it`, 1);
        return;
      }
      const delay = Math.min(10_000, 500 * 2 ** s.restarts++);
      this.log.warn({ process: s.name, code, signal, restartInMs: delay }, 'process exited; restarting');
      setTimeout(() => { if (!this.stopping) this.run(s); }, delay);
    });
  }

  /** Resolves once `s` says it listens (a restarted process counts). */
  listening(s: Supervised): Promise<string | undefined> {
    return new Promise((resolve) => s.waiting.push(resolve));
  }

  /** Stops everything and exits non-zero, the message its last line: for what a restart cannot fix. */
  giveUp(message: string, exitCode: number): void {
    this.log.error({ reason: message }, 'stopping');
    this.stop('SIGTERM', exitCode, `agent-service: ${message}`);
  }

  /** Stops all, group by group in the stop order; `lastLine`, if any, is printed once they have, so nothing comes after it. */
  stop(signal: NodeJS.Signals, exitCode = 0, lastLine?: string): void {
    if (this.stopping) return;
    this.stopping = true;
    this.log.info({ signal }, 'stopping');
    const groups = this.stopOrder();
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
    setTimeout(() => { for (const c of running(groups.flat())) c.kill('SIGKILL'); exit(exitCode || 1); }, 10_000).unref();
    void groups.reduce((done, group) => done.then(() => ended(running(group)).then(() => undefined)), Promise.resolve()).then(() => exit(exitCode));
  }

  /** Ctrl-C, SIGTERM, and the parent (npm) going away stop everything. */
  stopOnSignals(): void {
    process.on('SIGINT', () => this.stop('SIGINT'));
    process.on('SIGTERM', () => this.stop('SIGTERM'));
    // `npm start` runs this under npm, which does not always pass SIGTERM on: when the process
    // that started us is gone (we are re-parented), stop as if told to.
    const parentPid = process.ppid;
    setInterval(() => { if (process.ppid !== parentPid) this.stop('SIGTERM'); }, 1000).unref();
  }
}
