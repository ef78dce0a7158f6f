import { badRequest } from '../../common/errors.js';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import { sseHeaders } from '../../common/sse.js';
import { FrameSealer, frameEvent, sealedStreamKey } from '../../protocol/sealed-stream.js';
import type { Caller } from '../auth/caller.js';
import type { RouteCall } from './resolve-call.js';
import { admitSealed, shardMissOutside, type SealedDeps } from './sealed-route.js';
import { SHARD_MISS_HEADER } from '../../protocol/shards.js';
import type { ChunkSink } from './stream.js';
import type { Place } from './work-gate.js';

export interface SealedStreamDeps extends Omit<SealedDeps, 'dispatch'> {
  /**
   * Runs the inner request, as `caller`, as the plain streaming call would (validated,
   * signed, errors as replies), within the outer call's place, writing its answer to `sink`.
   */
  dispatch: (request: ApiRequest, caller: Caller, sink: ChunkSink, signal: AbortSignal, place?: Place) => Promise<void>;
}

/** The unary call cannot carry a sealed stream (the proxy always streams it). */
export const sealedStreamUnary = async (): Promise<ApiReply> => {
  throw badRequest('POST /v1/sealed/stream must be sent on the streaming call', null, 'stream_mismatch');
};

/**
 * POST /v1/sealed/stream: admits the envelope exactly as POST /v1/sealed does (refusals are
 * plain errors, before any frame), then runs the inner request and seals whatever it
 * answers, head, data and end, as frames of one secretstream under the call's key
 * (protocol/sealed-stream.ts). The inner answer is signed as a plain one would be, so
 * its signature (headers, or the stream's last event) travels inside the frames.
 */
export function sealedStreamRoute(deps: SealedStreamDeps) {
  return async (call: RouteCall<'SealedStream'>, sink: ChunkSink, signal: AbortSignal, context?: { place?: Place }): Promise<void> => {
    const { inner, caller, sharedKey, nonce } = admitSealed(deps, call, call.body);
    const sealer = new FrameSealer(sealedStreamKey(sharedKey, nonce));
    // The outer head goes with the inner one (which comes first): a tenant whose shard this
    // enclave does not hold is then refused outside the frames, as on POST /v1/sealed.
    let started = false;
    let miss: string | undefined;
    const start = () => {
      started = true;
      sink.head({ status: 200, body: Buffer.alloc(0), headers: { ...sseHeaders } });
      return sink.data(frameEvent(sealer.header));
    };
    // Frames must be sealed in the order they are sent: each is written (not awaited) at
    // once, and the gRPC sink writes in call order.
    const frames = new FrameBatcher((bytes) => sink.data(frameEvent(sealer.data(bytes))));
    await deps.dispatch(inner, caller, {
      head: (reply) => {
        miss = started ? undefined : reply.headers?.[SHARD_MISS_HEADER];
        if (miss !== undefined) return;
        void start();
        void sink.data(frameEvent(sealer.head(reply.status ?? 200, reply.headers ?? {})));
      },
      data: (bytes) => (miss === undefined ? frames.write(bytes) : Promise.resolve()),
    }, signal, context?.place);
    if (miss !== undefined) throw shardMissOutside(miss, deps.replay, caller);
    if (!started) await start();
    await frames.flush();
    // A caller that went away gets no end: nothing reads it.
    if (!signal.aborted) await sink.data(frameEvent(sealer.end()));
  };
}

/**
 * Gathers the chunks of the inner answer written in one turn of the event loop into one
 * frame: the offline responder writes a whole answer at once, and a frame per SSE chunk
 * costs a padded, sealed, base64 frame each. Chunks that come apart (a model upstream, token
 * by token) still leave on the next turn. The client checks the inner signature over the
 * bytes, not the frames, so how they are cut changes nothing it verifies.
 */
export class FrameBatcher {
  private parts: Uint8Array[] = [];
  private bytes = 0;
  private scheduled = false;
  /** The last frame's write: what a writer waits on (backpressure). */
  private last: Promise<void> = Promise.resolve();

  constructor(private readonly send: (bytes: Uint8Array) => Promise<void>, private readonly maxBytes = 64 * 1024) {}

  write(chunk: Uint8Array): Promise<void> {
    this.parts.push(chunk);
    this.bytes += chunk.length;
    if (this.bytes >= this.maxBytes) return this.flush();
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        void this.flush();
      });
    }
    return this.last;
  }

  /** Sends what is gathered as one frame (in order: frames are sealed as they are sent). */
  flush(): Promise<void> {
    if (this.parts.length === 0) return this.last;
    const bytes = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts);
    this.parts = [];
    this.bytes = 0;
    this.last = this.send(bytes);
    // A failed write reaches the next writer or flush(); the timer's flush has no one to tell.
    this.last.catch(() => {});
    return this.last;
  }
}
