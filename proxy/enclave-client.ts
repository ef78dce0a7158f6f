import * as grpc from '@grpc/grpc-js';
import { ApiError, timedOut, unavailable } from '../common/errors.js';
import { channelOptions, enclaveProto, type ApiChunkIn, type ApiReplyIn, type EnclaveClient, type HealthReplyIn } from '../common/proto.js';
import type { Destination } from './destination.js';
import { EnclaveExchange } from './enclave-exchange.js';

export interface ForwardedRequest {
  requestId: string;
  method: string;
  target: string;
  body?: Buffer;
  authorization?: string;
  organization?: string;
  /** The x-tee-known-state header, relayed for the enclave to sign an answer about. */
  knownState?: string;
  /** Which enclave of a cluster it goes to (never sent; unused with one enclave). */
  destination?: Destination;
}

/** A streamed answer's chunks, as the streaming route reads them (one gRPC stream, or a routed one). */
export interface ChunkStream {
  on(event: 'data', listener: (chunk: ApiChunkIn) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  pause(): unknown;
  resume(): unknown;
  cancel(): void;
}

/** What the proxy's routes use: one enclave (EnclaveConnection) or a cluster (ClusterRouter). */
export interface EnclaveLink {
  call(request: ForwardedRequest, options?: CallOptions): Promise<ApiReplyIn>;
  stream(request: ForwardedRequest, options?: CallOptions): ChunkStream;
  health(timeoutMs?: number): Promise<HealthReplyIn>;
  metrics(timeoutMs?: number): Promise<string>;
  close(): void;
}

export interface CallOptions {
  /** Overrides the connection's default deadline. */
  timeoutMs?: number;
  /** Cancels the call (the enclave sees the cancellation) when aborted. */
  signal?: AbortSignal;
}

/**
 * The proxy's view of the enclave: one call per RPC, with a deadline, and transport
 * failures turned into API errors (503 when the enclave cannot be reached, 504 when it
 * does not answer in time). grpc-js reconnects by itself, so once the enclave is back
 * the next call succeeds without restarting the proxy.
 */
export class EnclaveConnection implements EnclaveLink {
  readonly client: EnclaveClient;
  private readonly exchange: EnclaveExchange;

  constructor(address: string, private readonly timeoutMs: number) {
    const Enclave = enclaveProto().Enclave;
    this.client = new Enclave(address, grpc.credentials.createInsecure(), channelOptions);
    this.exchange = new EnclaveExchange(this.client, transportError);
  }

  /** One API request; the enclave routes it by method and path. It travels on the exchange stream. */
  call(request: ForwardedRequest, options: CallOptions = {}): Promise<ApiReplyIn> {
    return this.exchange.call(toMessage(request), options.timeoutMs ?? this.timeoutMs, options.signal);
  }

  /** A request whose answer streams: a head chunk, then data chunks. Errors arrive as grpc errors on the stream. */
  stream(request: ForwardedRequest, options: CallOptions = {}): grpc.ClientReadableStream<ApiChunkIn> {
    const call = this.client.CallStream(toMessage(request), { deadline: Date.now() + (options.timeoutMs ?? this.timeoutMs) });
    cancelOnAbort(call, options.signal);
    return call;
  }

  health(timeoutMs = 2000): Promise<HealthReplyIn> {
    return new Promise((resolve, reject) => {
      this.client.Health({}, { deadline: Date.now() + timeoutMs }, (err, reply) => (err ? reject(transportError(err)) : resolve(reply!)));
    });
  }

  /** The enclave's metrics exposition (Prometheus text). */
  metrics(timeoutMs = 2000): Promise<string> {
    return new Promise((resolve, reject) => {
      this.client.Metrics({}, { deadline: Date.now() + timeoutMs }, (err, reply) => (err ? reject(transportError(err)) : resolve(reply!.text)));
    });
  }

  close(): void {
    this.exchange.close();
    this.client.close();
  }
}

function toMessage(request: ForwardedRequest) {
  return {
    request_id: request.requestId,
    method: request.method,
    target: request.target,
    body: request.body ?? Buffer.alloc(0),
    authorization: request.authorization ?? '',
    organization: request.organization ?? '',
    known_state: request.knownState ?? '',
  };
}

function cancelOnAbort(call: { cancel(): void }, signal: AbortSignal | undefined): void {
  if (!signal) return;
  if (signal.aborted) call.cancel();
  else signal.addEventListener('abort', () => call.cancel(), { once: true });
}

export function transportError(err: grpc.ServiceError): ApiError {
  switch (err.code) {
    case grpc.status.DEADLINE_EXCEEDED:
      return timedOut('the enclave did not answer in time', 'enclave_timeout');
    case grpc.status.UNAVAILABLE:
      return retryable(unavailable('the enclave is unavailable; try again shortly'));
    case grpc.status.RESOURCE_EXHAUSTED:
      return retryable(unavailable('the enclave is overloaded; try again shortly', 'enclave_overloaded'));
    default:
      return new ApiError('enclave_error', 'the enclave failed to handle the request');
  }
}

/** A 503 tells the client when to come back, like the enclave's own overload answer. */
function retryable(error: ApiError): ApiError {
  return error.withHeaders({ 'retry-after': '1' });
}
