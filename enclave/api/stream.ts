import { ApiError, internal, timedOut } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import { routeLabel } from '../../common/routes.js';
import { sseDone, sseEvent } from '../../common/sse.js';
import { requestIdForLog } from './request.js';
import { TENANT_HEADER, UPSTREAM_HEADER } from '../../protocol/response-signature.js';
import { signReply, streamSigner, type ResponseSigner, type StreamSigner } from './signing.js';
import type { Caller } from '../auth/caller.js';
import type { Place } from './work-gate.js';

/** Where a streamed RPC writes: the head (status and headers) once, then bytes. */
export interface ChunkSink {
  head(reply: ApiReply): void;
  /** Resolves when the bytes may be followed by more (backpressure), or at once if the caller is gone. */
  data(bytes: Uint8Array): Promise<void>;
  /**
   * The stream's last event, which then carries the stream's signature inside it rather than
   * in an event of its own (what a Responses stream ends with: SDK helpers refuse unknown event
   * types). Where absent, or for a stream that is not signed, it is sent as a plain event.
   */
  final?(event: object): Promise<void>;
}

/** Sends `event` as the stream's final event (ChunkSink.final), or as a plain one. */
export const sendFinal = (sink: ChunkSink, event: object): Promise<void> => (sink.final ? sink.final(event) : sink.data(sseEvent(event)));

export type StreamHandler = (request: ApiRequest, sink: ChunkSink, signal: AbortSignal, deadline?: number) => Promise<void>;
/** What wrapStream wraps: told who the caller is, and the place the stream holds in the work gate, when it holds one. */
export type PlacedStreamHandler = (request: ApiRequest, caller: Caller, sink: ChunkSink, signal: AbortSignal, place?: Place) => Promise<void>;

/** Ten minutes: longer than any chat the proxy allows (CHAT_TIMEOUT_MS, 5 minutes by default). */
export const DEFAULT_MAX_STREAM_MS = 600_000;

export interface StreamOptions {
  log: Logger;
  /** Signs what the stream sends, like every unary reply. */
  signer: ResponseSigner;
  /** Longest a stream may run, whatever deadline its caller gave (or none): then it is ended with an error event. */
  maxStreamMs?: number;
  /** Who sends the request: identified once, before the gate (a sealed stream's inner request: the caller its envelope named). */
  identify: (request: ApiRequest) => Caller;
  /** Admission and time limit (the enclave's WorkGate), in the caller's share. */
  gate: (work: (place?: Place) => Promise<void>, deadline: number | undefined, caller: Caller) => Promise<void>;
  /**
   * The request inside a sealed stream: neither logged nor observed, since its route and
   * status would tell the host (which reads the log and /metrics) what the sealed call did.
   */
  inner?: boolean;
  /** Told of each stream once it ends (metrics): its route's name, status (0: none sent) and duration. */
  observe?: (route: string, status: number, seconds: number) => void;
  /**
   * An answer the box already authenticates (a sealed stream's 200: every frame opens only
   * under the call's key, and the inner answer is signed inside): not signed outside, where a
   * signature would only cost time. Refusals are signed like any answer.
   */
  boxed?: (route: string, status: number) => boolean;
}

/** A complete JSON reply sent over a stream: the head, then the body as one piece. */
export async function sendReply(sink: ChunkSink, reply: ApiReply): Promise<void> {
  sink.head({ status: reply.status, body: Buffer.alloc(0), headers: { 'content-type': 'application/json', ...reply.headers } });
  await sink.data(reply.body as Uint8Array);
}

/**
 * Error handling and signing for a streamed RPC, the counterpart of `wrap` for unary ones.
 * A refusal before the head becomes a plain error reply (status and OpenAI error body); a
 * failure after it becomes a last SSE event `data: {"error": …}` (which OpenAI clients
 * raise), and the stream ends without [DONE]. Nothing is sent once the caller has gone away.
 *
 * Signing: a JSON answer (one piece after its head) gets x-tee-signature headers like a
 * unary reply; an event stream ends with a signature event over every byte streamed
 * before it (protocol/response-signature.ts). A chat stream's `data: [DONE]` is held
 * back and sent after the signature, so that it stays the last thing clients read.
 */
