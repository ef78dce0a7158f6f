import { PassThrough } from 'node:stream';
import type * as grpc from '@grpc/grpc-js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../common/errors.js';
import type { ApiChunkIn, ApiReplyIn } from '../common/proto.js';
import { sseEvent } from '../common/sse.js';
import { transportError, type ChunkStream, type EnclaveLink, type ForwardedRequest } from './enclave-client.js';

export interface StreamingRouteDeps {
  enclave: EnclaveLink;
  /** What the proxy relays of a request (the client's exact bytes and headers). */
  forward(req: FastifyRequest): ForwardedRequest;
  /** Writes the enclave's complete reply to the client. */
  send(req: FastifyRequest, reply: FastifyReply, answer: ApiReplyIn): void;
  timeoutMs: number;
  /** The answer is always a stream (a sealed stream, whose envelope the host cannot read). */
  always?: boolean;
}

/**
 * A route whose answer may stream (chat completions, responses). A plain request is
 * relayed like any other; `stream: true` goes over the streaming RPC and each piece the
 * enclave sends is written to the client as it arrives. When the client goes away the
 * gRPC call is cancelled, and the enclave aborts its call to the model.
 */
export function streamingRoute(deps: StreamingRouteDeps) {
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const client = new AbortController();
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) client.abort();
    });
    const options = { timeoutMs: deps.timeoutMs, signal: client.signal };
    if (!deps.always && (req.body as { stream?: unknown }).stream !== true) {
      deps.send(req, reply, await deps.enclave.call(deps.forward(req), options));
      return reply;
    }
    await relayStream(deps.enclave.stream(deps.forward(req), options), req, reply, client.signal);
    return reply;
  };
}

/**
 * Relays a streamed answer: waits for the head (so a refusal is still a plain error reply
 * with its status), then pipes data through with backpressure. If the enclave fails after
 * the head, the client gets a last SSE error event in the OpenAI shape.
 */
function relayStream(call: ChunkStream, req: FastifyRequest, reply: FastifyReply, clientGone: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    let out: PassThrough | undefined;
    let finished = false;
    const noHead = () => new ApiError('enclave_error', 'the enclave sent a malformed stream');

    call.on('data', (chunk: ApiChunkIn) => {
      if (!out) {
        if (chunk.kind !== 'head' || !chunk.head) {
          finished = true;
          call.cancel();
          reject(noHead());
          return;
        }
        out = new PassThrough();
        out.on('close', () => {
          if (!finished) call.cancel();
        });
        void reply.code(chunk.head.status).headers(chunk.head.headers).header('x-request-id', req.id);
        if (!reply.hasHeader('content-type')) void reply.type('application/json');
        void reply.send(out);
        resolve();
        return;
      }
      if (chunk.kind === 'data' && chunk.data && !out.write(chunk.data)) {
        call.pause();
        out.once('drain', () => call.resume());
      }
    });
    call.on('end', () => {
      finished = true;
      if (out) out.end();
      else reject(noHead());
    });
    call.on('error', (err: Error) => {
      finished = true;
      // A routed stream fails with the router's own answer (no owner for the shard).
      const error = err instanceof ApiError ? err : transportError(err as grpc.ServiceError);
      if (!out) reject(error);
      else if (clientGone.aborted) out.destroy();
      else out.end(sseEvent(error.toBody()));
    });
  });
}
