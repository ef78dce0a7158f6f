import { Etcd3 } from 'etcd3';
import { configFromCli } from '../common/config.js';
import { createLogger } from '../common/logger.js';
import { exitWithConfigError, stopWithSupervisor, tellSupervisorReady } from '../common/supervised.js';
import { memberIdPattern } from './cluster-keys.js';
import { etcdHosts, placementSettings } from './config.js';
import { Controller } from './controller.js';
import { GrpcShardHosts } from './enclave-admin.js';
import { Member } from './member.js';

const config = configFromCli(
  'agent-service placement: keeps one enclave\'s membership in etcd (a lease renewed while the enclave answers) and campaigns to be the controller that places shards on members. Run one beside each enclave.',
  placementSettings,
);
const log = createLogger('placement', config.logLevel, config.logFormat);
const id = config.memberId ?? config.enclaveAddr.replace(/[^A-Za-z0-9._-]/g, '_');
if (config.etcdEndpoints.length === 0) await exitWithConfigError('placement', 'ETCD_ENDPOINTS is not set: name the etcd endpoints (host:port, comma-separated)');
if (!memberIdPattern.test(id)) await exitWithConfigError('placement', `MEMBER_ID "${id}" is not a member id (1-64 of letters, digits, . _ -)`);

const client = new Etcd3({ hosts: etcdHosts(config.etcdEndpoints), dialTimeout: 3000 });
// Health may take up to half the lease (a loaded machine), renewed every third: still within the TTL.
const hosts = new GrpcShardHosts((config.leaseTtlS * 1000) / 2, config.openShardTimeoutMs);
const member = new Member(client, hosts, { id, address: config.enclaveAddr, prefix: config.etcdPrefix, ttlSeconds: config.leaseTtlS }, log);
const controller = config.controller === 'on'
  ? new Controller(client, hosts, { id, prefix: config.etcdPrefix, ttlSeconds: config.leaseTtlS, passMs: 1000, settleMs: 2000,
    standbys: config.standbys === 'on' ? { refreshMs: config.standbyRefreshS * 1000, keepMs: config.standbyKeepS * 1000 } : undefined }, log)
  : undefined;
member.start();
controller?.start();
log.info({ member: id, enclave: config.enclaveAddr, etcd: config.etcdEndpoints, prefix: config.etcdPrefix, controller: config.controller }, 'placement started');
tellSupervisorReady();

let stopping = false;
const stop = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'stopping');
  // A planned stop gives up the leadership at once; the membership lapses with its lease
  // (the enclave may still be serving: stopping this process alone does not move its shards early).
  await controller?.stop();
  await member.stop(false);
  hosts.closeAll();
  client.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop('SIGINT'));
process.on('SIGTERM', () => void stop('SIGTERM'));
stopWithSupervisor();
