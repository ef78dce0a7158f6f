import * as grpc from '@grpc/grpc-js';
import { parseHostPort } from '../common/config.js';
import type { Logger } from '../common/logger.js';
import { channelOptions, enclaveProto, type ApiRequest, type HealthReply } from '../common/proto.js';
import type { EnclaveApi, Handler } from './api/index.js';

/**
 * The gRPC adapter: decodes calls, hands them to the API and sends its replies back.
 * It holds no logic of its own. A malformed message (e.g. a missing target) is still
 * passed on: proto3 fills defaults, and the API refuses what is not valid.
 */
export function createGrpcServer(api: EnclaveApi, health: () => HealthReply, log: Logger): grpc.Server {
  const server = new grpc.Server(channelOptions);
  const unary = (handler: Handler): grpc.handleUnaryCall<ApiRequest, never> =>
    (call, callback) => {
      handler(call.request, { deadline: deadlineMs(call.getDeadline()) }).then(
        (reply) => callback(null, reply as never),
        (err: unknown) => {
          log.error({ err }, 'handler failed');
          callback({ code: grpc.status.INTERNAL, details: 'internal error' });
        },
      );
    };

  const handlers: grpc.UntypedServiceImplementation = {
    Health: (_call: unknown, callback: grpc.sendUnaryData<HealthReply>) => callback(null, health()),
  };
  for (const [rpc, handler] of Object.entries(api)) handlers[rpc] = unary(handler);
  server.addService(enclaveProto().Enclave.service, handlers);
  return server;
}

/** The caller's gRPC deadline as epoch ms (Infinity when none was set). */
function deadlineMs(deadline: grpc.Deadline): number {
  return deadline instanceof Date ? deadline.getTime() : deadline;
}

/** Binds the server to host:port; resolves with the port actually bound (0 = any free port). */
export function listen(server: grpc.Server, address: string): Promise<number> {
  const hp = parseHostPort(address);
  if (!hp) return Promise.reject(new Error(`invalid address "${address}"`));
  const bindAddress = hp.host.includes(':') ? `[${hp.host}]:${hp.port}` : `${hp.host}:${hp.port}`;
  return new Promise((resolve, reject) => {
    // The channel carries plaintext on loopback or vsock only; confidentiality towards
    // the host comes from sealed requests and TLS ending inside the enclave, not this hop.
    server.bindAsync(bindAddress, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port)));
  });
}
