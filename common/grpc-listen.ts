import { createServer } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { parseHostPort } from './config.js';

/** Binds the server to host:port; resolves with the port actually bound (0 = any free port). */
export async function listen(server: grpc.Server, address: string): Promise<number> {
  const hp = parseHostPort(address);
  if (!hp) throw new Error(`invalid address "${address}"`);
  await tryBind(hp.host, hp.port);
  const bindAddress = hp.host.includes(':') ? `[${hp.host}]:${hp.port}` : `${hp.host}:${hp.port}`;
  return new Promise((resolve, reject) => {
    // The channel carries plaintext on loopback or vsock only; confidentiality towards
    // the host comes from sealed requests (and, for model calls, TLS ending inside the enclave), not this hop.
    server.bindAsync(bindAddress, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port)));
  });
}

/**
 * Binds and frees the address first, so a busy port fails with net's own error (EADDRINUSE)
 * and nothing else: grpc-js would also print an "E No address added…" line of its own
 * before the one line that names the setting (common/listen-error.ts).
 */
function tryBind(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}
