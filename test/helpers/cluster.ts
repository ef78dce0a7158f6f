import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import sodium from 'sodium-native';
import { GrpcShardHosts } from '../../placement/enclave-admin.js';
import { ShardMap, type ClusterView } from '../../placement/shard-map.js';
import { startEtcd, type RunningEtcd } from './etcd.js';
import { startLone, type Lone } from './processes.js';
import { freePort, waitFor } from './service.js';

export interface ClusterEnclave {
  id: string;
  address: string;
  enclave: Lone;
  placement: Lone;
}

export interface RunningCluster {
  baseUrl: string;
  dataDir: string;
  etcd: RunningEtcd;
  hostStore: Lone;
  enclaves: ClusterEnclave[];
  proxy: Lone;
  map: ShardMap;
  hosts: GrpcShardHosts;
  shards: number;
  /** The map now. */
  view(): Promise<ClusterView>;
  /** Waits until every shard has a live owner that holds it at its generation; returns that map. */
  placed(timeoutMs?: number): Promise<ClusterView>;
  output(): string;
  stop(): Promise<void>;
}

/**
 * The service as a cluster, as `npm run start:cluster` runs it, on free loopback ports: a
 * real etcd, one host store, `count` enclaves (SHARDS_OPEN=none, all but the first taking the
 * keys from the first), a placement process beside each (lease `ttlSeconds`), and the proxy
 * routing by the map. Resolves once every shard is placed and open.
 */
export async function startCluster(options: { count: number; shards: number; ttlSeconds: number; env?: NodeJS.ProcessEnv }): Promise<RunningCluster> {
  const etcd = await startEtcd();
  const dataDir = mkdtempSync(join(tmpdir(), 'agent-cluster-'));
  const operator = Buffer.alloc(32);
  sodium.crypto_sign_keypair(operator, sodium.sodium_malloc(64));
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0', ...options.env,
    DATA_DIR: dataDir, HOST_STORE_ADDR: `127.0.0.1:${await freePort()}`, SHARDS: String(options.shards), SHARDS_OPEN: 'none',
    OPERATOR_PUBKEY: operator.toString('base64'), ETCD_ENDPOINTS: etcd.endpoint, LEASE_TTL_S: String(options.ttlSeconds),
  };
  const started: Lone[] = [];
  const lone = (script: string, extra: NodeJS.ProcessEnv) => {
    const p = startLone(script, { ...env, ...extra });
    started.push(p);
    return p;
  };
  const client = new Etcd3({ hosts: `http://${etcd.endpoint}` });
  const map = new ShardMap(client, '/agent-service');
  const hosts = new GrpcShardHosts(2000, 120_000);
  const cluster: RunningCluster = {
    baseUrl: `http://127.0.0.1:${port}`, dataDir, etcd, shards: options.shards, map, hosts,
    hostStore: undefined as unknown as Lone, enclaves: [], proxy: undefined as unknown as Lone,
    view: () => map.read(),
    async placed(timeoutMs = 90_000) {
      let last: ClusterView | undefined;
      await waitFor(async () => {
        const view = await map.read();
        last = view;
        if (view.count !== options.shards) return false;
        for (let s = 0; s < options.shards; s++) {
          const p = view.shards.get(s);
          const address = p && view.members.get(p.owner);
          if (!address) return false;
          if ((await hosts.shards(address)).open.get(s) !== p.generation) return false;
        }
        return true;
      }, timeoutMs, () => `${JSON.stringify(last && [...last.shards])}\n${cluster.output()}`);
      return last!;
    },
    output: () => started.map((p) => p.output()).join('\n'),
    async stop() {
      hosts.closeAll();
      client.close();
      for (const p of [...started].reverse()) await p.stop();
      await etcd.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    cluster.hostStore = lone('host-store/main.js', {});
    await cluster.hostStore.waitForOutput('host store listening', 30_000);
    const addresses = await Promise.all(Array.from({ length: options.count }, async () => `127.0.0.1:${await freePort()}`));
    for (const [i, address] of addresses.entries()) {
      const enclave = lone('enclave/main.js', { ENCLAVE_ADDR: address, ...(i > 0 ? { JOIN_ENCLAVE_ADDR: addresses[0] } : {}) });
      if (i === 0) await enclave.waitForOutput('enclave listening', 90_000);
      cluster.enclaves.push({ id: `enclave-${i + 1}`, address, enclave, placement: undefined as unknown as Lone });
    }
    for (const e of cluster.enclaves) await e.enclave.waitForOutput('enclave listening', 90_000);
    for (const e of cluster.enclaves) e.placement = lone('placement/main.js', { ENCLAVE_ADDR: e.address, MEMBER_ID: e.id });
    cluster.proxy = lone('proxy/main.js', { PORT: String(port), HOST: '127.0.0.1' });
    await cluster.proxy.waitForOutput('proxy listening', 30_000);
    await cluster.placed();
    return cluster;
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}
