/**
 * The enclave's log lines, redacted (host-log-redaction.ts), for the host's journal: written
 * to the file descriptor LOG_SINK_FD, which whoever starts the enclave process opens. On
 * Nitro that is the entrypoint's pipe to socat, which relays it over vsock to the host's log
 * receiver (host-log/main.ts). Nothing else leaves a production enclave: its console can
 * only be read in debug mode, which zeroes the PCRs.
 *
 * A pipe rather than a socket of Node's own: pino flushes a destination synchronously when
 * the process exits, so the line saying why the enclave refused to start (KMS, the keys
 * file) is in the pipe before the process is gone. Writes are otherwise asynchronous, so a
 * host that stops reading fills a buffer, not the event loop.
 */
import { pino, type DestinationStream } from 'pino';
import { redactForHost } from './host-log-redaction.js';

export interface HostLogSink extends DestinationStream {
  /** From now on requests may arrive: free-text problems stay inside. */
  serving(): void;
}

/** Held while the host does not read; beyond it lines are dropped, never the enclave's memory. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

export function hostLogSink(fd: number): HostLogSink {
  const out = pino.destination({ dest: fd, sync: false, maxLength: MAX_BUFFERED_BYTES });
  // A reader gone for good (EPIPE) ends this channel, not the enclave.
  out.on('error', () => {});
  let booting = true;
  return {
    write(line: string) {
      const safe = redactForHost(line, booting);
      if (safe !== undefined) out.write(`${safe}\n`);
    },
    serving() {
      booting = false;
    },
  };
}
