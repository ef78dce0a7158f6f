import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { configFromCli, logFormat, logLevel } from '../common/config.js';
import { createLogger } from '../common/logger.js';
import { etcdArgs, ETCD_INSTALL, findEtcd, waitForEtcd } from './lib/etcd.js';
import { supervised, Supervisor, type Supervised } from './lib/supervisor.js';

/**
 * `npm run start:cluster -- --enclaves 3`: the service as several enclaves on this machine,
 * placed through etcd (docs/cluster.md): etcd, one host store, N enclaves (SHARDS_OPEN=none;
 * all but the first take the service's keys from the first by attestation), a placement
 * process beside each (its membership lease, and a candidate for controller), and the proxy
 * routing by the shard map. Everything on loopback; restarted when it dies, as `npm start`.
 */
const usage = `agent-service cluster: starts etcd, the host store, N enclaves with a placement process each, and the proxy (routing by the shard map in etcd), all on loopback.

Usage: npm run start:cluster -- [--enclaves N] [--etcd-port P]
  --enclaves N    enclaves to run (1 to 16) [default: 3], on 127.0.0.1:50071, 50072, ...
  --etcd-port P   etcd's client port on 127.0.0.1 [default: 2379; its peer port is P+1]; its data goes to DATA_DIR/etcd

Needs etcd (Debian: ${ETCD_INSTALL}). Every other setting is the processes' own (see start:enclave, start:proxy,
start:host-store, start:placement --help): SHARDS defaults to 12 here, WITNESSES to N/2 rounded down (1 for 2 or 3 enclaves, 2 for 4 or 5: what makes an old owner's confirmers and a new owner's answerers share an enclave), LEASE_TTL_S
to 3 (as start:placement), PORT to 8080, and DATA_DIR to ./data-cluster (npm start's ./data holds a store of one shard, whose count cannot change).`;
const config = configFromCli(usage, { logLevel: logLevel(), logFormat: logFormat() });
const log = createLogger('cluster', config.logLevel, config.logFormat, { sync: true });

function option(name: string, fallback: number, min: number, max: number): number {
  const at = process.argv.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isInteger(value) || value < min || value > max) {
    process.stderr.write(`${name} takes an integer from ${min} to ${max}, got "${process.argv[at + 1] ?? ''}"\n`);
    process.exit(2);
  }
  return value;
}
const enclaves = option('--enclaves', 3, 1, 16);
const etcdPort = option('--etcd-port', 2379, 1, 65534);

const etcdBinary = findEtcd();
if (!etcdBinary) {
  process.stderr.write(`agent-service: etcd is not installed; the cluster places its shards through it.\nInstall it (Debian/Ubuntu): ${ETCD_INSTALL}\n`);
  process.exit(1);
}

const distRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
// Not npm start's ./data: a store's shard count is fixed when it is made, and npm start makes one shard.
const dataDir = process.env.DATA_DIR || './data-cluster';
const etcdEndpoint = `127.0.0.1:${etcdPort}`;
const base: NodeJS.ProcessEnv = {
  ...process.env,
  DATA_DIR: dataDir,
  SHARDS: process.env.SHARDS || '12',
  // Freshness across enclaves: each write's new head confirmed by one other enclave before it
  // is acknowledged, so a restored old copy of a shard is refused by its next owner (docs/cluster.md).
  // Each side of a handover counts WITNESSES + 1 enclaves: at N/2 any two sides share one (docs/cluster.md).
  WITNESSES: process.env.WITNESSES || String(Math.floor(enclaves / 2)),
  ETCD_ENDPOINTS: etcdEndpoint,
};

const etcd = supervised('etcd', { command: { file: etcdBinary, args: etcdArgs(join(dataDir, 'etcd'), etcdPort, etcdPort + 1) } });
const hostStore = supervised('host-store', { script: resolve(distRoot, 'host-store/main.js'), env: () => base });
const addresses = Array.from({ length: enclaves }, (_, i) => `127.0.0.1:${50071 + i}`);
const enclaveProcs: Supervised[] = addresses.map((address, i) => supervised(`enclave-${i + 1}`, {
  script: resolve(distRoot, 'enclave/main.js'),
  env: (restart) => {
    // The first makes the service's keys; the others, and any enclave restarted, take them
    // from a running one, so clients keep seeing one service key while any enclave lives.
    const from = restart ? addresses.find((a, j) => j !== i && enclaveProcs[j].child) : i > 0 ? addresses[0] : undefined;
    return { ...base, ENCLAVE_ADDR: address, SHARDS_OPEN: 'none', ...(from ? { JOIN_ENCLAVE_ADDR: from } : {}) };
  },
}));
const placements = addresses.map((address, i) => supervised(`placement-${i + 1}`, {
  script: resolve(distRoot, 'placement/main.js'),
  env: () => ({ ...base, ENCLAVE_ADDR: address, MEMBER_ID: `enclave-${i + 1}` }),
}));
const proxy = supervised('proxy', { script: resolve(distRoot, 'proxy/main.js'), env: () => base });

const supervisor = new Supervisor(log, () => [[proxy], placements, enclaveProcs, [hostStore], [etcd]]);
supervisor.stopOnSignals();

supervisor.run(etcd);
try {
  await waitForEtcd(etcdEndpoint, 30_000, () => etcd.child !== undefined);
} catch (err) {
  supervisor.giveUp(`etcd did not start on ${etcdEndpoint} (${String(err)}); is the port taken? --etcd-port picks another`, 1);
  await new Promise(() => {});
}
log.info({ etcd: etcdEndpoint }, 'etcd ready');
supervisor.run(hostStore);
await supervisor.listening(hostStore);
supervisor.run(enclaveProcs[0]);
await supervisor.listening(enclaveProcs[0]);
for (const e of enclaveProcs.slice(1)) supervisor.run(e);
await Promise.all(enclaveProcs.slice(1).map((e) => supervisor.listening(e)));
for (const p of placements) supervisor.run(p);
await Promise.all(placements.map((p) => supervisor.listening(p)));
log.info({ enclaves: addresses }, 'enclaves and placement ready; starting proxy');
supervisor.run(proxy);
log.info(`ready: ${await supervisor.listening(proxy) ?? 'the proxy listens'}`);
