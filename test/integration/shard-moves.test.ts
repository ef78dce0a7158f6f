/**
 * A shard moved between two enclaves at runtime (#38 item 2), as real processes: one host
 * store, enclaves A and B with SHARDS=4 and SHARDS_OPEN=none (B took the keys from A by
 * attestation), a proxy each, and this test as the host's placement (OpenShard/CloseShard over
 * gRPC) and routing (a fetch that sends each call to the owner it knows, and on 503 with
 * x-tee-shard-miss waits for the placement to change and sends it again). A move with a
 * read-ahead (PrepareShard on B before CloseShard on A) too.
 */
import * as grpc from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHARD_MISS_HEADER, shardOf } from '../../protocol/shards.js';
import { connect, RollbackError, SealedCallError, type TeeClient } from '../../sdk/client.js';
import { request } from '../helpers/http.js';
import { grpcError, startShardPair, type ShardPair } from '../helpers/shard-pair.js';

let pair: ShardPair;
const tenantIn = (shard: number) => {
  for (let i = 0; ; i++) if (shardOf(`mover-${i}`, 4) === shard) return `mover-${i}`;
};
const tenant = tenantIn(1);

beforeAll(async () => {
  pair = await startShardPair();
}, 240_000);
afterAll(async () => {
  await pair?.stop();
});

/** The host's routing of shard 1, as the test moves it: every call goes to `owner`; a miss waits for the next move. */
function router(from = pair.a.baseUrl) {
  let owner = from;
  let moved: () => void = () => {};
  let next = new Promise<void>((r) => { moved = r; });
  const misses: string[] = [];
  const fetchImpl = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input));
    for (;;) {
      const sentTo = owner;
      const changed = next;
      const res = await fetch(new URL(url.pathname + url.search, sentTo), init);
      const miss = res.headers.get(SHARD_MISS_HEADER);
      if (res.status !== 503 || miss === null) return res;
      misses.push(`${sentTo === pair.a.baseUrl ? 'A' : 'B'}:${miss}`);
      await res.arrayBuffer();
      // The owner it knew no longer holds the shard: wait for the placement to name another.
      if (owner === sentTo) await changed;
    }
  }) as typeof fetch;
  return {
    fetch: fetchImpl,
    misses,
    moveTo(url: string) {
      owner = url;
      const done = moved;
      next = new Promise<void>((r) => { moved = r; });
      done();
    },
  };
}

const rootPem = () => readFileSync(join(pair.a.dataDir, 'simulated-root.pem'), 'utf8');

describe('SHARDS_OPEN=none', () => {
  it('starts healthy with the shard map and no shard open, and refuses every tenant with 503 shard_not_owned and the shard in x-tee-shard-miss', async () => {
    expect(await pair.rpcB.shards()).toEqual({ count: 4, open: [], prepared: [], prepared_max: 4 });
    expect((await fetch(`${pair.b.baseUrl}/healthz`)).status).toBe(200);
    const res = await request(pair.b.baseUrl, 'POST', '/v1/memory', { tenant_id: tenant, content: 'nobody holds shard 1' });
    expect(res.status, res.text).toBe(503);
    expect(res.headers.get(SHARD_MISS_HEADER)).toBe('1');
    expect(res.body.error).toMatchObject({ code: 'shard_not_owned', message: expect.stringMatching(/^shard 1 \(shard-01\/\) is not held by this enclave/) });
  });
});

