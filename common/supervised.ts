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
