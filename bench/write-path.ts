/**
 * Where a load of writes spent its time, to tell a slow disk from a busy machine: how many
 * entries shared each group commit (an fsync on the host), how long a commit took, and the
 * CPU each process used per write. Read from the enclave's metrics (through the proxy's
 * GET /metrics) and /proc, before and after the load.
 */
import { metricPrefix } from '../common/metrics.js';
import { cpuMs, type Service } from '../scripts/lib/run-service.js';
import type { LoadClient } from './load-client.js';

export interface WritePath {
  /** Entries made durable per group commit (one write and fdatasync of the log on the host). */
  entriesPerCommit: number;
  /** Mean ms of one commit: the enclave's round trip to the host store, write and fdatasync included. */
  commitMs: number;
  /** CPU ms each process used per write. */
  cpuMsPerWrite: { proxy: number; enclave: number; hostStore: number };
}

interface Sample {
  entries: number;
  commits: number;
  commitSeconds: number;
  cpu: { proxy: number; enclave: number; hostStore: number };
}

const storage = `${metricPrefix('enclave')}storage_`;

async function sample(client: LoadClient, svc: Service): Promise<Sample> {
  const res = await client.request({ method: 'GET', path: '/metrics' });
  const text = res.body.toString('utf8');
  const value = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return {
    entries: value(`${storage}committed_entries_total`),
    commits: value(`${storage}commit_duration_seconds_count`),
    commitSeconds: value(`${storage}commit_duration_seconds_sum`),
    cpu: { proxy: cpuMs(svc.proxy.pid), enclave: cpuMs(svc.enclave.pid), hostStore: cpuMs(svc.hostStore.pid) },
  };
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

/** Starts watching; the function it resolves with reports on the `writes` made since. */
export async function watchWritePath(client: LoadClient, svc: Service): Promise<(writes: number) => Promise<WritePath>> {
  const before = await sample(client, svc);
  return async (writes) => {
    const after = await sample(client, svc);
    const commits = after.commits - before.commits;
    const perWrite = (key: keyof Sample['cpu']) => round3((after.cpu[key] - before.cpu[key]) / writes);
    return {
      entriesPerCommit: Math.round(((after.entries - before.entries) / commits) * 10) / 10,
      commitMs: round3(((after.commitSeconds - before.commitSeconds) / commits) * 1000),
      cpuMsPerWrite: { proxy: perWrite('proxy'), enclave: perWrite('enclave'), hostStore: perWrite('hostStore') },
    };
  };
}