describe('shard 1 moved from A to B while a client writes', () => {
  it('every acknowledged memory is on B by id and by search, the client\'s heads only go forward, and A then refuses the shard naming it', async () => {
    for (const shard of [0, 1, 2, 3]) {
      const state = await pair.rpcA.open(shard, 1);
      expect(state).toMatchObject({ shard, generation: '1', seq: '0' });
    }
    expect((await pair.rpcA.shards()).open.map((s) => s.shard)).toEqual([0, 1, 2, 3]);
    const route = router();
    const tee: TeeClient = await connect({ baseUrl: pair.a.baseUrl, rootPem: rootPem(), insecureSkipPcrPinning: true, fetch: route.fetch });

    const acknowledged: Array<{ id: string; content: string }> = [];
    const failures: unknown[] = [];
    let writing = true;
    // Three writers at once, so that writes are in flight when the close begins.
    const writer = (w: number) => (async () => {
      for (let i = 0; writing || i < 4; i++) {
        const content = `writer ${w}, note ${i} about the lighthouse keeper's ${i % 2 ? 'lamp' : 'logbook'}`;
        try {
          // Plain and sealed in turn: both are re-routed by the shard in x-tee-shard-miss.
          const res = (i + w) % 2
            ? await tee.sealedCall<{ id: string }>('POST', '/v1/memory', { tenant_id: tenant, content, dedupe: false })
            : await tee.call<{ id: string }>('POST', '/v1/memory', { tenant_id: tenant, content, dedupe: false });
          if (res.status === 200) acknowledged.push({ id: res.body.id, content });
          else failures.push({ status: res.status, body: res.body });
        } catch (err) {
          failures.push(err);
          if (err instanceof RollbackError) break;
        }
      }
    })();
    const writers = [0, 1, 2].map(writer);
    // Some writes on A first.
    while (acknowledged.length < 6 && failures.length === 0) await new Promise((r) => setTimeout(r, 20));
    const closed = await pair.rpcA.close(1);
    expect(closed).toMatchObject({ shard: 1, generation: '1', tenants: '0', memories: '0' });
    const opened = await pair.rpcB.open(1, 2);
    expect(opened).toMatchObject({ shard: 1, generation: '2', seq: closed.seq, head: closed.head, tenants: '1' });
    route.moveTo(pair.b.baseUrl);
    const before = acknowledged.length;
    while (acknowledged.length < before + 6 && failures.length === 0) await new Promise((r) => setTimeout(r, 20));
    writing = false;
    await Promise.all(writers);

    expect(failures).toEqual([]);
    expect(route.misses.length).toBeGreaterThan(0);
    expect(new Set(route.misses)).toEqual(new Set(['A:1']));
    // B holds every acknowledged memory, found by id and by search.
    const direct = await connect({ baseUrl: pair.b.baseUrl, rootPem: rootPem(), insecureSkipPcrPinning: true });
    for (const { id, content } of acknowledged) {
      const got = await direct.call<{ content: string }>('GET', `/v1/memory/${id}?tenant_id=${tenant}`);
      expect(got.status).toBe(200);
      expect(got.body.content).toBe(content);
    }
    const listed = await direct.call<{ data: Array<{ id: string }> }>('GET', `/v1/memory?tenant_id=${tenant}&limit=100`);
    expect(listed.body.data.map((m) => m.id).sort()).toEqual(acknowledged.map((m) => m.id).sort());
    const found = await direct.call<{ data: Array<{ content: string }> }>('GET', `/v1/memory?tenant_id=${tenant}&query=${encodeURIComponent(acknowledged.at(-1)!.content)}&top_k=1`);
    expect(found.body.data[0].content).toBe(acknowledged.at(-1)!.content);
    // The client's head of shard 1 went forward across the move: B continued A's chain.
    expect(tee.state.head(1)!.seq).toBe(acknowledged.length);
    expect((await pair.rpcB.shards()).open).toEqual([expect.objectContaining({ shard: 1, generation: '2', seq: String(acknowledged.length), memories: String(acknowledged.length) })]);

    // A no longer serves shard 1, plain or sealed, and says which shard to the host.
    const plain = await request(pair.a.baseUrl, 'GET', `/v1/memory?tenant_id=${tenant}`);
    expect(plain.status).toBe(503);
    expect(plain.headers.get(SHARD_MISS_HEADER)).toBe('1');
    expect(plain.body.error.code).toBe('shard_not_owned');
    const seen: Array<{ status: number; miss: string | null }> = [];
    const atA = await connect({
      baseUrl: pair.a.baseUrl, rootPem: rootPem(), insecureSkipPcrPinning: true,
      fetch: (async (input: string | URL | Request, init?: RequestInit) => {
        const res = await fetch(input, init);
        seen.push({ status: res.status, miss: res.headers.get(SHARD_MISS_HEADER) });
        return res;
      }) as typeof fetch,
    });
    const sealed = await atA.sealedCall('POST', '/v1/memory', { tenant_id: tenant, content: 'sealed, to the old owner' }).catch((err: unknown) => err);
    expect(sealed).toBeInstanceOf(SealedCallError);
    expect((sealed as SealedCallError).status).toBe(503);
    expect((sealed as SealedCallError).body).toMatchObject({ error: { code: 'shard_not_owned' } });
    expect(seen.at(-1)).toEqual({ status: 503, miss: '1' });
    // A sealed stream too: refused before its first frame, outside them.
    const streamed = await atA.sealedStream('POST', '/v1/chat/completions', { model: 'local-memory', messages: [{ role: 'user', content: 'what do I keep?' }], stream: true }, { organization: tenant }).catch((err: unknown) => err);
    expect(streamed).toBeInstanceOf(SealedCallError);
    expect((streamed as SealedCallError).status).toBe(503);
    expect((streamed as SealedCallError).body).toMatchObject({ error: { code: 'shard_not_owned' } });
    expect(seen.at(-1)).toEqual({ status: 503, miss: '1' });
    // An error about a tenant of shard 1, from B (which does not hold shard 0), to a client that has seen
    // shard 0 move on at A: signed with shard 1's head, not B's view of shard 0's (a rollback to the client).
    const zero = (() => {
      for (let i = 0; ; i++) if (shardOf(`zero-${i}`, 4) === 0) return `zero-${i}`;
    })();
    expect((await atA.call('POST', '/v1/memory', { tenant_id: zero, content: 'moves shard 0 on' })).status).toBe(200);
    expect(tee.state.head(0)!.seq).toBe(1);
    const missing = await tee.call<{ error: { code: string } }>('GET', `/v1/memory/mem_00000000000000000000000000000000?tenant_id=${tenant}`);
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('memory_not_found');
    expect(missing.headers['x-tee-shard']).toBe('1/4');
    // Nothing of the refused calls was stored.
    const after = await direct.call<{ data: unknown[] }>('GET', `/v1/memory?tenant_id=${tenant}&limit=100`);
    expect(after.body.data.length).toBe(acknowledged.length);
  });

  it('a stale owner (B, not closed) answers shard_not_owned to its next write once A opens the shard with a higher generation, and never 200 for a write it did not store', async () => {
    const reopened = await pair.rpcA.open(1, 3);
    expect(reopened).toMatchObject({ shard: 1, generation: '3' });
    const count = Number(reopened.memories);
    const refused = await request(pair.b.baseUrl, 'POST', '/v1/memory', { tenant_id: tenant, content: 'written to the stale owner' });
    expect(refused.status, refused.text).toBe(503);
    expect(refused.headers.get(SHARD_MISS_HEADER)).toBe('1');
    expect(refused.body.error).toMatchObject({ code: 'shard_not_owned', message: expect.stringMatching(/^shard 1 \(shard-01\/\) is no longer owned by this enclave \(owner generation 2\)/) });
    // Reads too, from then on.
    expect((await request(pair.b.baseUrl, 'GET', `/v1/memory?tenant_id=${tenant}`)).status).toBe(503);
    const onA = await request(pair.a.baseUrl, 'GET', `/v1/memory?tenant_id=${tenant}&limit=100`);
    expect(onA.status).toBe(200);
    expect(onA.body.data.length).toBe(count);
    expect(onA.body.data.map((m: { content: string }) => m.content)).not.toContain('written to the stale owner');

    // B opening it again with its lower generation: refused, naming both.
    const stale = await grpcError(pair.rpcB.open(1, 2));
    expect(stale.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(stale.details).toMatch(/names owner generation 3, and this enclave opens it as generation 2/);
    expect((await pair.rpcB.shards()).open).toEqual([]);
  });

  it('refuses a shard out of range (INVALID_ARGUMENT); OpenShard again at the same generation and CloseShard of a shard not held do nothing', async () => {
    expect((await grpcError(pair.rpcB.open(4, 9))).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(await pair.rpcB.close(3)).toMatchObject({ shard: 3, tenants: '0' });
    expect((await pair.rpcB.shards()).open).toEqual([]);
    // Shard 3, never written: B takes it from A (generation 1) with generation 4, twice.
    const first = await pair.rpcB.open(3, 4);
    expect(await pair.rpcB.open(3, 4)).toEqual(first);
    expect((await pair.rpcB.shards()).open).toEqual([first]);
    expect(await pair.rpcB.close(3)).toMatchObject({ shard: 3, generation: '4', seq: first.seq });
    expect((await pair.rpcB.shards()).open).toEqual([]);
  });
});

describe('shard 2 moved with a read-ahead (PrepareShard on B, then CloseShard on A and OpenShard on B) while clients write and read', () => {
  it('B serves nothing of it before the switch; then holds every acknowledged write, those made after the read-ahead included, and no read or write failed', async () => {
    const mover = tenantIn(2);
    await pair.rpcA.open(2, 1);
    const route = router();
    const tee: TeeClient = await connect({ baseUrl: pair.a.baseUrl, rootPem: rootPem(), insecureSkipPcrPinning: true, fetch: route.fetch });
    const acknowledged: Array<{ id: string; content: string }> = [];
    const failures: unknown[] = [];
    let reads = 0;
    let going = true;
    const writer = (w: number) => (async () => {
      for (let i = 0; going; i++) {
        const content = `prepared move, writer ${w}, note ${i} about the orchard's ${i % 2 ? 'pears' : 'apples'}`;
        try {
          const res = await tee.call<{ id: string }>('POST', '/v1/memory', { tenant_id: mover, content, dedupe: false });
          if (res.status === 200) acknowledged.push({ id: res.body.id, content });
          else failures.push({ status: res.status, body: res.body });
        } catch (err) {
          failures.push(err);
        }
      }
    })();
    const reader = (async () => {
      while (going) {
        try {
          const res = await tee.call('GET', `/v1/memory?tenant_id=${mover}&query=${encodeURIComponent('pears in the orchard')}&top_k=3`);
          if (res.status === 200) reads++;
          else failures.push({ read: res.status, body: res.body });
        } catch (err) {
          failures.push(err);
        }
      }
    })();
    const until = async (n: number) => {
      while (acknowledged.length < n && failures.length === 0) await new Promise((r) => setTimeout(r, 20));
    };
    const loops = [writer(0), writer(1), reader];
    await until(6);
    const prepared = await pair.rpcB.prepare(2);
    expect(Number(prepared.seq)).toBeGreaterThan(0);
    expect(prepared.tenants).toBe('1');
    // Read ahead, not served: B refuses the tenant, and does not list the shard.
    const early = await request(pair.b.baseUrl, 'GET', `/v1/memory?tenant_id=${mover}`);
    expect(early.status).toBe(503);
    expect(early.headers.get(SHARD_MISS_HEADER)).toBe('2');
    expect((await pair.rpcB.shards()).open.map((s) => s.shard)).not.toContain(2);
    // The tail: written on A after the read-ahead.
    const before = acknowledged.length;
    await until(before + 6);
    const closed = await pair.rpcA.close(2);
    expect(Number(closed.seq)).toBeGreaterThan(Number(prepared.seq));
    const opened = await pair.rpcB.open(2, 2);
    expect(opened).toMatchObject({ shard: 2, generation: '2', seq: closed.seq, head: closed.head, tenants: '1' });
    route.moveTo(pair.b.baseUrl);
    const after = acknowledged.length;
    await until(after + 6);
    going = false;
    await Promise.all(loops);

    expect(failures).toEqual([]);
    expect(reads).toBeGreaterThan(0);
    // B opened from its read-ahead, reading only the log past it.
    expect(pair.b.enclave.output()).toMatch(new RegExp(`"readAhead":\\{"seq":${prepared.seq}\\}`));
    const direct = await connect({ baseUrl: pair.b.baseUrl, rootPem: rootPem(), insecureSkipPcrPinning: true });
    const stored: Array<{ id: string; content: string }> = [];
    for (let after = ''; ;) {
      const page = await direct.call<{ data: Array<{ id: string; content: string }>; has_more: boolean; last_id: string }>('GET', `/v1/memory?tenant_id=${mover}&limit=100${after ? `&after=${after}` : ''}`);
      expect(page.status).toBe(200);
      stored.push(...page.body.data);
      if (!page.body.has_more) break;
      after = page.body.last_id;
    }
    expect(stored.map((m) => m.id).sort()).toEqual(acknowledged.map((m) => m.id).sort());
    for (const { id, content } of acknowledged) expect(stored.find((m) => m.id === id)?.content).toBe(content);
    expect(tee.state.head(2)!.seq).toBe(acknowledged.length);
  });

  it('a read-ahead of a shard B serves is refused (FAILED_PRECONDITION), and one of a shard out of range (INVALID_ARGUMENT)', async () => {
    const held = await grpcError(pair.rpcB.prepare(2));
    expect(held.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(held.details).toMatch(/^shard 2 \(shard-02\/\) is served by this enclave/);
    expect((await grpcError(pair.rpcB.prepare(4))).code).toBe(grpc.status.INVALID_ARGUMENT);
  });
});
