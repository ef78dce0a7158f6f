import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../common/logger.js';
import { PendingTable } from '../common/pending-table.js';
import { channelOptions, enclaveProto, type ApiChunk, type ApiRequest, type ExchangeReply, type ExchangeRequestIn, type HealthReply, type JoinChallengeReply, type JoinReply, type JoinRequestIn, type MetricsReply } from '../common/proto.js';
import type { EnclaveApi, Handler, StreamHandler } from './api/create-api.js';
import type { Signed } from './cluster/freshness.js';
import { joinDigest, KeySharingError, type KeyMember } from './cluster/key-sharing.js';

/**
 * The gRPC adapter: decodes calls, hands them to the API and sends its replies back.
 * It holds no logic of its own. A malformed message (e.g. a missing target) is still
 * passed on: proto3 fills defaults, and the API refuses what is not valid.
 */
export interface GrpcServerOptions {
  /** Most reply bytes an Exchange stream may hold unsent (default MAX_UNSENT_EXCHANGE_BYTES). */
  maxUnsentExchangeBytes?: number;
  /** Hands the service's keys to enclaves that prove they run as this one (enclave/cluster/key-sharing.ts). */
  keyMember?: KeyMember;
  /** OpenShard, PrepareShard, CloseShard and Shards (enclave/cluster/shard-control.ts), SetPeers, Witnesses and Witnessed (witness-rpc.ts); without: UNIMPLEMENTED. */
  shards?: grpc.UntypedServiceImplementation;
  /** The heads this enclave witnessed, signed for a joiner's document digest, sent with the keys (enclave/cluster/freshness.ts). */
  witnessedFor?: (digest: Uint8Array) => Signed;
}

export function createGrpcServer(api: EnclaveApi, health: () => HealthReply, log: Logger, metrics?: () => Promise<string>, options: GrpcServerOptions = {}): grpc.Server {
  const server = new grpc.Server(channelOptions);
  const handlers: grpc.UntypedServiceImplementation = {
    Health: (_call: unknown, callback: grpc.sendUnaryData<HealthReply>) => callback(null, health()),
    // What the exposition may hold is decided in protos/enclave.proto (MetricsReply).
    Metrics: (_call: unknown, callback: grpc.sendUnaryData<MetricsReply>) => {
      (metrics ?? (async () => ''))().then(
        (text) => callback(null, { text }),
        (err: unknown) => {
          log.error({ err }, 'metrics failed');
          callback({ code: grpc.status.INTERNAL, details: 'internal error' });
        },
      );
    },
  };
  handlers.CallStream = streaming(api.CallStream, log);
  const member = options.keyMember;
  handlers.JoinChallenge = (_call: unknown, callback: grpc.sendUnaryData<JoinChallengeReply>) => {
    if (!member) return callback({ code: grpc.status.UNIMPLEMENTED, details: 'this enclave shares no keys' });
    try {
      callback(null, { challenge: Buffer.from(member.challenge()) });
    } catch (err) {
      callback(joinError(err, log));
    }
  };
  handlers.Join = (call: grpc.ServerUnaryCall<JoinRequestIn, JoinReply>, callback: grpc.sendUnaryData<JoinReply>) => {
    if (!member) return callback({ code: grpc.status.UNIMPLEMENTED, details: 'this enclave shares no keys' });
    member.share(new Uint8Array(call.request.challenge), new Uint8Array(call.request.document)).then(
      ({ document, sealedKeys }) => {
        log.info('shared the service keys with an enclave whose attestation verified');
        const witnessed = options.witnessedFor?.(joinDigest(new Uint8Array(call.request.document)));
        callback(null, {
          document: Buffer.from(document), sealed_keys: Buffer.from(sealedKeys),
          ...(witnessed ? { witnessed: Buffer.from(witnessed.statement), witnessed_signature: Buffer.from(witnessed.signature) } : {}),
        });
      },
      (err: unknown) => callback(joinError(err, log)),
    );
  };
  Object.assign(handlers, options.shards);
  handlers.Exchange = exchange(api.Call, log, options.maxUnsentExchangeBytes ?? MAX_UNSENT_EXCHANGE_BYTES);
  server.addService(enclaveProto().Enclave.service, handlers);
  return server;
}

/** A refused join says why (the check that failed: nothing secret); anything else is internal. */
function joinError(err: unknown, log: Logger): Partial<grpc.StatusObject> {
  if (err instanceof KeySharingError) {
    log.warn({ problem: err.message }, 'refused to share the service keys');
    return { code: grpc.status.PERMISSION_DENIED, details: err.message };
  }
  log.error({ err }, 'key sharing failed');
  return { code: grpc.status.INTERNAL, details: 'internal error' };
}

/** The caller's gRPC deadline as epoch ms (Infinity when none was set). */
function deadlineMs(deadline: grpc.Deadline): number {
  return deadline instanceof Date ? deadline.getTime() : deadline;
}

