import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../common/logger.js';
import { channelOptions, enclaveProto, type ApiChunk, type ApiRequest, type HealthReply, type MetricsReply } from '../common/proto.js';
import type { EnclaveApi, Handler, StreamHandler } from './api/index.js';

/**
 * The gRPC adapter: decodes calls, hands them to the API and sends its replies back.
 * It holds no logic of its own. A malformed message (e.g. a missing target) is still
 * passed on: proto3 fills defaults, and the API refuses what is not valid.
 */
export function createGrpcServer(api: EnclaveApi, health: () => HealthReply, log: Logger, metrics?: () => Promise<string>): grpc.Server {
  const server = new grpc.Server(channelOptions);
  const unary = (handler: Handler): grpc.handleUnaryCall<ApiRequest, never> =>
    (call, callback) => {
      const { signal, settled } = cancellation(call);
      handler(call.request, { deadline: deadlineMs(call.getDeadline()), signal }).then(
        (reply) => {
          settled();
          callback(null, reply as never);
        },
        (err: unknown) => {
          settled();
          log.error({ err }, 'handler failed');
          callback({ code: grpc.status.INTERNAL, details: 'internal error' });
        },
      );
    };

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
  handlers.Call = unary(api.Call);
  handlers.CallStream = streaming(api.CallStream, log);
  server.addService(enclaveProto().Enclave.service, handlers);
  return server;
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
function cancellation(call: grpc.ServerUnaryCall<ApiRequest, unknown> | grpc.ServerWritableStream<ApiRequest, ApiChunk>): { signal: AbortSignal; settled: () => void } {
  const controller = new AbortController();
  const abort = () => controller.abort();
  call.once('cancelled', abort);
  return { signal: controller.signal, settled: () => call.off('cancelled', abort) };
}

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
