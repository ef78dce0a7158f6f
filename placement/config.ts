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
  leaseTtlS: integer('LEASE_TTL_S', 'Seconds an enclave stays a member after its last answer to Health (its etcd lease); the controller then moves its shards', 3, 2, 300),
  controller: oneOf('CONTROLLER', 'Campaign to be the placement controller (one leader among all placement processes)', ['on', 'off'] as const, 'on'),
  standbys: oneOf('STANDBYS', 'Warm standbys: the controller names for each shard a live member other than its owner, spread evenly, which keeps the shard read ahead (PrepareShard, refreshed), and gives it the shard first when the owner\'s lease lapses, so that its OpenShard reads only the log written since. Each costs the shard\'s memory a second time on its standby (docs/cluster.md)', ['on', 'off'] as const, 'on'),
  standbyRefreshS: integer('STANDBY_REFRESH_S', 'With STANDBYS=on: a standby is read again (a full read of its shard, on its enclave) no sooner than this many seconds after its last read, and only once its owner has written a quarter more changes than it read (a failover then applies at most that much log)', 30, 1, 3600),
  standbyKeepS: integer('STANDBY_KEEP_S', 'With STANDBYS=on: how long a standby\'s enclave keeps it without a refresh (then drops it); one whose shard was not written is read again at half of it', 600, 10, 3600),
  openShardTimeoutMs: integer('OPEN_SHARD_TIMEOUT_MS', 'Longest the controller waits for OpenShard/CloseShard (a shard\'s recovery)', 300_000, 1000, 3_600_000),
  logLevel: logLevel(),
  logFormat: logFormat(),
} satisfies Record<string, Setting<unknown>>;

/** etcd3's hosts: a URL per endpoint. */
export const etcdHosts = (endpoints: string[]): string[] => endpoints.map((e) => (/^https?:\/\//.test(e) ? e : `http://${e}`));
