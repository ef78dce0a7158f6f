import type { ChildProcess } from 'node:child_process';

/**
 * Every process the test helpers started that has not exited yet. A test that times out is
 * abandoned by vitest, not unwound: its `finally` or `stop()` may never run, and the
 * processes it started would go on holding ports, memory and CPU through the files after
 * it (under load, enough to time those out too). test/helpers/cleanup.ts ends them after
 * each file.
 */
const running = new Map<ChildProcess, string>();

/** Remembers `child` (described by `what`, for the warning) until it exits. */
export function track<T extends ChildProcess>(child: T, what: string): T {
  running.set(child, what);
  child.once('exit', () => running.delete(child));
  return child;
}

/**
 * Ends every tracked process still running: SIGTERM (a supervisor stops its children), then
 * SIGKILL after `graceMs`. Returns what was still running.
 */
export async function endLeftovers(graceMs = 5_000): Promise<string[]> {
  const left = [...running];
  await Promise.all(left.map(([child]) => new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => { clearTimeout(kill); resolve(); });
    child.kill('SIGTERM');
  })));
  return left.map(([child, what]) => `${what} (pid ${child.pid})`);
}
