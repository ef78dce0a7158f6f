import * as grpc from '@grpc/grpc-js';
import { ApiError, timedOut } from '../common/errors.js';
import { PendingTable } from '../common/pending-table.js';
import type { ApiReplyIn, ApiRequest, EnclaveClient, ExchangeReplyIn, ExchangeRequest } from '../common/proto.js';

type ExchangeStream = grpc.ClientDuplexStream<ExchangeRequest, ExchangeReplyIn>;

interface Waiting {
  /** The stream the request went out on: only its failure fails the request. */
  stream: ExchangeStream;
  resolve: (reply: ApiReplyIn) => void;
  reject: (error: ApiError) => void;
  timer: NodeJS.Timeout;
  /** Removes the abort listener. */
  release: () => void;
}

/**
 * API requests to the enclave over one long-lived Exchange stream (protos/enclave.proto):
 * each request is a message with a number, its reply comes back with that number. A call
 * gives up at its deadline or when its signal aborts, telling the enclave to abandon the
 * work. When the stream fails (the enclave restarts, the connection drops), every request
 * on it fails as a unary call would, and the next request opens a new stream.
 */
export class EnclaveExchange {
  private stream?: ExchangeStream;
  private readonly waiting = new PendingTable<Waiting>();
  private lastId = 0;

  constructor(
    private readonly client: EnclaveClient,
    /** Turns the stream's failure into the error each of its requests gets. */
    private readonly transportError: (err: grpc.ServiceError) => ApiError,
  ) {}

  call(request: ApiRequest, timeoutMs: number, signal?: AbortSignal): Promise<ApiReplyIn> {
    if (signal?.aborted) return Promise.reject(this.transportError(cancelled()));
    const stream = this.open();
    const id = this.nextId();
    return new Promise((resolve, reject) => {
      const giveUp = (error: ApiError) => {
        if (!this.settle(id)) return;
        reject(error);
        if (this.stream === stream) stream.write({ id, cancel: true });
      };
      const onAbort = () => giveUp(this.transportError(cancelled()));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.set(id, {
        stream,
        resolve,
        reject,
        timer: setTimeout(() => giveUp(timedOut('the enclave did not answer in time', 'enclave_timeout')), timeoutMs),
        release: () => signal?.removeEventListener('abort', onAbort),
      });
      stream.write({ id, request, timeout_ms: Math.min(timeoutMs, 0xffffffff) });
    });
  }

  close(): void {
    this.stream?.cancel();
  }

  private open(): ExchangeStream {
    if (this.stream) return this.stream;
    const stream = this.client.Exchange();
    this.stream = stream;
    stream.on('data', (message: ExchangeReplyIn) => {
      const waiting = this.settle(message.id);
      if (!waiting) return; // given up on already
      if (message.failed || !message.reply) waiting.reject(this.transportError(internalError()));
      else waiting.resolve(message.reply);
    });
    // A stream ends only by failing (the enclave never ends it first): its requests fail with
    // it, and only its own (a newer stream may already carry others when its last event comes).
    const fail = (err?: grpc.ServiceError) => {
      if (this.stream === stream) this.stream = undefined;
      const error = this.transportError(err ?? unavailable());
      for (const [id, waiting] of this.waiting.list()) if (waiting.stream === stream) this.settle(id)?.reject(error);
    };
    stream.on('error', fail);
    stream.on('end', () => fail());
    return stream;
  }

  /** Forgets request `id`, returning what waited for it (undefined when nothing did). */
  private settle(id: number): Waiting | undefined {
    const waiting = this.waiting.get(id);
    if (!waiting) return undefined;
    this.waiting.delete(id);
    clearTimeout(waiting.timer);
    waiting.release();
    return waiting;
  }

  private nextId(): number {
    do this.lastId = (this.lastId + 1) >>> 0;
    while (this.waiting.has(this.lastId));
    return this.lastId;
  }
}

const serviceError = (code: grpc.status, details: string): grpc.ServiceError =>
  Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() });
const cancelled = () => serviceError(grpc.status.CANCELLED, 'cancelled by the caller');
const unavailable = () => serviceError(grpc.status.UNAVAILABLE, 'the exchange stream ended');
const internalError = () => serviceError(grpc.status.INTERNAL, 'internal error');
