/**
 * For a process that `npm start` supervises (scripts/start.ts): it is started with an IPC
 * channel to the supervisor, and when that channel closes (the supervisor exited, even by
 * kill -9) it stops the way SIGTERM stops it. So no child outlives its supervisor and holds
 * its port against the next `npm start`. A process started alone has no channel: no effect.
 */
export function stopWithSupervisor(): void {
  if (!process.send) return;
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
}

/** Exit code for a configuration the process cannot run with: the supervisor does not restart it. */
export const CONFIG_ERROR_EXIT = 2;

/** What a supervised process tells its supervisor over the IPC channel. */
export type SupervisorMessage = { ready: true; url?: string } | { configError: string };

export function isSupervisorMessage(value: unknown): value is SupervisorMessage {
  if (typeof value !== 'object' || value === null) return false;
  return ('ready' in value && value.ready === true) || ('configError' in value && typeof value.configError === 'string');
}

/**
 * Tells the supervisor this process listens (the proxy: at which URL, for the line that ends
 * `npm start`'s start-up). The supervisor waits for this message from
 * its own child rather than probing the address, which another instance may be answering on.
 */
export function tellSupervisorReady(url?: string): void {
  process.send?.((url === undefined ? { ready: true } : { ready: true, url }) satisfies SupervisorMessage);
}

/**
 * Stops with CONFIG_ERROR_EXIT and one line naming the setting to change. Under the
 * supervisor the line goes to it instead of stderr, so that it is printed once, as the
 * supervisor's last line, after the other processes have stopped.
 */
export function exitWithConfigError(processName: string, line: string): Promise<never> {
  if (process.send) process.send({ configError: line } satisfies SupervisorMessage, () => process.exit(CONFIG_ERROR_EXIT));
  else {
    process.stderr.write(`${processName}: ${line}\n`);
    process.exit(CONFIG_ERROR_EXIT);
  }
  return new Promise<never>(() => {});
}
