import { ApiError, internal } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import { sseEvent } from '../../common/sse.js';

/** Where a streamed RPC writes: the head (status and headers) once, then bytes. */
export interface ChunkSink {
  head(reply: ApiReply): void;
  /** Resolves when the bytes may be followed by more (backpressure), or at once if the caller is gone. */
  data(bytes: Uint8Array): Promise<void>;
}

export type StreamHandler = (request: ApiRequest, sink: ChunkSink, signal: AbortSignal) => Promise<void>;

/** A complete JSON reply sent over a stream: the head, then the body as one piece. */
export async function sendReply(sink: ChunkSink, reply: ApiReply): Promise<void> {
  sink.head({ status: reply.status, body: Buffer.alloc(0), headers: { 'content-type': 'application/json', ...reply.headers } });
  await sink.data(reply.body as Uint8Array);
}

/**
 * Error handling for a streamed RPC, the counterpart of `wrap` for unary ones. A refusal
 * before the head becomes a plain error reply (status and OpenAI error body); a failure
 * after it becomes a last SSE event `data: {"error": …}` (which OpenAI clients raise), and
 * the stream ends without [DONE]. Nothing is sent once the caller has gone away.
 */
export function wrapStream(rpc: string, handler: StreamHandler, baseLog: Logger): StreamHandler {
  return async (request, sink, signal) => {
    const started = performance.now();
    const log = baseLog.child({ reqId: request.request_id, rpc });
    let status: number | undefined;
    const tracked: ChunkSink = {
      head(reply) {
        status = reply.status;
        sink.head(reply);
      },
      data: (bytes) => sink.data(bytes),
    };
    try {
      await handler(request, tracked, signal);
    } catch (err) {
      if (!signal.aborted) {
        const error = err instanceof ApiError ? err : internal();
        if (!(err instanceof ApiError)) log.error({ err }, 'unexpected error');
        if (status === undefined) {
          status = error.status;
          await sendReply(sink, { status: error.status, body: Buffer.from(JSON.stringify(error.toBody())), headers: error.headers });
        } else {
          log.warn({ code: error.code, errorStatus: error.status }, 'stream failed after it started');
          await sink.data(sseEvent(error.toBody()));
        }
      }
    }
    log.info({ status, cancelled: signal.aborted || undefined, ms: Math.round(performance.now() - started) }, 'handled');
  };
}
