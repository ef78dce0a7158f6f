import { integer, list, logFormat, logLevel, oneOf, optionalText, text, hostPort, type Setting } from '../common/config.js';

/**
 * The etcd settings the placement process, the proxy and `cluster:move` share; each reads
 * ETCD_ENDPOINTS for its own purpose, which its --help states.
 */
export const etcdSettings = (endpointsPurpose: string) => ({
  etcdEndpoints: list('ETCD_ENDPOINTS', `etcd endpoints (host:port, comma-separated). ${endpointsPurpose}`),
  etcdPrefix: text('ETCD_PREFIX', 'Key prefix of this service\'s placement in etcd (members, shard map, election)', '/agent-service'),
});

/** Every setting of the placement process; `npm run start:placement -- --help` prints this table. */
export const placementSettings = {
  ...etcdSettings('Required: where this process keeps its enclave\'s membership (a lease) and, when it leads, the shard map'),
  enclaveAddr: hostPort('ENCLAVE_ADDR', 'Address of the enclave\'s gRPC server', '127.0.0.1:50051'),
  memberId: optionalText('MEMBER_ID', 'This enclave\'s member id in etcd (letters, digits, . _ -); unset: its address'),
  leaseTtlS: integer('LEASE_TTL_S', 'Seconds an enclave stays a member after its last answer to Health (its etcd lease); the controller then moves its shards', 5, 2, 300),
  controller: oneOf('CONTROLLER', 'Campaign to be the placement controller (one leader among all placement processes)', ['on', 'off'] as const, 'on'),
  openShardTimeoutMs: integer('OPEN_SHARD_TIMEOUT_MS', 'Longest the controller waits for OpenShard/CloseShard (a shard\'s recovery)', 300_000, 1000, 3_600_000),
  logLevel: logLevel(),
  logFormat: logFormat(),
} satisfies Record<string, Setting<unknown>>;

/** etcd3's hosts: a URL per endpoint. */
export const etcdHosts = (endpoints: string[]): string[] => endpoints.map((e) => (/^https?:\/\//.test(e) ? e : `http://${e}`));
