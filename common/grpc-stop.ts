import type { Server } from '@grpc/grpc-js';
import type { Logger } from './logger.js';

/**
 * How a gRPC server process (the enclave, the host store) stops on SIGINT or SIGTERM: once,
 * logging the signal; calls in flight finish, or are cut after `graceMs` so a hung client
 * cannot hold the process; then `close()` releases what the process holds, and it exits 0.
 */
export function stopOnSignals(server: Server, log: Logger, graceMs: number, close: () => Promise<unknown> = async () => {}): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    server.tryShutdown(() => void close().finally(() => process.exit(0)));
    setTimeout(() => server.forceShutdown(), graceMs).unref();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}
