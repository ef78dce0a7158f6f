/**
 * Warm standbys (docs/cluster.md#warm-standbys) as real processes: etcd, a host store, 3
 * enclaves with a placement process each (STANDBYS on, the default) and the proxy. Each shard is
 * kept read ahead on a member other than its owner, which serves nothing of it; after SIGKILL of
 * an owner, its shards are opened by their standbys from the read-ahead (the placement's
 * "shard assigned" line says standby, the enclave's "shard recovered" line names the head read
 * ahead), with every acknowledged write there and every client's heads only going forward. The
 * standbys' refreshes before the kill read on from their last read, only what was written since.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnclaveConnection } from '../../proxy/enclave-client.js';
import { SHARD_MISS_HEADER, shardOf } from '../../protocol/shards.js';
import { StateTracker } from '../../protocol/response-signature.js';
import { connect, ResponseSignatureError, type TeeClient } from '../../sdk/client.js';
import { startCluster, type RunningCluster } from '../helpers/cluster.js';
import { waitFor } from '../helpers/service.js';

const SHARDS = 6;
const TTL_S = 3;
let cluster: RunningCluster;
let rootPem: string;
const tenantOf = (shard: number, n = 0) => {
  for (let i = 0, found = 0; ; i++) if (shardOf(`standby-tenant-${i}`, SHARDS) === shard && found++ === n) return `standby-tenant-${i}`;
};
const words = ['apple', 'river', 'garden', 'piano', 'winter', 'castle', 'coffee', 'island', 'doctor', 'engine', 'forest', 'silver', 'meadow', 'rocket', 'violin', 'harbor'];
/** A text its search finds first: its own pair of words. */
const fact = (i: number, when: string) => `the ${words[i % 16]} ${words[Math.floor(i / 16) % 16]} note ${i}, ${when}`;
const open = () => connect({ insecureSkipPcrPinning: true, baseUrl: cluster.baseUrl, rootPem, stateTracker: new StateTracker() });

beforeAll(async () => {
  // A short refresh, so that the writes below are read again by the standbys within the test.
  cluster = await startCluster({ count: 3, shards: SHARDS, ttlSeconds: TTL_S, env: { STANDBY_REFRESH_S: '1' } });
  rootPem = readFileSync(join(cluster.dataDir, 'simulated-root.pem'), 'utf8');
}, 240_000);
afterAll(async () => {
  await cluster?.stop();
});

/** Each shard's standby as the enclaves report it (the one holding it read ahead), with the seq read to. */
async function standbys(): Promise<Map<number, { id: string; address: string; seq: number }>> {
  const found = new Map<number, { id: string; address: string; seq: number }>();
  for (const e of cluster.enclaves) {
    const held = await cluster.hosts.shards(e.address).catch(() => undefined);
    for (const [shard, seq] of held?.prepared ?? []) found.set(shard, { id: e.id, address: e.address, seq });
  }
  return found;
}

/** The JSON log lines of every process so far with this message. */
const lines = (msg: string) => cluster.output().split('\n').filter((l) => l.includes(`"msg":"${msg}"`)).map((l) => JSON.parse(l.slice(l.indexOf('{'))) as Record<string, unknown>);
/** A standby's refreshes of `shard` that read on from its last read (only what was written since), not the whole shard again. */
const readOn = (shard: number) => lines('shard read ahead of its open: not served until then').filter((l) => l.shard === shard && typeof l.from === 'number');

