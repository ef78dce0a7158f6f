import { flag, hostPort, integer, logFormat, logLevel, optionalText, text } from '../common/config.js';
import { etcdSettings } from '../placement/config.js';

/** Every setting of the proxy process; `npm run start:proxy -- --help` prints this table. */
export const proxySettings = {
  host: text('HOST', 'Interface the HTTP API listens on', '127.0.0.1'),
  port: integer('PORT', 'Port the HTTP API listens on (0 = any free port)', 8080, 0, 65535),
  enclaveAddr: hostPort('ENCLAVE_ADDR', 'Address of the enclave\'s gRPC server', '127.0.0.1:50051'),
  requestTimeoutMs: integer('REQUEST_TIMEOUT_MS', 'Longest the proxy waits for the enclave before answering 504', 30_000, 100, 600_000),
  allowOpen: flag('ALLOW_OPEN', 'Listen beyond loopback even when the enclave runs without API keys'),
  receiveTimeoutMs: integer('HTTP_RECEIVE_TIMEOUT_MS', 'Longest a client may take to send a whole request (headers and body) before 408', 30_000, 1000, 600_000),
  maxInFlight: integer('MAX_IN_FLIGHT', 'Requests the proxy relays at once, counted once their body is in; beyond, 503 proxy_overloaded with Retry-After', 256, 1, 100_000),
  maxRequestsPerIp: integer('MAX_REQUESTS_PER_IP', 'Requests one client IP may have open at once, still sending included; beyond, 429 too_many_concurrent_requests', 64, 1, 100_000),
  rateLimitMax: integer('RATE_LIMIT_MAX', 'Requests per window per API key (per client IP without a key); 0 = no limit', 600, 0, 10_000_000),
  rateLimitIpMax: integer('RATE_LIMIT_IP_MAX', 'Requests per window per client IP, whatever keys it sends; 0 = no limit', 3000, 0, 10_000_000),
  rateLimitWindowMs: integer('RATE_LIMIT_WINDOW_MS', 'Rate-limit window', 60_000, 1000, 86_400_000),
  chatTimeoutMs: integer('CHAT_TIMEOUT_MS', 'Longest a chat completion may take, streamed or not (model calls and memory tool rounds)', 300_000, 100, 3_600_000),
  tlsCert: optionalText('TLS_CERT', 'PEM certificate file; with TLS_KEY, serve HTTPS'),
  tlsKey: optionalText('TLS_KEY', 'PEM private key file for TLS_CERT'),
  ...etcdSettings('Set: route each request by the shard map to its shard\'s owner (cluster); unset: the one enclave at ENCLAVE_ADDR'),
  routeRetries: integer('ROUTE_RETRIES', 'With ETCD_ENDPOINTS: sends of a request after its first when an enclave answers that it does not hold the shard, or while no enclave holds it', 8, 0, 20),
  routeRetryWaitMs: integer('ROUTE_RETRY_WAIT_MS', 'With ETCD_ENDPOINTS: longest one such retry waits for the shard map to change (the waits start at 50 ms and double up to this)', 1000, 10, 60_000),
  dataDir: text('DATA_DIR', 'The host store\'s folder; the proxy only reads simulated-root.pem from it, to offer it to the console while the enclave is simulated', './data'),
  logLevel: logLevel(),
  logFormat: logFormat(),
};
