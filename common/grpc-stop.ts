import type { Server } from '@grpc/grpc-js';
import type { Logger } from './logger.js';

/**
 * How a gRPC server process (the enclave, the host store) stops on SIGINT or SIGTERM: once,
 * logging the signal; calls in flight finish, or are cut after `graceMs` so a hung client
 * cannot hold the process (nor its connection, once cut); then `close()` releases what the
 * process holds, and it exits 0.
 */
export function stopOnSignals(server: Server, log: Logger, graceMs: number, close: () => Promise<unknown> = async () => {}): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    let closing = false;
    const finish = () => {
      if (closing) return;
      closing = true;
      void close().finally(() => process.exit(0));
    };
    server.tryShutdown(finish);
    // forceShutdown cancels every call at once, but tryShutdown's callback still waits for
    // the peers to close their connections (a proxy's held Exchange stream: ~25 s more).
    setTimeout(() => {
      server.forceShutdown();
      finish();
    }, graceMs).unref();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}
