import * as grpc from '@grpc/grpc-js';
import { ApiError, timedOut, unavailable } from '../common/errors.js';
import { channelOptions, enclaveProto, type ApiReplyIn, type EnclaveClient, type HealthReplyIn } from '../common/proto.js';

export type UnaryRpc = 'GetAttestation' | 'AddMemory' | 'QueryMemory' | 'GetMemory' | 'DeleteMemory' | 'ChatCompletion' | 'Sealed';

export interface ForwardedRequest {
  requestId: string;
  target: string;
  body?: Buffer;
  authorization?: string;
  organization?: string;
}

/**
 * The proxy's view of the enclave: one call per RPC, with a deadline, and transport
 * failures turned into API errors (503 when the enclave cannot be reached, 504 when it
 * does not answer in time). grpc-js reconnects by itself, so once the enclave is back
 * the next call succeeds without restarting the proxy.
 */
export class EnclaveConnection {
  readonly client: EnclaveClient;

  constructor(address: string, private readonly timeoutMs: number) {
    const Enclave = enclaveProto().Enclave;
    this.client = new Enclave(address, grpc.credentials.createInsecure(), channelOptions);
  }

  call(rpc: UnaryRpc, request: ForwardedRequest): Promise<ApiReplyIn> {
    const message = {
      request_id: request.requestId,
      target: request.target,
      body: request.body ?? Buffer.alloc(0),
      authorization: request.authorization ?? '',
      organization: request.organization ?? '',
    };
    return new Promise((resolve, reject) => {
      const method = this.client[rpc].bind(this.client) as (
        m: typeof message, md: grpc.Metadata, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r?: ApiReplyIn) => void,
      ) => void;
      method(message, new grpc.Metadata(), { deadline: Date.now() + this.timeoutMs }, (err, reply) => {
        if (err) reject(transportError(err));
        else resolve(reply!);
      });
    });
  }

  health(timeoutMs = 2000): Promise<HealthReplyIn> {
    return new Promise((resolve, reject) => {
      this.client.Health({}, { deadline: Date.now() + timeoutMs }, (err, reply) => (err ? reject(transportError(err)) : resolve(reply!)));
    });
  }

  close(): void {
    this.client.close();
  }
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
      return new ApiError(502, 'upstream_error', 'the enclave failed to handle the request', 'enclave_error');
  }
}

/** A 503 tells the client when to come back, like the enclave's own overload answer. */
function retryable(error: ApiError): ApiError {
  return new ApiError(error.status, error.type, error.message, error.code, error.param, { ...error.headers, 'retry-after': '1' });
}
