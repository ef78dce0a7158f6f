import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import type { MemoryRecord } from '../../enclave/memory/types.js';
import { CorruptStoreError } from '../../enclave/storage/errors.js';
import { DurableStore, type StoreOptions } from '../../enclave/storage/store.js';
import { storeFixture } from '../helpers/store-fixture.js';
import { flipByte, frameSpans } from '../helpers/sealed-files.js';

const fx = storeFixture('store');
const sealingKey = randomBytes(32);

const start = (options: Partial<StoreOptions> = {}) => fx.open(sealingKey, options);
const stop = (h: { store: DurableStore }) => fx.stop(h.store);

const words = ['apple', 'river', 'garden', 'piano', 'winter', 'castle', 'coffee', 'island', 'doctor', 'engine', 'forest', 'silver'];
/** Distinct sentences of known words, so each has its own direction. */
const sentence = (i: number) => `${words[i % 12]} ${words[Math.floor(i / 12) % 12]} ${words[Math.floor(i / 144) % 12]} number ${i}`;

function snapshotOf(memory: MemoryService): Array<{ record: MemoryRecord; vector: number[] }> {
  return [...memory.entries()].map(({ record, vector }) => ({ record, vector: [...vector] })).sort((a, b) => a.record.id.localeCompare(b.record.id));
}
const files = () => readdirSync(join(fx.dir)).sort();
const logPath = (g = 1) => join(fx.dir, `log-${String(g).padStart(12, '0')}.sealed`);

