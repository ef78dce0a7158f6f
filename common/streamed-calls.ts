import type * as grpc from '@grpc/grpc-js';
import { PendingTable } from './pending-table.js';

interface Waiting<Reply> {
  /** The stream the request went out on: only its failure fails the request. */
  stream: grpc.ClientDuplexStream<unknown, Reply>;
  resolve: (reply: Reply) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
  /** Removes the abort listener. */
  release: () => void;
}

export interface StreamedCallsOptions<Reply> {
  /** Opens a new stream (a bidi RPC of the service). */
  open: () => grpc.ClientDuplexStream<unknown, Reply>;
  /** The error every request on a stream that failed or ended gets. */
  broken: (err?: grpc.ServiceError) => Error;
  /** The error a request whose reply did not come within its time gets. */
  late: (timeoutMs: number) => Error;
  /** The error a request whose signal aborted gets. */
  aborted?: () => Error;
  /** What tells the other side that the caller gave up on request `id` (nothing when absent). */
  cancel?: (id: number) => object;
}

/**
 * Requests over one long-lived bidi stream, each a message with a number and its reply paired by
 * that number, each with its own time limit and, optionally, a signal that gives up on it. A
 * stream message costs grpc-js a fraction of a call of its own (protos/enclave.proto says how
 * much). When the stream fails or ends, the requests on it fail as unary calls would, and the
 * next request opens a new stream (grpc-js reconnects).
 */
export class StreamedCalls<Reply extends { id: number | string }> {
  private stream?: grpc.ClientDuplexStream<unknown, Reply>;
  private readonly waiting = new PendingTable<Waiting<Reply>>();
  private lastId = 0;

  constructor(private readonly options: StreamedCallsOptions<Reply>) {}

  /**
   * Sends `message` with a number of its own; its reply, or the error of a late, aborted or
   * broken request (`late`, when given, is this request's own error for no reply in time).
   */
  call(message: object, timeoutMs: number, signal?: AbortSignal, late?: () => Error): Promise<Reply> {
    const aborted = () => this.options.aborted?.() ?? new Error('aborted');
    if (signal?.aborted) return Promise.reject(aborted());
    const stream = this.open();
    const id = this.nextId();
    return new Promise((resolve, reject) => {
      const giveUp = (err: Error) => {
        if (!this.settle(id)) return;
        reject(err);
        const cancel = this.options.cancel?.(id);
        if (cancel && this.stream === stream) stream.write(cancel);
      };
      const onAbort = () => giveUp(aborted());
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.set(id, {
        stream,
        resolve,
        reject,
        timer: setTimeout(() => giveUp(late?.() ?? this.options.late(timeoutMs)), timeoutMs),
        release: () => signal?.removeEventListener('abort', onAbort),
      });
      stream.write({ ...message, id });
    });
  }

  /** Cancels the stream: the requests on it fail. */
  close(): void {
    this.stream?.cancel();
  }

  /** Half-closes the stream: the other side answers what it has, then ends it. */
  end(): void {
    this.stream?.end();
  }

  private open(): grpc.ClientDuplexStream<unknown, Reply> {
    if (this.stream) return this.stream;
    const stream = this.options.open();
    this.stream = stream;
    // A uint64 number arrives as a string (protos are loaded with longs as strings).
    stream.on('data', (reply: Reply) => this.settle(Number(reply.id))?.resolve(reply));
    // Its requests fail with it, and only its own (a newer stream may carry others by its last event).
    const fail = (err?: grpc.ServiceError) => {
      if (this.stream === stream) this.stream = undefined;
      const error = this.options.broken(err);
      for (const [id, waiting] of this.waiting.list()) if (waiting.stream === stream) this.settle(id)?.reject(error);
    };
    stream.on('error', fail);
    stream.on('end', () => fail());
    return stream;
  }

  /** Forgets request `id`, returning what waited for it (undefined when nothing did). */
  private settle(id: number): Waiting<Reply> | undefined {
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
