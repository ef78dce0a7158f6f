import { configFromCli } from '../common/config.js';
import { createLogger } from '../common/logger.js';
import { buildProxy } from './app.js';
import { proxySettings } from './config.js';
import { etcdHosts } from '../placement/config.js';
import { ClusterRouter } from './cluster-router.js';
import { EnclaveConnection, type EnclaveLink } from './enclave-client.js';
import { exposureProblem } from './exposure.js';
import { exitWithConfigError, stopWithSupervisor, tellSupervisorReady } from '../common/supervised.js';
import { listenErrorLine } from '../common/listen-error.js';

const config = configFromCli('agent-service proxy: the untrusted HTTP front (fastify) that relays to the enclave over gRPC.', proxySettings);
const log = createLogger('proxy', config.logLevel, config.logFormat);

if ((config.tlsCert === undefined) !== (config.tlsKey === undefined)) {
  process.stderr.write('TLS_CERT and TLS_KEY must be set together\n');
  process.exit(2);
}

// With etcd endpoints, the enclaves of a cluster behind the shard map; without, the one at ENCLAVE_ADDR.
// etcd3 is loaded only for a cluster: it costs a start about 0.5 s of CPU that a proxy in front of one enclave never uses.
const etcd = config.etcdEndpoints.length
  ? await import('etcd3').then(({ Etcd3 }) => new Etcd3({ hosts: etcdHosts(config.etcdEndpoints), dialTimeout: 3000 }))
  : undefined;
const enclave: EnclaveLink = etcd
  ? new ClusterRouter(etcd, { prefix: config.etcdPrefix, timeoutMs: config.requestTimeoutMs, retries: config.routeRetries, retryWaitMs: config.routeRetryWaitMs }, log)
  : new EnclaveConnection(config.enclaveAddr, config.requestTimeoutMs);
if (enclave instanceof ClusterRouter) await enclave.start();
const exposure = await exposureProblem({ host: config.host, allowOpen: config.allowOpen, enclave, log });
if (exposure) {
  log.fatal({ problem: exposure }, 'refusing to listen');
  process.stderr.write(`${exposure}\n`);
  process.exit(2);
}
const app = await buildProxy({
  enclave,
  cluster: etcd !== undefined,
  logger: log,
  chatTimeoutMs: config.chatTimeoutMs,
  dataDir: config.dataDir,
  tls: config.tlsCert && config.tlsKey ? { cert: config.tlsCert, key: config.tlsKey } : undefined,
  receiveTimeoutMs: config.receiveTimeoutMs,
  guards: {
    rateLimitMax: config.rateLimitMax,
    rateLimitIpMax: config.rateLimitIpMax,
    rateLimitWindowMs: config.rateLimitWindowMs,
    maxInFlight: config.maxInFlight,
    maxRequestsPerIp: config.maxRequestsPerIp,
  },
});

const address = await app.listen({ host: config.host, port: config.port }).catch((err: unknown) => {
  const line = listenErrorLine({ setting: 'PORT', host: config.host, port: config.port, hostSetting: 'HOST' }, err);
  log.fatal({ problem: line }, 'cannot start');
  return exitWithConfigError('proxy', line);
});
log.info(etcd ? { address, etcd: config.etcdEndpoints, prefix: config.etcdPrefix } : { address, enclave: config.enclaveAddr }, 'proxy listening');
// `address` is where fastify listens (the port PORT=0 picked included), said as a URL to open.
tellSupervisorReady(`${new URL(address).origin}/`);

let stopping = false;
const stop = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'stopping');
  // close() lets requests in flight finish, but Node counts a connection that was opened
  // and never sent a request as busy, which would hold the process for a minute: after a
  // grace period, whatever is left is closed.
  setTimeout(() => app.server.closeAllConnections(), 3000).unref();
  await app.close();
  enclave.close();
  etcd?.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop('SIGINT'));
process.on('SIGTERM', () => void stop('SIGTERM'));
stopWithSupervisor();