describe('durable store', () => {
  it('recovers adds and deletes, with the stored vectors (no re-embedding)', async () => {
    const a = await start();
    const records = await Promise.all(Array.from({ length: 20 }, (_, i) => a.memory.add({ tenant_id: i % 2 ? 'odd' : 'even', content: sentence(i), metadata: { n: i } })));
    expect(await a.memory.delete('even', records[4].id)).toBe(true);
    const before = snapshotOf(a.memory);
    await stop(a);

    const b = await start();
    expect(b.store.recovery).toMatchObject({ snapshotGeneration: null, logs: 1, events: 21 });
    expect(snapshotOf(b.memory)).toEqual(before);
    expect(b.memory.get('even', records[4].id)).toBeUndefined();
    expect(b.memory.get('odd', records[5].id)).toEqual(records[5]);
    const [top] = await b.memory.query({ tenant_id: 'odd', query: sentence(7), top_k: 1 });
    expect(top.record.id).toBe(records[7].id);
  });

  it('shares fsyncs between concurrent writes, and loses none of them', async () => {
    const a = await start();
    await Promise.all(Array.from({ length: 200 }, (_, i) => a.memory.add({ tenant_id: 't', content: sentence(i) })));
    const stats = a.store.stats();
    expect(stats.commits).toBe(200);
    expect(stats.syncs).toBeLessThan(200);
    expect(stats.largestBatch).toBeGreaterThan(1);
    await stop(a);
    expect(snapshotOf((await start()).memory)).toHaveLength(200);
  });

  it('cuts a torn last entry, keeps every earlier one, and goes on appending after it', async () => {
    const a = await start();
    const records: MemoryRecord[] = [];
    for (let i = 0; i < 5; i++) records.push(await a.memory.add({ tenant_id: 't', content: sentence(i) }));
    await stop(a);
    const size = statSync(logPath()).size;
    truncateSync(logPath(), size - 10);

    const b = await start();
    expect(b.store.recovery.cutTail).toMatchObject({ file: 'log-000000000001.sealed' });
    expect(snapshotOf(b.memory).map((e) => e.record.id).sort()).toEqual(records.slice(0, 4).map((r) => r.id).sort());
    const spans = frameSpans(readFileSync(logPath()));
    expect(statSync(logPath()).size).toBe(spans[spans.length - 1][1]);
    const later = await b.memory.add({ tenant_id: 't', content: 'after the cut' });
    await stop(b);

    const c = await start();
    expect(c.store.recovery.cutTail).toBeUndefined();
    expect(c.memory.get('t', later.id)).toEqual(later);
    expect(snapshotOf(c.memory)).toHaveLength(5);
  });

  it('cuts garbage or a corrupt entry at the end of the log', async () => {
    const a = await start();
    await a.memory.add({ tenant_id: 't', content: 'kept' });
    const last = await a.memory.add({ tenant_id: 't', content: 'damaged' });
    await stop(a);
    // The last frame: the last change (each later start appends a fence after it, and damage before a valid frame is refused).
    const spans = frameSpans(readFileSync(logPath()));
    flipByte(logPath(), spans[spans.length - 1][0] + 50);
    const b = await start();
    expect(b.memory.get('t', last.id)).toBeUndefined();
    expect(snapshotOf(b.memory).map((e) => e.record.content)).toEqual(['kept']);
    await stop(b);

    writeFileSync(logPath(), Buffer.concat([readFileSync(logPath()), Buffer.from('SBX1\x00\x00')]));
    const c = await start();
    expect(c.store.recovery.cutTail).toMatchObject({ bytes: 6 });
    expect(snapshotOf(c.memory).map((e) => e.record.content)).toEqual(['kept']);
  });

  it('refuses a log changed in the middle, or opened with the wrong key', async () => {
    const a = await start();
    for (let i = 0; i < 4; i++) await a.memory.add({ tenant_id: 't', content: sentence(i) });
    await stop(a);
    const pristine = readFileSync(logPath());

    flipByte(logPath(), frameSpans(pristine)[2][0] + 40);
    await expect(start()).rejects.toThrow(/log-000000000001.sealed: a frame that does not authenticate at byte \d+ is followed by valid frames/);

    writeFileSync(logPath(), pristine);
    await expect(start({ sealingKey: randomBytes(32) })).rejects.toThrow(/sealed with a different key/);

    writeFileSync(logPath(), pristine);
    const memory = await start();
    expect(snapshotOf(memory.memory)).toHaveLength(4);
  });

  it('snapshots and compacts, then recovers from the snapshot and the log after it', async () => {
    const a = await start({ snapshotLogBytes: 4096 });
    const records: MemoryRecord[] = [];
    for (let i = 0; i < 60; i++) records.push(await a.memory.add({ tenant_id: `t${i % 3}`, content: sentence(i), metadata: { source: 'unit' } }));
    for (const r of records.slice(0, 10)) await a.memory.delete(r.tenant_id, r.id);
    const before = snapshotOf(a.memory);
    await stop(a);
    // Read once stopped: the last batch may start a new log after its caller has its answer.
    const stats = a.store.stats();
    expect(stats.snapshots).toBeGreaterThan(0);
    // One snapshot and the one log after it: older logs were deleted.
    const names = files();
    expect(names).toEqual(['log-' + String(stats.generation).padStart(12, '0') + '.sealed', 'snapshot.sealed']);

    const b = await start({ snapshotLogBytes: 4096 });
    expect(b.store.recovery.snapshotGeneration).toBe(stats.generation);
    expect(snapshotOf(b.memory)).toEqual(before);
    expect(before).toHaveLength(50);
  });

  it('refuses a changed, shortened, missing or stale snapshot', async () => {
    const a = await start();
    for (let i = 0; i < 5; i++) await a.memory.add({ tenant_id: 't', content: sentence(i) });
    await a.store.compact();
    await a.memory.add({ tenant_id: 't', content: 'after the snapshot' });
    await stop(a);
    expect(files()).toEqual(['log-000000000002.sealed', 'snapshot.sealed']);
    const snapshot = join(fx.dir, 'snapshot.sealed');
    const pristine = readFileSync(snapshot);

    flipByte(snapshot, frameSpans(pristine)[3][0] + 45);
    await expect(start()).rejects.toThrow(CorruptStoreError);

    writeFileSync(snapshot, pristine.subarray(0, frameSpans(pristine).at(-1)![0]));
    await expect(start()).rejects.toThrow(/snapshot.sealed is incomplete/);

    rmSync(snapshot);
    await expect(start()).rejects.toThrow(/log-000000000001.sealed is missing/);

    // A newer compaction, then the old snapshot put back: its log is gone.
    writeFileSync(snapshot, pristine);
    const b = await start();
    await b.store.compact();
    await stop(b);
    writeFileSync(snapshot, pristine);
    await expect(start()).rejects.toThrow(/log-000000000002.sealed is missing/);
  });

  it('refuses a missing log', async () => {
    const a = await start();
    await a.memory.add({ tenant_id: 't', content: 'one' });
    await a.store.compact();
    await stop(a);
    rmSync(logPath(2));
    await expect(start()).rejects.toThrow(/log-000000000002.sealed is missing \(snapshot.sealed is followed by no log\)/);

  });

  it('refuses a log renamed or copied to another generation', async () => {
    const c = await start();
    await c.memory.add({ tenant_id: 't', content: 'two' });
    await c.store.compact();
    await stop(c);
    copyFileSync(logPath(2), logPath(3));
    await expect(start()).rejects.toThrow(/log-000000000003.sealed holds log 2: it was renamed or copied/);
  });

  it('recovers from a crash at any step of a compaction', async () => {
    const a = await start();
    const first = await a.memory.add({ tenant_id: 't', content: 'before compaction' });
    const log1 = readFileSync(logPath(1));
    // Make the snapshot fail, as if the enclave died before writing it: two logs remain.
    mkdirSync(join(fx.dir, 'snapshot.sealed.tmp'));
    await expect(a.store.compact()).rejects.toThrow(/snapshot\.sealed\.tmp/);
    const second = await a.memory.add({ tenant_id: 't', content: 'after the new log' });
    await stop(a);
    expect(files()).toEqual(['log-000000000001.sealed', 'log-000000000002.sealed', 'snapshot.sealed.tmp']);
    rmSync(join(fx.dir, 'snapshot.sealed.tmp'), { recursive: true });

    const b = await start();
    expect(b.store.recovery).toMatchObject({ snapshotGeneration: null, logs: 2 });
    expect(b.memory.get('t', first.id)).toEqual(first);
    expect(b.memory.get('t', second.id)).toEqual(second);
    await b.store.compact();
    await stop(b);

    // The snapshot is in place but the old log was not yet deleted: it is covered, so dropped.
    writeFileSync(logPath(1), log1);
    writeFileSync(join(fx.dir, 'snapshot.sealed.tmp'), 'half a snapshot');
    // The host store sweeps what an interrupted put left when it starts again.
    await fx.host().removeLeftovers();
    const c = await start();
    expect(files()).toEqual(['log-000000000003.sealed', 'snapshot.sealed']);
    expect(snapshotOf(c.memory).map((e) => e.record.id).sort()).toEqual([first.id, second.id].sort());
  });
});