export function wrapStream(handler: PlacedStreamHandler, options: StreamOptions): StreamHandler {
  const done = sseDone();
  return async (request, sink, signal, deadline) => {
    const started = performance.now();
    const method = request.method;
    const route = routeLabel(method, request.target);
    const log = options.inner
      ? options.log.child({ route: 'Sealed (inner request)' })
      : options.log.child({ reqId: requestIdForLog(request.request_id), route, stream: true });
    let heldDone = false;
    let signedInFinal = false;
    let status: number | undefined;
    let pendingHead: ApiReply | undefined;
    let signer: StreamSigner | undefined;
    const tracked: ChunkSink = {
      head(reply) {
        status = reply.status;
        if (options.boxed?.(route, reply.status ?? 200)) {
          sink.head(reply);
        } else if (String(reply.headers?.['content-type'] ?? '').startsWith('text/event-stream')) {
          signer = streamSigner(options.signer, method, request, reply.status ?? 200, reply.headers?.[TENANT_HEADER] ?? '', reply.headers?.[UPSTREAM_HEADER] ?? '');
          sink.head(reply);
        } else {
          pendingHead = reply; // signed once its body, the next piece, is known
        }
      },
      data(bytes) {
        if (pendingHead) {
          const signed = signReply(options.signer, method, request, { ...pendingHead, body: Buffer.from(bytes) });
          pendingHead = undefined;
          sink.head({ ...signed, body: Buffer.alloc(0) });
        } else if (signer && Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).equals(done)) {
          heldDone = true;
          return Promise.resolve();
        } else {
          signer?.update(bytes);
        }
        return sink.data(bytes);
      },
      final(event) {
        if (!signer || signedInFinal) return tracked.data(sseEvent(event));
        signedInFinal = true;
        return sink.data(signer.finishWith(JSON.stringify(event)));
      },
    };
    // A stream holds its place in the gate while it runs: bound its life, so that no caller
    // (or host calling without a deadline) keeps one open for ever.
    const lifetime = AbortSignal.timeout(options.maxStreamMs ?? DEFAULT_MAX_STREAM_MS);
    const ended = () => timedOut(`the stream ran longer than ${options.maxStreamMs ?? DEFAULT_MAX_STREAM_MS} ms and was ended`, 'stream_time_limit');
    try {
      const caller = options.identify(request);
      await options.gate((place) => handler(request, caller, tracked, AbortSignal.any([signal, lifetime]), place), deadline, caller);
      if (lifetime.aborted && !signal.aborted && status !== undefined) await tracked.data(sseEvent(ended().toBody()));
    } catch (err) {
      if (!signal.aborted) {
        const error = lifetime.aborted ? ended() : err instanceof ApiError ? err : internal();
        if (!(err instanceof ApiError)) log.error({ err }, 'unexpected error');
        if (status === undefined) {
          await sendReply(tracked, { status: error.status, body: Buffer.from(JSON.stringify(error.toBody())), headers: error.headers });
        } else {
          if (!options.inner) log.warn({ code: error.code, errorStatus: error.status }, 'stream failed after it started');
          await tracked.data(sseEvent(error.toBody()));
        }
      }
    }
    if (signer && !signal.aborted) {
      if (!signedInFinal) await sink.data(signer.finish());
      if (heldDone) await sink.data(done);
    }
    if (options.inner) return;
    log.info({ status, cancelled: signal.aborted || undefined, ms: Math.round(performance.now() - started) }, 'handled');
    options.observe?.(route, status ?? 0, (performance.now() - started) / 1000);
  };
}
