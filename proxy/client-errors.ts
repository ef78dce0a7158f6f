import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { ApiError } from '../common/errors.js';

/**
 * Requests Node's HTTP parser refuses before fastify sees them (a malformed request line
 * or header, headers over 16 KiB, a client too slow to send its request) still get an
 * answer in the API's error shape rather than Node's bare default.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message] =
    err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'headers_too_large', 'request headers are too large (at most 16 KiB)']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'request_timeout', 'the request was not received in time']
        : [400, 'malformed_request', 'malformed HTTP request'];
  const body = JSON.stringify(new ApiError(status, status === 408 ? 'timeout_error' : 'invalid_request_error', message, code).toBody());
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}
