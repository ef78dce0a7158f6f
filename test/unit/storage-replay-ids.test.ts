import { randomBytes } from 'node:crypto';
import { cpSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../common/errors.js';
import { MemoryService, type ChangeAuthor } from '../../enclave/memory/memory-service.js';
import type { ReplayMark } from '../../enclave/memory/types.js';
import { CorruptStoreError } from '../../enclave/storage/errors.js';
import { decodePayload, encodeEvent, encodeReplayIds, encodeReplayMarked } from '../../enclave/storage/payloads.js';
import { ReplayIds } from '../../enclave/storage/replay-ids.js';
import { deriveStorageKey, readSealedFile } from '../../enclave/storage/sealed-file.js';
import { ShardedStore } from '../../enclave/storage/sharded-store.js';
import { shardOf } from '../../protocol/shards.js';
import { storeFixture } from '../helpers/store-fixture.js';

/**
 * Replay ids kept with the changes of sealed requests (storage/replay-ids.ts, payloads.ts 0x0c
 * and 0x0d), in one process: what the log and snapshots keep, what a store opened later hands
 * to the enclave's replay guard and refuses itself. The attack through the real processes is
 * test/integration/sealed-replay.test.ts.
 */
const fx = storeFixture('replay-ids');
const sealingKey = randomBytes(32);
const WINDOW_MS = 5 * 60 * 1000;
const sealedBy = (id: string, expiresAt = Date.now() + WINDOW_MS): ChangeAuthor => ({ replay: { id, expires_at: expiresAt } });

async function open(key: Uint8Array = sealingKey) {
  const recovered: ReplayMark[] = [];
  const opened = await fx.open(key, { onReplayIds: (marks) => recovered.push(...marks) });
  return { ...opened, recovered: () => recovered.map((mark) => mark.id).sort() };
}

async function openSharded() {
  const recovered: ReplayMark[] = [];
  const memory = new MemoryService(fx.embedder);
  const store = fx.track(await ShardedStore.open({
    blobs: fx.host(), sealingKey, embedding: memory.embeddingModel, snapshotLogBytes: 1 << 30, shards: 2, onReplayIds: (marks) => recovered.push(...marks),
  }, memory));
  memory.useJournal(store);
  return { memory, store, recovered: () => recovered.map((mark) => mark.id).sort() };
}

const outcome = (call: Promise<unknown>) => call.then(() => 'let through', (err: unknown) => (err instanceof ApiError ? `${err.status} ${err.code}` : String(err)));
const contents = (memory: MemoryService, tenant: string) => memory.list(tenant, 100)!.data.map((r) => r.content).sort();

/** Each change entry of a log segment: its replay id, or null without one. */
async function marksIn(file: string): Promise<Array<string | null>> {
  const { payloads } = await readSealedFile(readFileSync(join(fx.dir, file)), 'log', deriveStorageKey(sealingKey), file, { allowTail: false });
  return payloads.map((payload, i) => decodePayload(payload, `${file} frame ${i}`))
    .flatMap((p) => (p.type === 'event' || p.type === 'sealed' ? [p.replay?.id ?? null] : []));
}

describe('replay ids in the log', () => {
  it('a sealed change is logged with its id, once per batch; a store opened later hands the ids over and refuses a change carrying one (409), writing nothing', async () => {
    const a = await open();
    await a.memory.addMany([{ tenant_id: 't', content: 'batch one' }, { tenant_id: 't', content: 'batch two' }], undefined, undefined, sealedBy('batch'));
    const single = await a.memory.add({ tenant_id: 't', content: 'single' }, undefined, undefined, sealedBy('single'));
    // One request may make several changes (a chat's tool calls): this store takes its id again.
    await a.memory.update('t', single.id, { content: 'single, updated' }, undefined, sealedBy('single'));
    await a.memory.add({ tenant_id: 't', content: 'plain' });
    expect(await marksIn('log-000000000001.sealed')).toEqual(['batch', null, 'single', 'single', null]);
    await fx.stop(a.store);

    const b = await open();
    expect(b.recovered()).toEqual(['batch', 'single']);
    const { seq } = b.store.head;
    expect(await outcome(b.memory.add({ tenant_id: 't', content: 'batch one' }, undefined, undefined, sealedBy('batch')))).toBe('409 sealed_request_replayed');
    expect(await outcome(b.memory.update('t', single.id, { content: 'single' }, undefined, sealedBy('single')))).toBe('409 sealed_request_replayed');
    expect(await outcome(b.memory.delete('t', single.id, sealedBy('single')))).toBe('409 sealed_request_replayed');
    expect(b.store.head.seq).toBe(seq);
    expect(contents(b.memory, 't')).toEqual(['batch one', 'batch two', 'plain', 'single, updated']);
    expect(await outcome(b.memory.add({ tenant_id: 't', content: 'fresh' }, undefined, undefined, sealedBy('fresh')))).toBe('let through');
  });

  it('compaction folds the marked entries into a snapshot that keeps the ids still in their window, and no other', async () => {
    const a = await open();
    await a.memory.add({ tenant_id: 't', content: 'live' }, undefined, undefined, sealedBy('live'));
    await a.memory.add({ tenant_id: 't', content: 'expired' }, undefined, undefined, sealedBy('expired', Date.now() - 1));
    await a.store.compact();
    expect(readdirSync(fx.dir).sort()).toEqual(['log-000000000002.sealed', 'snapshot.sealed']);
    await fx.stop(a.store);

    const b = await open();
    expect(b.recovered()).toEqual(['live']);
    expect(await outcome(b.memory.add({ tenant_id: 't', content: 'live' }, undefined, undefined, sealedBy('live')))).toBe('409 sealed_request_replayed');
    // Its envelope is refused as expired before it gets here (api/replay-guard.ts): nothing to keep.
    expect(await outcome(b.memory.add({ tenant_id: 't', content: 'again' }, undefined, undefined, sealedBy('expired')))).toBe('let through');
    // A second compaction carries the snapshot's ids over.
    await b.store.compact();
    await fx.stop(b.store);
    expect((await open()).recovered()).toEqual(['expired', 'live']);
  });

  it('a keyed tenant\'s change: its id is read while the tenant is locked, and its entry still opens with the key, before and after a compaction', async () => {
    const secret = randomBytes(32);
    const a = await open();
    a.memory.admitTenant('k', secret);
    await a.memory.add({ tenant_id: 'k', content: 'sealed under the tenant key' }, undefined, undefined, sealedBy('keyed'));
    await fx.stop(a.store);

    const b = await open();
    expect(b.recovered()).toEqual(['keyed']);
    // Compacted while locked: the entry is carried over as it is, its id apart.
    await b.store.compact();
    await fx.stop(b.store);
    const c = await open();
    expect(c.recovered()).toEqual(['keyed']);
    c.memory.admitTenant('k', secret);
    expect(contents(c.memory, 'k')).toEqual(['sealed under the tenant key']);
  });

  it('a batch across shards is refused whole, before anything is written, when one shard\'s log holds its id', async () => {
    const [inZero, inOne] = [0, 1].map((shard) => { for (let i = 0; ; i++) if (shardOf(`s-${i}`, 2) === shard) return `s-${i}`; });
    const a = await openSharded();
    await a.memory.add({ tenant_id: inZero, content: 'first' }, undefined, undefined, sealedBy('x'));
    await fx.stop(a.store);

    const b = await openSharded();
    expect(b.recovered()).toEqual(['x']);
    const refused = b.memory.addMany([{ tenant_id: inOne, content: 'other shard' }, { tenant_id: inZero, content: 'again' }], undefined, undefined, sealedBy('x'));
    expect(await outcome(refused)).toBe('409 sealed_request_replayed');
    expect(contents(b.memory, inOne)).toEqual([]);
    expect(b.store.head(1).seq).toBe(0);
    expect(contents(b.memory, inZero)).toEqual(['first']);
  });
});

describe('a store written before replay ids (test/fixtures/store-before-replay-ids)', () => {
  it('opens with no id, and keeps those of the sealed changes made after, through a compaction', async () => {
    cpSync(join(import.meta.dirname, '../fixtures/store-before-replay-ids'), fx.dir, { recursive: true });
    const key = Buffer.alloc(32, 9);
    const a = await open(key);
    expect(a.recovered()).toEqual([]);
    const all = ['Fuel is in the red can', 'The boat is called Wanda II', 'The harbour closes at nine'];
    expect(contents(a.memory, 'old')).toEqual(all);
    await a.memory.add({ tenant_id: 'old', content: 'The mooring fee is due on Friday' }, undefined, undefined, sealedBy('after'));
    await a.store.compact();
    await fx.stop(a.store);

    const b = await open(key);
    expect(b.recovered()).toEqual(['after']);
    expect(contents(b.memory, 'old')).toEqual([...all, 'The mooring fee is due on Friday'].sort());
  });
});

describe('replay id entries', () => {
  const event = encodeEvent({ type: 'delete', tenant_id: 't', id: 'mem_1' });
  const mark = { id: 'k'.repeat(44), expires_at: 1_800_000_000_000 };

  it('round-trip: a change with its mark, and a snapshot\'s ids', () => {
    expect(decodePayload(encodeReplayMarked(mark, event), 'x')).toEqual({ type: 'event', event: { type: 'delete', tenant_id: 't', id: 'mem_1' }, replay: mark });
    expect(decodePayload(encodeReplayIds([mark, { id: 'b', expires_at: 1 }]), 'x')).toEqual({ type: 'replays', marks: [mark, { id: 'b', expires_at: 1 }] });
  });

  it('refuses a mark on a mark, on something that is not a change, cut short, or none at all', () => {
    for (const payload of [
      encodeReplayMarked(mark, encodeReplayMarked(mark, event)),
      encodeReplayMarked(mark, encodeReplayIds([mark])),
      encodeReplayMarked(mark, Buffer.from([0x04, ...Buffer.from('{"count":0}')])),
      encodeReplayMarked(mark, event).subarray(0, 20),
      encodeReplayIds([mark]).subarray(0, 1),
    ]) expect(() => decodePayload(payload, 'x')).toThrow(CorruptStoreError);
  });
});

describe('ReplayIds', () => {
  it('keeps each id until its window ends, and forgets it then', () => {
    let now = 1000;
    const ids = new ReplayIds(() => now);
    ids.add({ id: 'a', expires_at: 1500 });
    ids.add({ id: 'b', expires_at: 2000 });
    ids.add({ id: 'gone', expires_at: 999 });
    expect([ids.has('a'), ids.has('b'), ids.has('gone'), ids.size]).toEqual([true, true, false, 2]);
    now = 1501;
    expect(ids.has('a')).toBe(false);
    expect([...ids.live()]).toEqual([{ id: 'b', expires_at: 2000 }]);
    ids.add({ id: 'c', expires_at: 3000 });
    expect(ids.size).toBe(2);
  });
});