/**
 * An AbortSignal that fires when the caller cancels the call (e.g. its HTTP client went
 * away), until `settled()`: grpc-js also reports a call the client closes after its answer
 * as cancelled, and aborting then would only make an AbortError (stack trace included) for
 * nobody, on every request.
 */
function cancellation(call: grpc.ServerWritableStream<ApiRequest, ApiChunk>): { signal: AbortSignal; settled: () => void } {
  const controller = new AbortController();
  const abort = () => controller.abort();
  call.once('cancelled', abort);
  return { signal: controller.signal, settled: () => call.off('cancelled', abort) };
}

/**
 * Most replies the Exchange stream holds unsent before the enclave ends it: replies wait
 * there only while the caller does not read them, and a caller that keeps sending requests
 * without reading (only a hostile host would) must not fill the enclave's memory.
 */
export const MAX_UNSENT_EXCHANGE_BYTES = 64 * 1024 * 1024;

/**
 * Many API requests on one stream (protos/enclave.proto, Exchange): each is served by the
 * same handler as Call, with its own deadline and cancellation, and answered by its id as
 * soon as it is done, in any order. When the stream ends or is cancelled, work still
 * running for it is abandoned.
 */
function exchange(handler: Handler, log: Logger, maxUnsentBytes: number): grpc.handleBidiStreamingCall<ExchangeRequestIn, ExchangeReply> {
  return (call) => {
    const running = new PendingTable<AbortController>();
    let open = true;
    let ending = false; // the caller sends no more requests: end once those running are answered
    const close = () => {
      open = false;
      for (const [, controller] of running.list()) controller.abort();
      running.clear();
    };
    // Reply bytes handed to gRPC and not yet written out (a message's bytes count until its write completes).
    let unsent = 0;
    const send = (reply: ExchangeReply) => {
      if (!open) return;
      if (unsent > maxUnsentBytes) {
        log.warn({ unsentBytes: unsent }, 'exchange replies are not being read; ending the stream');
        close();
        call.emit('error', { code: grpc.status.RESOURCE_EXHAUSTED, details: 'replies are not being read' });
        return;
      }
      const bytes = (reply.reply?.body?.length ?? 0) + 64;
      unsent += bytes;
      call.write(reply, () => { unsent -= bytes; });
      endIfDone();
    };
    const endIfDone = () => {
      if (open && ending && running.size === 0) {
        open = false;
        call.end();
      }
    };
    call.on('data', (message: ExchangeRequestIn) => {
      const id = message.id;
      if (message.cancel) {
        running.get(id)?.abort();
        running.delete(id);
        endIfDone();
        return;
      }
      if (running.has(id)) {
        send({ id, failed: true });
        return;
      }
      const controller = new AbortController();
      running.set(id, controller);
      const deadline = message.timeout_ms > 0 ? Date.now() + message.timeout_ms : Infinity;
      // Whether it was answered or failed, a request cancelled meanwhile gets nothing: nobody waits for it.
      const current = () => running.get(id) === controller && running.delete(id);
      // proto3 leaves an absent request null: it is served as an empty one, which the API refuses.
      // The signal only when something asks for it: Node makes an AbortSignal on first access,
      // and most requests (a memory search) never look (1.2% of the event loop's samples under load).
      const context = { deadline, get signal() { return controller.signal; } };
      handler(message.request ?? EMPTY_REQUEST, context).then(
        (reply) => {
          if (current()) send({ id, reply });
        },
        (err: unknown) => {
          log.error({ err }, 'handler failed');
          if (current()) send({ id, failed: true });
        },
      );
    });
    call.on('end', () => {
      ending = true;
      endIfDone();
    });
    call.on('cancelled', close);
    call.on('error', close);
  };
}

const EMPTY_REQUEST: ApiRequest = { request_id: '', target: '', body: Buffer.alloc(0), authorization: '', organization: '', method: '', known_state: '' };

/** Server streaming: the handler writes a head then data; writes wait while gRPC's buffer is full. */
function streaming(handler: StreamHandler, log: Logger): grpc.handleServerStreamingCall<ApiRequest, ApiChunk> {
  return (call) => {
    const { signal, settled } = cancellation(call);
    const write = (chunk: ApiChunk): Promise<void> => {
      if (signal.aborted) return Promise.resolve();
      if (call.write(chunk)) return Promise.resolve();
      return new Promise((resolve) => {
        const done = () => {
          call.off('drain', done);
          signal.removeEventListener('abort', done);
          resolve();
        };
        call.on('drain', done);
        signal.addEventListener('abort', done);
      });
    };
    const sink = {
      head: (reply: ApiChunk['head']) => void write({ head: reply }),
      data: (bytes: Uint8Array) => write({ data: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) }),
    };
    handler(call.request, sink, signal, deadlineMs(call.getDeadline())).then(
      () => {
        settled();
        if (!signal.aborted) call.end();
      },
      (err: unknown) => {
        settled();
        log.error({ err }, 'stream handler failed');
        if (!signal.aborted) call.emit('error', { code: grpc.status.INTERNAL, details: 'internal error' });
      },
    );
  };
}
