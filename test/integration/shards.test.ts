import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, RollbackError, type TeeClient } from '../../sdk/client.js';
import { parseState, StateTracker } from '../../protocol/response-signature.js';
import { shardOf } from '../../protocol/shards.js';
import { freePort, startService, type RunningService } from '../helpers/service.js';
import { startLoneEnclave } from '../helpers/processes.js';

/**
 * Issue 38 item 1: tenants in shards, each shard its own sealed store in the host store. The
 * service runs with SHARDS=4 and small snapshots, so every shard has snapshots and segments.
 */
const SHARDS = 4;
let svc: RunningService;
let rootPem: string;
let client: TeeClient;
const acked: Array<{ id: string; tenant: string; content: string }> = [];
const words = ['apple', 'river', 'garden', 'piano', 'winter', 'castle', 'coffee', 'island', 'doctor', 'engine', 'forest', 'silver'];
const tenantOf = (i: number) => `shard-tenant-${i}`;

const open = (baseUrl: string, stateTracker?: StateTracker) => connect({ insecureSkipPcrPinning: true, baseUrl, rootPem, ...(stateTracker ? { stateTracker } : {}) });

beforeAll(async () => {
  svc = await startService({ SHARDS: String(SHARDS), SNAPSHOT_LOG_BYTES: '16384' });
  rootPem = readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8');
  client = await open(svc.baseUrl, new StateTracker());
});
afterAll(async () => {
  await svc?.stop();
});

/** A copy of the host store's folder. */
function copyOf(dir: string): string {
  const copy = mkdtempSync(join(tmpdir(), 'agent-shards-'));
  cpSync(dir, copy, { recursive: true });
  return copy;
}