describe('a logged change that fails to apply at recovery', () => {
  it('is skipped by name (kind, id, place; no content), and everything else is recovered and the store goes on', async () => {
    const a = await start();
    const records = [];
    for (let i = 0; i < 4; i++) records.push(await a.memory.add({ tenant_id: 't', content: sentence(i) }));
    await stop(a);

    // A target whose apply throws for one change, as V8 did with "Map maximum size exceeded".
    const memory = new MemoryService(fx.embedder);
    const bad = records[1].id;
    const target = {
      apply: (event: Parameters<MemoryService['apply']>[0]) => {
        if (event.type === 'add' && event.record.id === bad) throw new RangeError('Map maximum size exceeded');
        memory.apply(event);
      },
      entries: () => memory.entries(),
    };
    const lines: unknown[] = [];
    const log = { error: (fields: unknown) => lines.push(fields), warn: () => {}, info: () => {} } as unknown as StoreOptions['log'];
    const store = await DurableStore.open({ blobs: fx.host(), prefix: '', sealingKey, embedding: memory.embeddingModel, snapshotLogBytes: 1 << 30, log }, target);
    fx.track(store);
    memory.useJournal(store);
    expect(store.recovery.skipped).toEqual([{ change: 'add', id: bad, at: 'log-000000000001.sealed frame 2', reason: 'RangeError: Map maximum size exceeded' }]);
    expect(lines).toEqual([expect.objectContaining({ change: 'add', id: bad })]);
    expect(JSON.stringify(lines)).not.toContain(records[1].content);
    expect(memory.get('t', bad)).toBeUndefined();
    for (const i of [0, 2, 3]) expect(memory.get('t', records[i].id)).toEqual(records[i]);
    const more = await memory.add({ tenant_id: 't', content: sentence(9) });
    expect(memory.get('t', more.id)).toEqual(more);
  });
});

describe('the chain of heads across restarts (issue 31)', () => {
  it('places every head it made, after compactions and a restart; a copy restored and written past a head says no for it', async () => {
    const a = await start();
    const heads = [a.store.head];
    for (let i = 0; i < 6; i++) {
      await a.memory.add({ tenant_id: 't', content: sentence(i) });
      heads.push(a.store.head);
    }
    await a.store.compact();
    const copy = mkdtempSync(join(tmpdir(), 'store-copy-'));
    for (const name of files()) copyFileSync(join(fx.dir, name), join(copy, name));
    for (let i = 6; i < 10; i++) {
      await a.memory.add({ tenant_id: 't', content: sentence(i) });
      heads.push(a.store.head);
    }
    await a.store.compact();
    await a.memory.add({ tenant_id: 't', content: sentence(10) });
    heads.push(a.store.head);
    const storeId = a.store.storeId;
    await stop(a);

    // The snapshot kept heads 0…10; the log after it adds 11.
    const b = await start();
    expect(b.store.storeId).toBe(storeId);
    expect(b.store.headChain()).toMatchObject({ from: 0, heads: 12 });
    for (const head of heads) expect(b.store.ancestry(head)).toBe('yes');
    expect(b.store.ancestry({ seq: 12, hash: heads[11].hash })).toBe('no');
    await stop(b);

    // The host restores the copy made at head 6, and other writes push it to seq 11.
    rmSync(fx.dir, { recursive: true, force: true });
    mkdirSync(fx.dir);
    for (const name of readdirSync(copy)) copyFileSync(join(copy, name), join(fx.dir, name));
    rmSync(copy, { recursive: true, force: true });
    const fork = await start();
    expect(fork.store.head).toEqual(heads[6]);
    for (let i = 0; i < 5; i++) await fork.memory.add({ tenant_id: 'other', content: sentence(100 + i) });
    expect(fork.store.head.seq).toBe(11);
    expect(fork.store.ancestry(heads[6])).toBe('yes');
    expect(fork.store.ancestry(heads[9])).toBe('no');
    expect(fork.store.ancestry(heads[11])).toBe('no');
  });
});
