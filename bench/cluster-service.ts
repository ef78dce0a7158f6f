/**
 * The service as `npm run start:cluster` runs it, for the cluster benchmark: etcd, one host
 * store, N enclaves (SHARDS_OPEN=none; all but the first take the service's keys from a
 * running one), a placement process beside each and the proxy, on free loopback ports with
 * start:cluster's defaults (SHARDS 12, LEASE_TTL_S 3, WITNESSES 1 with more than one enclave) unless `env` says otherwise. Each
 * process's output goes to its own file in `dir` (the benchmark reads the placement
 * processes' JSON lines back to time a failover). Readiness comes over each node child's IPC
 * channel, as under start:cluster's supervisor; nothing is restarted by itself.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync, type WriteStream } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Etcd3 } from 'etcd3';
import { isSupervisorMessage } from '../common/supervised.js';
import { GrpcShardHosts } from '../placement/enclave-admin.js';
import { ShardMap, type ClusterView } from '../placement/shard-map.js';
import { etcdArgs, ETCD_INSTALL, findEtcd, waitForEtcd } from '../scripts/lib/etcd.js';
import { nodeArgs } from '../scripts/lib/node-args.js';
import { freePort } from '../scripts/lib/run-service.js';

const distRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const CLUSTER_PREFIX = '/agent-service';

export interface Proc {
  name: string;
  child: ChildProcess;
  log: string;
}

export interface ClusterEnclave {
  id: string;
  address: string;
  enclave: Proc;
  placement: Proc;
}

export interface ClusterService {
  baseUrl: string;
  dataDir: string;
  etcdEndpoint: string;
  shards: number;
  enclaves: ClusterEnclave[];
  etcd: Etcd3;
  map: ShardMap;
  /** Every process of the service now running, by name (for CPU from /proc). */
  procs(): Array<{ name: string; pid: number }>;
  /** Waits until every shard has a live owner holding it at its generation; returns that map. */
  placed(timeoutMs?: number): Promise<ClusterView>;
  /** Starts the enclave again on its address, taking the keys from a running one, as start:cluster restarts it. */
  restartEnclave(i: number): Promise<void>;
  stop(): Promise<void>;
}

const alive = (c: ChildProcess) => c.exitCode === null && c.signalCode === null;

