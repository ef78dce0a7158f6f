import * as grpc from '@grpc/grpc-js';
import { ApiError, timedOut } from '../common/errors.js';
import type { ApiReplyIn, ApiRequest, EnclaveClient, ExchangeReplyIn } from '../common/proto.js';
import { StreamedCalls } from '../common/streamed-calls.js';

/**
 * API requests to the enclave over one long-lived Exchange stream (protos/enclave.proto):
 * each request is a message with a number, its reply comes back with that number. A call
 * gives up at its deadline or when its signal aborts, telling the enclave to abandon the
 * work. When the stream fails (the enclave restarts, the connection drops), every request
 * on it fails as a unary call would, and the next request opens a new stream.
 */
export class EnclaveExchange {
  private readonly calls: StreamedCalls<ExchangeReplyIn>;

  constructor(
    client: EnclaveClient,
    /** Turns the stream's failure into the error each of its requests gets. */
    private readonly transportError: (err: grpc.ServiceError) => ApiError,
  ) {
    this.calls = new StreamedCalls<ExchangeReplyIn>({
      open: () => client.Exchange() as unknown as grpc.ClientDuplexStream<unknown, ExchangeReplyIn>,
      broken: (err) => transportError(err ?? unavailable()),
      late: () => timedOut('the enclave did not answer in time', 'enclave_timeout'),
      aborted: () => transportError(cancelled()),
      cancel: (id) => ({ id, cancel: true }),
    });
  }

  async call(request: ApiRequest, timeoutMs: number, signal?: AbortSignal): Promise<ApiReplyIn> {
    const message = await this.calls.call({ request, timeout_ms: Math.min(timeoutMs, 0xffffffff) }, timeoutMs, signal);
    if (message.failed || !message.reply) throw this.transportError(internalError());
    return message.reply;
  }

  close(): void {
    this.calls.close();
  }
}

const serviceError = (code: grpc.status, details: string): grpc.ServiceError =>
  Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() });
const cancelled = () => serviceError(grpc.status.CANCELLED, 'cancelled by the caller');
const unavailable = () => serviceError(grpc.status.UNAVAILABLE, 'the exchange stream ended');
const internalError = () => serviceError(grpc.status.INTERNAL, 'internal error');
