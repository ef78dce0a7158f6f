import { spawnSync } from 'node:child_process';
import { Etcd3 } from 'etcd3';

/** The Debian package that has etcd, and the command that installs it. */
export const ETCD_PACKAGE = 'etcd-server';
export const ETCD_INSTALL = `sudo apt-get install -y ${ETCD_PACKAGE}`;

/** The etcd binary on PATH (Debian's etcd-server installs /usr/bin/etcd), or undefined. */
export function findEtcd(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v etcd'], { encoding: 'utf8' }).stdout.trim();
  return found || undefined;
}

/**
 * Arguments of a one-member etcd on loopback: clients on `clientPort`, its peer port on
 * `peerPort` (unused by others but required), its data in `dataDir`.
 */
export function etcdArgs(dataDir: string, clientPort: number, peerPort: number, name = 'agent-service'): string[] {
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  return [
    '--name', name, '--data-dir', dataDir,
    '--listen-client-urls', client, '--advertise-client-urls', client,
    '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
    '--initial-cluster', `${name}=${peer}`, '--initial-cluster-state', 'new',
  ];
}

/** Resolves once etcd at `endpoint` (host:port) answers a read; rejects after `timeoutMs`. */
export async function waitForEtcd(endpoint: string, timeoutMs: number, alive: () => boolean = () => true): Promise<void> {
  const client = new Etcd3({ hosts: `http://${endpoint}`, dialTimeout: 1000 });
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      try {
        await client.get('/ready-check').exec();
        return;
      } catch (err) {
        if (!alive()) throw new Error('etcd exited before it answered');
        if (Date.now() > deadline) throw new Error(`etcd at ${endpoint} did not answer within ${timeoutMs} ms: ${String(err)}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    client.close();
  }
}