export async function startClusterService(options: { enclaves: number; dir: string; env?: NodeJS.ProcessEnv }): Promise<ClusterService> {
  const etcdBinary = findEtcd();
  if (!etcdBinary) throw new Error(`the cluster benchmark needs etcd: ${ETCD_INSTALL}`);
  const { dir } = options;
  mkdirSync(dir, { recursive: true });
  const procs: Proc[] = [];
  const logs: WriteStream[] = [];
  const open = (name: string) => {
    const log = join(dir, `${name}.log`);
    const stream = createWriteStream(log, { flags: 'a' });
    logs.push(stream);
    return { log, stream };
  };

  const etcdPort = await freePort();
  const etcdEndpoint = `127.0.0.1:${etcdPort}`;
  const etcdOut = open('etcd');
  const etcdChild = spawn(etcdBinary, etcdArgs(join(dir, 'etcd'), etcdPort, await freePort()), { stdio: ['ignore', 'pipe', 'pipe'] });
  etcdChild.stdout!.pipe(etcdOut.stream, { end: false });
  etcdChild.stderr!.pipe(etcdOut.stream, { end: false });
  procs.push({ name: 'etcd', child: etcdChild, log: etcdOut.log });

  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env, LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0', SHARDS: '12', WITNESSES: options.enclaves > 1 ? '1' : '0', ...options.env,
    DATA_DIR: join(dir, 'data'), HOST_STORE_ADDR: `127.0.0.1:${await freePort()}`, SHARDS_OPEN: 'none', ETCD_ENDPOINTS: etcdEndpoint,
  };
  const shards = Number(env.SHARDS);

  /** Starts a node process and resolves once it says it is ready (or rejects if it exits first). */
  const launch = (name: string, script: string, extra: NodeJS.ProcessEnv): Promise<Proc> => {
    const full = { ...env, ...extra };
    const { log, stream } = open(name);
    const child = spawn(process.execPath, nodeArgs(resolve(distRoot, script), full), { env: full, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    child.stdout!.pipe(stream, { end: false });
    child.stderr!.pipe(stream, { end: false });
    const proc = { name, child, log };
    procs.push(proc);
    return new Promise((res, rej) => {
      child.on('message', (m) => { if (isSupervisorMessage(m) && 'ready' in m) res(proc); });
      child.once('exit', (code, signal) => rej(new Error(`${name} exited (${code ?? signal}) before it was ready; the end of ${log}:\n${readFileSync(log, 'utf8').slice(-3000)}`)));
    });
  };

  const client = new Etcd3({ hosts: `http://${etcdEndpoint}` });
  const map = new ShardMap(client, CLUSTER_PREFIX);
  const hosts = new GrpcShardHosts(5000, 300_000);
  const enclaves: ClusterEnclave[] = [];
  const stop = async () => {
    hosts.closeAll();
    client.close();
    for (const p of [...procs].reverse()) {
      if (!alive(p.child)) continue;
      await new Promise<void>((res) => { p.child.once('exit', () => res()); p.child.kill('SIGTERM'); });
    }
    for (const s of logs) s.end();
  };
  const service: ClusterService = {
    baseUrl: `http://127.0.0.1:${port}`, dataDir: env.DATA_DIR!, etcdEndpoint, shards, enclaves, etcd: client, map,
    procs: () => procs.filter((p) => alive(p.child)).map((p) => ({ name: p.name.replace(/-restarted$/, ''), pid: p.child.pid! })),
    async placed(timeoutMs = 300_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const view = await map.read();
        let all = view.count === shards;
        for (let s = 0; all && s < shards; s++) {
          const p = view.shards.get(s);
          const address = p && view.members.get(p.owner);
          all = address !== undefined && (await hosts.shards(address).catch(() => undefined))?.open.get(s) === p!.generation;
        }
        if (all) return view;
        if (Date.now() > deadline) throw new Error(`the shards were not all placed and open within ${timeoutMs} ms: ${JSON.stringify([...view.shards])}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    },
    async restartEnclave(i) {
      const e = enclaves[i];
      const from = enclaves.find((o, j) => j !== i && alive(o.enclave.child))!.address;
      e.enclave = await launch(`${e.id}-restarted`, 'enclave/main.js', { ENCLAVE_ADDR: e.address, JOIN_ENCLAVE_ADDR: from });
    },
    stop,
  };
  try {
    await waitForEtcd(etcdEndpoint, 30_000, () => alive(etcdChild));
    await launch('host-store', 'host-store/main.js', {});
    const addresses = await Promise.all(Array.from({ length: options.enclaves }, async () => `127.0.0.1:${await freePort()}`));
    const first = await launch('enclave-1', 'enclave/main.js', { ENCLAVE_ADDR: addresses[0] });
    const rest = await Promise.all(addresses.slice(1).map((address, i) => launch(`enclave-${i + 2}`, 'enclave/main.js', { ENCLAVE_ADDR: address, JOIN_ENCLAVE_ADDR: addresses[0] })));
    const started = [first, ...rest];
    // The placement processes log at info: their lines (lease, shard assigned, opened, moved) time a failover.
    const placements = await Promise.all(addresses.map((address, i) => launch(`placement-${i + 1}`, 'placement/main.js', { ENCLAVE_ADDR: address, MEMBER_ID: `enclave-${i + 1}`, LOG_LEVEL: 'info' })));
    addresses.forEach((address, i) => enclaves.push({ id: `enclave-${i + 1}`, address, enclave: started[i], placement: placements[i] }));
    await launch('proxy', 'proxy/main.js', { PORT: String(port), HOST: '127.0.0.1' });
    await service.placed();
    return service;
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The JSON log lines of a process's output file (pino: `time` in ms since the epoch, `msg`). */
export function logLines(file: string): Array<Record<string, unknown> & { time: number; msg: string }> {
  const lines = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      lines.push(JSON.parse(line) as Record<string, unknown> & { time: number; msg: string });
    } catch {
      // a line cut by a kill
    }
  }
  return lines;
}
