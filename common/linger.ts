import type { IncomingMessage, ServerResponse } from 'node:http';

/** How long a refused client's remaining bytes are read and dropped before its connection is closed. */
export const LINGER_MS = 2000;

/**
 * A lingering close for a request answered before its body was read (413). Closing while
 * the client is still sending makes the kernel reset the connection, and a reset can
 * destroy the answer before the client reads it (1 in 5 for a 1.3 MiB body, most of the
 * time at 4 MB). So the rest of the body is read and dropped, which keeps the connection
 * for the client's next request; a body still arriving LINGER_MS after the answer (a large
 * or slow one) has its connection closed then, when the client has long had its answer.
 */
export function dropRestOfBody(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  res.once('finish', () => {
    if (req.complete) return;
    const timer = setTimeout(() => req.socket.destroy(), LINGER_MS).unref();
    req.once('end', () => clearTimeout(timer));
  });
}

/**
 * Reads and drops the rest of a request's body; resolves once it has all arrived (or the
 * request ended otherwise), or after LINGER_MS, whichever is first.
 */
export function bodyDropped(req: IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(finish, LINGER_MS).unref();
    function finish(): void {
      clearTimeout(timer);
      req.off('end', finish).off('close', finish).off('error', finish);
      resolve();
    }
    req.once('end', finish).once('close', finish).once('error', finish);
    req.resume();
  });
}