/** Starts an enclave on `dir` that must refuse: its exit code and output. */
async function enclaveExit(dir: string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; output: string }> {
  const enclave = await startLoneEnclave({ ...env, DATA_DIR: dir, ENCLAVE_ADDR: `127.0.0.1:${await freePort()}` });
  try {
    const code = await Promise.race([
      enclave.exited,
      new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`enclave kept running:\n${enclave.output()}`)), 60_000)),
    ]);
    return { code, output: enclave.output() };
  } finally {
    await enclave.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('a service in shards', () => {
  it('keeps memories spread over every shard through SIGKILL and restart: each acknowledged one is found by id and by search', async () => {
    const shardsSeen = new Set<string>();
    // 16 clients at once over 48 tenants.
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < 192; i = next++) {
        const tenant = tenantOf(i % 48);
        const content = `the ${words[i % 12]} ${words[Math.floor(i / 12) % 12]} note number ${i} of ${tenant}`;
        const res = await client.call<{ id: string }>('POST', '/v1/memory', { tenant_id: tenant, content });
        expect(res.status).toBe(200);
        shardsSeen.add(res.headers['x-tee-shard']);
        acked.push({ id: res.body.id, tenant, content });
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    // One batch across shards.
    const batch = await client.call<{ data: Array<{ id: string; tenant_id: string; content: string }> }>('POST', '/v1/memory', {
      memories: [0, 1, 2, 3, 4, 5].map((t) => ({ tenant_id: tenantOf(t), content: `batched ${words[t]} fact for ${tenantOf(t)}` })),
    });
    expect(batch.status).toBe(200);
    for (const m of batch.body.data) acked.push({ id: m.id, tenant: m.tenant_id, content: m.content });
    expect([...shardsSeen].sort()).toEqual([0, 1, 2, 3].map((s) => `${s}/${SHARDS}`));
    for (let s = 0; s < SHARDS; s++) expect(existsSync(join(svc.dataDir, `shard-0${s}`, 'snapshot.sealed')), `shard ${s} snapshot`).toBe(true);

    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    client = await client.reconnect();
    expect(svc.output()).toMatch(/"shards":4/);
    for (const m of acked) {
      const got = await client.call<{ content: string }>('GET', `/v1/memory/${m.id}?tenant_id=${m.tenant}`);
      expect(got.status, m.id).toBe(200);
      expect(got.body.content).toBe(m.content);
      expect(got.headers['x-tee-shard']).toBe(`${shardOf(m.tenant, SHARDS)}/${SHARDS}`);
      const found = await client.call<{ data: Array<{ id: string }> }>('GET', `/v1/memory?tenant_id=${m.tenant}&query=${encodeURIComponent(m.content)}&top_k=3`);
      expect(found.body.data.map((d) => d.id), m.content).toContain(m.id);
    }
    expect(client.state.shardCount).toBe(SHARDS);
    // The operator sees how writes spread over the shards (by index, never by tenant).
    const metrics = await (await fetch(`${svc.baseUrl}/metrics`)).text();
    const perShard = [0, 1, 2, 3].map((s) => Number(new RegExp(`^agent_enclave_storage_shard_changes\\{shard="${s}"[^}]*\\} (\\d+)$`, 'm').exec(metrics)?.[1]));
    expect(perShard.reduce((a, b) => a + b, 0)).toBe(acked.length);
  });

  it('the host rolls one shard back: answers for its tenants are refused, the other shards go on', async () => {
    const tenant = tenantOf(0);
    const shard = shardOf(tenant, SHARDS);
    const other = tenantOf([...Array(48).keys()].find((i) => shardOf(tenantOf(i), SHARDS) !== shard)!);
    const folder = `shard-0${shard}`;
    const saved = copyOf(join(svc.dataDir, folder));
    const later = await client.call('POST', '/v1/memory', { tenant_id: tenant, content: 'written after the copy was taken' });
    expect(later.status).toBe(200);
    await svc.killEnclave('SIGKILL');
    await svc.killHostStore('SIGKILL');
    rmSync(join(svc.dataDir, folder), { recursive: true, force: true });
    renameSync(saved, join(svc.dataDir, folder));
    await svc.startHostStore();
    await svc.startEnclave();
    client = await client.reconnect();
    const refused = await client.call('GET', `/v1/memory?tenant_id=${tenant}`).then(() => undefined, (e: unknown) => e);
    expect(refused).toBeInstanceOf(RollbackError);
    expect((refused as Error).message).toMatch(/older than state \d+ this client has already seen/);
    expect((await client.call('GET', `/v1/memory?tenant_id=${other}`)).status).toBe(200);
  });

  it('refuses to start when the host swaps two shards\' blobs, naming the shard', async () => {
    const dir = copyOf(svc.dataDir);
    renameSync(join(dir, 'shard-01'), join(dir, 'swap'));
    renameSync(join(dir, 'shard-02'), join(dir, 'shard-01'));
    renameSync(join(dir, 'swap'), join(dir, 'shard-02'));
    const { code, output } = await enclaveExit(dir);
    expect(code).toBe(1);
    expect(output).toMatch(/enclave: refusing to start: shard 1 \(shard-01\/\) holds store [0-9a-f]{32}, but the shard map says it is store [0-9a-f]{32}/);
  });

  it('refuses to start with another shard count than the data was made with, or with the shard map gone', async () => {
    const changed = await enclaveExit(copyOf(svc.dataDir), { SHARDS: '2' });
    expect(changed.code).toBe(1);
    expect(changed.output).toMatch(/refusing to start: SHARDS is 2, but this service's data was made with 4 shards \(memory\/shards.sealed\)/);
    const dir = copyOf(svc.dataDir);
    rmSync(join(dir, 'memory', 'shards.sealed'));
    const gone = await enclaveExit(dir, { SHARDS: '2' });
    expect(gone.code).toBe(1);
    expect(gone.output).toMatch(/refusing to start: the host store holds shards \(shard-00\/, shard-01\/, shard-02\/, …\) but not memory\/shards.sealed/);
  });
});

describe('a DATA_DIR from before shards (test/fixtures/data-dir-before-shards)', () => {
  const FIXTURE = join(import.meta.dirname, '../fixtures/data-dir-before-shards');
  const expected = JSON.parse(readFileSync(join(FIXTURE, 'expected.json'), 'utf8')) as {
    memories: Array<{ id: string; tenant_id: string; content: string }>; deleted: Array<{ id: string; tenant_id: string }>; last: { state: string; store: string };
  };

  it('opens as one shard with nothing lost, its store and chain going on from the last head it signed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agent-before-shards-'));
    cpSync(FIXTURE, dir, { recursive: true });
    for (const f of ['README.md', 'expected.json', 'make-fixture.mjs']) rmSync(join(dir, f));
    // SHARDS set: data from before shards stays one shard (a warning says so).
    let old = await startService({ DATA_DIR: dir, SHARDS: '4' });
    try {
      // A client that saw the last head of the old service (saved as v 1, before shards) goes on with it.
      const tracker = StateTracker.from({ v: 1, newest: { store: expected.last.store, ...parseState(expected.last.state)! } });
      rootPem = readFileSync(join(dir, 'simulated-root.pem'), 'utf8');
      let c = await open(old.baseUrl, tracker);
      expect(old.output()).toMatch(/made before shards: it opens as one shard, and SHARDS=4 applies to new data only/);
      const check = async () => {
        for (const m of expected.memories) {
          const got = await c.call<{ content: string }>('GET', `/v1/memory/${m.id}?tenant_id=${m.tenant_id}`);
          expect(got.status, m.id).toBe(200);
          expect(got.body.content).toBe(m.content);
          expect(got.store).toBe(expected.last.store);
          expect(got.headers['x-tee-shard']).toBe('0/1');
          const found = await c.call<{ data: Array<{ id: string }> }>('GET', `/v1/memory?tenant_id=${m.tenant_id}&query=${encodeURIComponent(m.content)}&top_k=3`);
          expect(found.body.data.map((d) => d.id)).toContain(m.id);
        }
        for (const m of expected.deleted) expect((await c.call('GET', `/v1/memory/${m.id}?tenant_id=${m.tenant_id}`)).status).toBe(404);
      };
      await check();
      expect((await c.call('POST', '/v1/memory', { tenant_id: 'legacy-0', content: 'written after shards came' })).status).toBe(200);
      expect(existsSync(join(dir, 'memory', 'shards.sealed'))).toBe(true);
      expect(readdirSync(dir).filter((f) => f.startsWith('shard-'))).toEqual([]);
      // Once more, now with the shard map: the same one shard.
      await old.stop();
      old = await startService({ DATA_DIR: dir });
      rootPem = readFileSync(join(dir, 'simulated-root.pem'), 'utf8');
      c = await open(old.baseUrl, tracker);
      await check();
    } finally {
      await old.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
