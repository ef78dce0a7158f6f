import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { etcdArgs, ETCD_PACKAGE, waitForEtcd } from '../../scripts/lib/etcd.js';
import { freePort } from '../../scripts/lib/run-service.js';
import { track } from './children.js';
import { ensureCommand } from './system-package.js';

export interface RunningEtcd {
  /** host:port of its client URL. */
  endpoint: string;
  process: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

/** A real one-member etcd (Debian's etcd-server, installed when missing) on free loopback ports, in a temp folder. */
export async function startEtcd(): Promise<RunningEtcd> {
  const binary = ensureCommand('etcd', ETCD_PACKAGE);
  const dataDir = mkdtempSync(join(tmpdir(), 'etcd-test-'));
  const clientPort = await freePort();
  const peerPort = await freePort();
  let logs = '';
  const child = track(spawn(binary, etcdArgs(join(dataDir, 'data'), clientPort, peerPort), { stdio: ['ignore', 'pipe', 'pipe'] }), 'etcd');
  child.stdout!.on('data', (d: Buffer) => { logs += d.toString(); });
  child.stderr!.on('data', (d: Buffer) => { logs += d.toString(); });
  const endpoint = `127.0.0.1:${clientPort}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      await new Promise<void>((res) => { child.once('exit', () => res()); child.kill('SIGTERM'); });
    }
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    await waitForEtcd(endpoint, 30_000, () => child.exitCode === null);
  } catch (err) {
    await stop();
    throw new Error(`${String(err)}\n${logs.slice(-3000)}`);
  }
  return { endpoint, process: child, output: () => logs, stop };
}