describe('warm standbys', () => {
  it('each shard is read ahead on a member other than its owner, which refuses its tenants until the switch; after SIGKILL of an owner its standbys open its shards from the read-ahead, nothing lost, no head back', async () => {
    const view = await cluster.placed();
    const victim = cluster.enclaves[1];
    const lost = [...view.shards].filter(([, p]) => p.owner === victim.id).map(([s]) => s);
    expect(lost.length).toBeGreaterThan(0);

    // Writes acknowledged before the kill, to every shard of the victim, through one client each.
    const clients = new Map<number, TeeClient>();
    const acked: Array<{ shard: number; tenant: string; id: string; content: string }> = [];
    for (const shard of lost) {
      const client = await open();
      clients.set(shard, client);
      for (let i = 0; i < 5; i++) {
        const content = fact(i, `shard ${shard} before the kill`);
        const res = await client.call<{ id: string }>('POST', '/v1/memory', { tenant_id: tenantOf(shard), content });
        expect(res.status).toBe(200);
        acked.push({ shard, tenant: tenantOf(shard), id: res.body.id, content });
      }
    }

    // Every shard gets a standby, not its owner, and the victim's standbys read past those writes
    // by a refresh that read on from their first read (of the shard before the writes).
    let ready = new Map<number, { id: string; address: string; seq: number }>();
    await waitFor(async () => {
      ready = await standbys();
      const placed = await cluster.view();
      return [...Array(SHARDS).keys()].every((s) => ready.has(s) && ready.get(s)!.id !== placed.shards.get(s)!.owner)
        && lost.every((s) => ready.get(s)!.seq >= 5 && readOn(s).some((l) => (l.seq as number) >= 5));
    }, 90_000, () => JSON.stringify({ ready: [...ready], reads: lines('shard read ahead of its open: not served until then'), notReadOn: lines('the shard read ahead does not continue into its files now: dropped it, reading it again in full') }));

    // A standby serves nothing of its read-ahead: sent straight to it, its tenant is refused, nothing written.
    const [shard0] = lost;
    const standby0 = ready.get(shard0)!;
    const direct = new EnclaveConnection(standby0.address, 30_000);
    try {
      const refused = await direct.call({ requestId: 'to-a-standby', method: 'POST', target: '/v1/memory', body: Buffer.from(JSON.stringify({ tenant_id: tenantOf(shard0), content: 'sent to the standby' })) });
      expect(refused.status).toBe(503);
      expect(JSON.parse(refused.body.toString()).error.code).toBe('shard_not_owned');
      expect(refused.headers[SHARD_MISS_HEADER]).toBe(String(shard0));
      const read = await direct.call({ requestId: 'read-a-standby', method: 'GET', target: `/v1/memory?tenant_id=${tenantOf(shard0)}&limit=10`, body: Buffer.alloc(0) });
      expect(read.status).toBe(503);
    } finally {
      direct.close();
    }
    expect((await cluster.hosts.shards(standby0.address)).open.has(shard0)).toBe(false);

    // Writers go on through the kill; what they get acknowledged must be there after.
    const killedAt = Date.now();
    let writing = true;
    const writers = lost.map(async (shard) => {
      const client = clients.get(shard)!;
      for (let i = 0; writing; i++) {
        const content = fact(i + 5, `shard ${shard} around the kill`);
        try {
          const res = await client.call<{ id: string }>('POST', '/v1/memory', { tenant_id: tenantOf(shard), content });
          if (res.status === 200) acked.push({ shard, tenant: tenantOf(shard), id: res.body.id, content });
        } catch (err) {
          // A 503 while the shard moves (the proxy's, unsigned); a rollback is not one.
          if (!(err instanceof ResponseSignatureError)) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    });
    victim.enclave.child.kill('SIGKILL');
    await waitFor(async () => {
      const placed = await cluster.view();
      return lost.every((s) => placed.shards.get(s)!.owner !== victim.id);
    }, 60_000);
    const after = await cluster.placed();
    // A few more acknowledged writes on the new owners, then stop.
    await new Promise((r) => setTimeout(r, 1500));
    writing = false;
    await Promise.all(writers);

    for (const s of lost) {
      // To its standby, with a new generation, and opened from the read-ahead.
      expect(after.shards.get(s)!.owner, `shard ${s}`).toBe(ready.get(s)!.id);
      expect(after.shards.get(s)!.generation).toBeGreaterThan(view.shards.get(s)!.generation);
      const assigned = lines('shard assigned').filter((l) => l.shard === s && l.from === victim.id && (l.time as number) >= killedAt);
      expect(assigned, `shard ${s}`).toEqual([expect.objectContaining({ owner: ready.get(s)!.id, standby: true })]);
      const recovered = lines('shard recovered').filter((l) => l.shard === s && l.generation === after.shards.get(s)!.generation);
      expect(recovered, `shard ${s}`).toEqual([expect.objectContaining({ readAhead: { seq: expect.any(Number) } })]);
    }

    // Every acknowledged write, by id and by search, through the client that wrote it (its tracker refuses a head older than one it saw).
    for (const m of acked) {
      const client = clients.get(m.shard)!;
      const got = await client.call<{ content: string }>('GET', `/v1/memory/${m.id}?tenant_id=${m.tenant}`);
      expect(got.status, m.content).toBe(200);
      expect(got.body.content).toBe(m.content);
      const found = await client.call<{ data: Array<{ id: string }> }>('GET', `/v1/memory?tenant_id=${m.tenant}&query=${encodeURIComponent(m.content)}&top_k=3`);
      expect(found.body.data.map((d) => d.id), m.content).toContain(m.id);
    }

    // The shards taken over get standbys again, on the member left.
    await waitFor(async () => {
      const now = await standbys();
      const placed = await cluster.view();
      return lost.every((s) => now.has(s) && now.get(s)!.id !== placed.shards.get(s)!.owner && now.get(s)!.id !== victim.id);
    }, 90_000);
  }, 300_000);
});
