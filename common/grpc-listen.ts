import * as grpc from '@grpc/grpc-js';
import { parseHostPort } from './config.js';

/** Binds the server to host:port; resolves with the port actually bound (0 = any free port). */
export function listen(server: grpc.Server, address: string): Promise<number> {
  const hp = parseHostPort(address);
  if (!hp) return Promise.reject(new Error(`invalid address "${address}"`));
  const bindAddress = hp.host.includes(':') ? `[${hp.host}]:${hp.port}` : `${hp.host}:${hp.port}`;
  return new Promise((resolve, reject) => {
    // The channel carries plaintext on loopback or vsock only; confidentiality towards
    // the host comes from sealed requests (and, for model calls, TLS ending inside the enclave), not this hop.
    server.bindAsync(bindAddress, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port)));
  });
}
