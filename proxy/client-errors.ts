import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../common/errors.js';
import { bodyDropped, dropRestOfBody, LINGER_MS } from '../common/linger.js';

/**
 * Requests Node's HTTP layer answers before fastify sees them (a malformed request line
 * or header, headers over 16 KiB, a client too slow to send its request, an Expect it
 * cannot meet, a CONNECT) still get an answer in the API's error shape, not Node's bare
 * default or a silently closed socket.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Duplex): void {
  // Node's parser reports each later chunk of a request it could not parse as another error: the
  // first is answered, and the connection lingers (writeRawError); closing it at once on the next
  // reset the connection, and could destroy the answer before the client read it.
  if (err.code === 'ECONNRESET' || socket.destroyed || answered.has(socket)) return;
  const error = err.code === 'HPE_HEADER_OVERFLOW' ? new ApiError('headers_too_large', 'request headers are too large (at most 16 KiB)')
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? new ApiError('request_timeout', 'the request was not received in time')
      : new ApiError('malformed_request', 'malformed HTTP request');
  writeRawError(socket, error);
}

/** Answers the requests Node routes around the request handler. */
export function answerProtocolEdges(server: Server): void {
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    const body = JSON.stringify(new ApiError('expectation_failed', 'only "Expect: 100-continue" is supported').toBody());
    res.writeHead(417, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'close' }).end(body);
  });
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    writeRawError(socket, new ApiError('unknown_route', 'no route for CONNECT'));
  });
}

/** Sockets answered by writeRawError, which closes them after lingering. */
const answered = new WeakSet<Duplex>();

function writeRawError(socket: Duplex, error: ApiError): void {
  const body = JSON.stringify(error.toBody());
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  answered.add(socket);
  socket.end(`HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  // A lingering close: closing with the client's bytes still unread makes the kernel send
  // a reset, which can destroy the answer before the client reads it (seen under load).
  // So read and drop what is still coming, for a moment, then close.
  socket.on('error', () => {});
  socket.resume();
  setTimeout(() => socket.destroy(), LINGER_MS).unref();
}

/**
 * Gives an error answer (`answer`) once the rest of the request's body, if any is still coming,
 * has arrived and been dropped, or after LINGER_MS: a 415, or a guard's 429 or 503, is decided
 * before the body is read. A connection closed after the answer (the client's `Connection: close`,
 * or fastify's after a 415) with the client's bytes still unread is reset by the kernel, and a
 * reset can destroy the answer before the client reads it. A 413 is answered at once instead
 * (lingerOnRefusedBody). Returns nothing when it answered at once, else the reply, for fastify's
 * error and not-found handlers to return (fastify waits for it).
 */
export function answerAfterBody(req: FastifyRequest, reply: FastifyReply, status: number, answer: () => void): Promise<FastifyReply> | undefined {
  const raw = req.raw;
  if (raw.complete || raw.readableEnded || raw.destroyed || status === 413) {
    answer();
    return undefined;
  }
  return bodyDropped(raw).then(() => {
    answer();
    return reply;
  });
}

/**
 * A body refused as too large is read and dropped after the 413 (a lingering close) instead
 * of fastify closing the connection on a client still sending it. Node reads the rest once
 * the answer is sent, if the connection is kept; dropRestOfBody bounds how long.
 */
export function lingerOnRefusedBody(err: unknown, req: FastifyRequest, reply: FastifyReply): void {
  if ((err as { code?: string }).code !== 'FST_ERR_CTP_BODY_TOO_LARGE' || req.raw.httpVersionMajor !== 1) return;
  reply.removeHeader('connection');
  dropRestOfBody(req.raw, reply.raw);
}
