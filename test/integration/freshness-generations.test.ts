/**
 * Freshness across enclaves and owner generations (#38 item 5), as the host plays it against real
 * processes: enclaves A, B and M of one service (B and M took the keys from A by attestation),
 * SHARDS=4, SHARDS_OPEN=none, WITNESSES=1, and two host stores: A's, and a second one for B on a
 * copy of A's folder (the host runs the blob store: it can give one enclave a copy of its own).
 * The host names only M to A and to B.
 *
 * The attack: A (generation 1) serves shard 1. The host gives B a copy of the shard's files and
 * opens the shard on B at generation 2; B asks M what it witnessed, and B's fence lands in the
 * copy, so A's store never sees it. Then A takes a write. Were M to witness it, A would answer 200
 * for a write that the shard's new owner serves without. M answered B at generation 2, so it
 * refuses A's generation-1 head, and A refuses the write (503 shard_not_owned) and every later one.
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardOf } from '../../protocol/shards.js';
import { request } from '../helpers/http.js';
import { startLone, type Lone } from '../helpers/processes.js';
import { freePort } from '../helpers/service.js';
import { shardRpc, startShardPair, type ShardPair } from '../helpers/shard-pair.js';

let pair: ShardPair;
let m: Lone | undefined;
let copy: Lone | undefined;
const copyDir = mkdtempSync(join(tmpdir(), 'freshness-generations-'));
let copyAddr = '';
let mAddr = '';
const tenant = (() => {
  for (let i = 0; ; i++) if (shardOf(`gen-${i}`, 4) === 1) return `gen-${i}`;
})();

/** The second host store, on the copied folder (B's). */
async function startCopy(): Promise<void> {
  copy = startLone('host-store/main.js', { DATA_DIR: copyDir, HOST_STORE_ADDR: copyAddr });
  await copy.waitForOutput('host store listening', 30_000);
}

beforeAll(async () => {
  copyAddr = `127.0.0.1:${await freePort()}`;
  pair = await startShardPair({ WITNESSES: '1' }, {
    // B's host store: a copy of A's folder as it is once A runs (the shard map, no shard opened yet).
    bEnv: async (a) => {
      cpSync(a.dataDir, copyDir, { recursive: true });
      await startCopy();
      return { HOST_STORE_ADDR: copyAddr };
    },
  });
  mAddr = `127.0.0.1:${await freePort()}`;
  m = startLone('enclave/main.js', { ...pair.a.env, ENCLAVE_ADDR: mAddr, JOIN_ENCLAVE_ADDR: pair.a.enclaveAddr });
  await m.waitForOutput('enclave listening', 90_000);
  await pair.rpcA.setPeers([mAddr]);
  await pair.rpcB.setPeers([mAddr]);
}, 300_000);
afterAll(async () => {
  await m?.stop();
  await pair?.stop();
  await copy?.stop();
  rmSync(copyDir, { recursive: true, force: true });
});

const add = (baseUrl: string, content: string) => request(baseUrl, 'POST', '/v1/memory', { tenant_id: tenant, content });
const get = (baseUrl: string, id: string) => request(baseUrl, 'GET', `/v1/memory/${id}?tenant_id=${tenant}`);

describe('freshness across enclaves: owner generations (WITNESSES=1)', () => {
  it('an old owner\'s write, once a new owner asked the members, is refused (503 shard_not_owned), never acknowledged while the new owner serves a copy without it', async () => {
    await pair.rpcA.open(1, 1);
    const before = await add(pair.a.baseUrl, 'acknowledged by A before the move');
    expect(before.status, before.text).toBe(200);
    const [atCopy] = (await pair.rpcA.shards()).open;

    // The host gives B the shard's files as they are now, in B's own host store…
    await copy!.stop();
    cpSync(join(pair.a.dataDir, 'shard-01'), join(copyDir, 'shard-01'), { recursive: true });
    await startCopy();
    // …and opens the shard on B at generation 2: B asks M, its copy reaches what M witnessed, and its fence lands in the copy.
    const opened = await pair.rpcB.open(1, 2);
    expect(opened.seq).toBe(atCopy.seq);
    expect(m!.output()).not.toContain('refused to witness');

    // A, not fenced in its own store, takes a write: stored in A's store, but M refuses to witness it for generation 1.
    const late = await add(pair.a.baseUrl, 'written by A after B opened the shard');
    if (late.status === 200) {
      // Without owner generations in the witness statements: acknowledged, and the new owner serves the shard without it.
      const onB = await get(pair.b.baseUrl, late.body.id as string);
      expect(onB.status, `A answered 200 for ${late.body.id as string}, which B, the shard's owner now, answers with ${onB.status}`).toBe(200);
    }
    expect(late.status, late.text).toBe(503);
    expect(late.body.error).toMatchObject({
      code: 'shard_not_owned',
      message: expect.stringContaining('a member of the service has seen owner generation 2 of shard 1, above this owner\'s 1: the shard has a newer owner; the change was not acknowledged') as unknown,
    });
    expect(m!.output()).toContain('refused to witness for an owner generation lower than one seen for the shard');

    // From then on A refuses the shard (the proxy's cue to re-read the map), and no longer lists it.
    const next = await add(pair.a.baseUrl, 'A again');
    expect(next.status, next.text).toBe(503);
    expect(next.body.error.code).toBe('shard_not_owned');
    expect((await pair.rpcA.shards()).open).toEqual([]);

    // The new owner serves what was acknowledged, and its own writes are witnessed (by M, at generation 2).
    const kept = await get(pair.b.baseUrl, before.body.id as string);
    expect(kept.status, kept.text).toBe(200);
    const onB = await add(pair.b.baseUrl, 'written by B, the new owner');
    expect(onB.status, onB.text).toBe(200);
    const rpcM = shardRpc(mAddr);
    try {
      expect((await rpcM.witnessed(1)).head?.seq).toBe(Number(opened.seq) + 1);
    } finally {
      rpcM.end();
    }
  });
});
