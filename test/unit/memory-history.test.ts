import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { storedBytes } from '../../enclave/memory/admission.js';
import { DELETED_VERSION_BYTES } from '../../enclave/memory/history.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import type { MemoryEvent, MemoryRecord, RestoredEvent } from '../../enclave/memory/types.js';
import { decodePayload, encodeEvent } from '../../enclave/storage/payloads.js';
import { DurableStore, type StoreOptions } from '../../enclave/storage/store.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';

let embedder: Embedder;
let dir: string;
const sealingKey = randomBytes(32);

beforeAll(async () => {
  embedder = await loadEmbedder({ name: 'static', modelsDir });
});
afterAll(async () => {
  await embedder?.close();
});
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'history-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const options = (memory: MemoryService): StoreOptions => ({ blobs: new FsBlobStore(dir), prefix: '', sealingKey, embedding: memory.embeddingModel, snapshotLogBytes: 1 << 30 });

describe('history counts against the stored bytes', () => {
  it('an update keeps the old version counted, the oldest dropped past the bound, a delete frees the content', async () => {
    const memory = new MemoryService(embedder, { history: { maxVersions: 2, maxDeleted: 10 } });
    const a = await memory.add({ tenant_id: 't', content: 'first version' });
    const one = storedBytes('first version', {});
    expect(memory.usage.storedBytes).toBe(one);
    await memory.update('t', a.id, { content: 'second, longer version' });
    const two = storedBytes('second, longer version', {});
    expect(memory.usage.storedBytes).toBe(one + two);
    await memory.update('t', a.id, { content: 'third' });
    // Two versions kept: the first is gone.
    expect(memory.historyOf('t', a.id)!.versions.map((v) => v.record?.content)).toEqual(['second, longer version', 'third']);
    expect(memory.usage.storedBytes).toBe(two + storedBytes('third', {}));
    await memory.delete('t', a.id, { keyId: 'k1' });
    expect(memory.usage.storedBytes).toBe(2 * DELETED_VERSION_BYTES);
    expect(memory.historyOf('t', a.id)).toMatchObject({ deleted: true, versions: [{ event: 'update' }, { event: 'delete', key_id: 'k1' }] });
    expect(JSON.stringify(memory.historyOf('t', a.id))).not.toMatch(/longer version|third/);
  });

  it('a tenant keeps at most maxDeleted deleted memories\' histories, the oldest forgotten first', async () => {
    const memory = new MemoryService(embedder, { history: { maxVersions: 5, maxDeleted: 2 } });
    const records = await memory.addMany([1, 2, 3].map((i) => ({ tenant_id: 't', content: `memory ${i}` })));
    expect(await memory.deleteAll('t')).toBe(3);
    expect(records.map((r) => memory.historyOf('t', r.id)?.deleted)).toEqual([undefined, true, true]);
    expect(memory.usage).toMatchObject({ memories: 0, storedBytes: 2 * 2 * DELETED_VERSION_BYTES });
  });

  it('an update refused for the stored bytes counts the new version whole (the old one stays in history)', async () => {
    const memory = new MemoryService(embedder, { capacity: { maxStoredBytes: 30 } });
    const a = await memory.add({ tenant_id: 't', content: 'twenty bytes of text' });
    await expect(memory.update('t', a.id, { content: 'twenty bytes of TEXT' })).rejects.toThrow(/capacity/);
    const unbounded = new MemoryService(embedder, { capacity: { maxStoredBytes: 30 }, history: { maxVersions: 1 } });
    const b = await unbounded.add({ tenant_id: 't', content: 'twenty bytes of text' });
    expect((await unbounded.update('t', b.id, { content: 'twenty bytes of TEXT' }))!.content).toBe('twenty bytes of TEXT');
  });
});

describe('a store written before history was kept', () => {
  it('encodes a change without change info exactly as before: tag, JSON length, the record, the vector', () => {
    const record: MemoryRecord = { id: 'mem_1', object: 'memory', tenant_id: 't', content: 'c', metadata: {}, created_at: 5 };
    const vector = Float32Array.of(1, 2);
    const json = Buffer.from(JSON.stringify(record));
    const length = Buffer.alloc(4);
    length.writeUInt32BE(json.length);
    expect(encodeEvent({ type: 'add', record, vector })).toEqual(Buffer.concat([Buffer.of(2), length, json, Buffer.from(vector.buffer)]));
    expect(encodeEvent({ type: 'delete', tenant_id: 't', id: 'mem_1' }).toString('utf8', 1)).toBe('{"tenant_id":"t","id":"mem_1"}');
    // And reads it back with no change info, as before.
    expect(decodePayload(encodeEvent({ type: 'add', record, vector }), 'x')).toEqual({ type: 'event', event: { type: 'add', record, vector } });
  });

  it('reads back every form of a change: a key id of hex or of text, extracted, past versions', () => {
    const record: MemoryRecord = { id: 'mem_1', object: 'memory', tenant_id: 't', content: 'c', metadata: { a: 1 }, created_at: 5, updated_at: 6 };
    const vector = Float32Array.of(1, 2, 3);
    const past = [{ event: 'add' as const, at: 5, key_id: null, extracted: false, record: { ...record, content: 'b' } }];
    for (const change of [{ at: 6, key_id: 'ab'.repeat(16), extracted: false }, { at: 7, key_id: 'open-token-name', extracted: true }, { at: 8, key_id: null, extracted: false }]) {
      for (const event of [{ type: 'add' as const, record, vector, change }, { type: 'add' as const, record, vector, change, past }, { type: 'update' as const, record, vector, change }]) {
        expect(decodePayload(encodeEvent(event), 'x')).toEqual({ type: 'event', event });
      }
    }
  });

  it('recovers from its snapshot and log, each memory\'s history starting from what they hold', async () => {
    // What the store held before: old-style changes (no change info), through a target that keeps no history.
    const held = new Map<string, { record: MemoryRecord; vector: Float32Array }>();
    const plain = {
      apply: (e: RestoredEvent) => {
        if (e.type === 'delete') held.delete(e.id);
        else if (e.type !== 'tombstone') held.set(e.record.id, { record: e.record, vector: e.vector! });
      },
      entries: () => held.values(),
    };
    const probe = new MemoryService(embedder);
    const old = await DurableStore.open(options(probe), plain);
    const [v1, v2, v3] = await embedder.embed(['kept memory', 'deleted memory', 'kept memory, changed']);
    const kept: MemoryRecord = { id: 'mem_kept', object: 'memory', tenant_id: 't', content: 'kept memory', metadata: {}, created_at: 100 };
    const gone: MemoryRecord = { id: 'mem_gone', object: 'memory', tenant_id: 't', content: 'deleted memory', metadata: {}, created_at: 101 };
    const commit = (events: MemoryEvent[]) => old.commit(events, () => events.forEach(plain.apply));
    await commit([{ type: 'add', record: kept, vector: v1 }, { type: 'add', record: gone, vector: v2 }]);
    await old.compact(); // a snapshot without tombstones, as before
    const changed = { ...kept, content: 'kept memory, changed', updated_at: 200 };
    await commit([{ type: 'update', record: changed, vector: v3 }, { type: 'delete', tenant_id: 't', id: 'mem_gone' }]);
    await old.close();

    const memory = new MemoryService(embedder);
    const store = await DurableStore.open(options(memory), memory);
    expect(store.recovery).toMatchObject({ snapshotGeneration: 2, events: 4 });
    expect(store.recovery.skipped).toBeUndefined();
    expect(memory.get('t', 'mem_kept')).toEqual(changed);
    expect(memory.historyOf('t', 'mem_kept')!.versions).toEqual([
      { event: 'add', at: 100, key_id: null, extracted: false, record: kept },
      { event: 'update', at: 200, key_id: null, extracted: false, record: changed },
    ]);
    expect(memory.historyOf('t', 'mem_gone')).toEqual({ deleted: true, versions: [{ event: 'add', at: 101, key_id: null, extracted: false }, { event: 'delete', at: 0, key_id: null, extracted: false }] });
    // And it goes on in the new format: a compaction and a restart keep the history.
    memory.useJournal(store);
    await memory.update('t', 'mem_kept', { metadata: { n: 1 } }, undefined, { keyId: 'k' });
    await store.compact();
    await store.close();
    const again = new MemoryService(embedder);
    const reopened = await DurableStore.open(options(again), again);
    expect(again.historyOf('t', 'mem_kept')).toEqual(memory.historyOf('t', 'mem_kept'));
    expect(again.historyOf('t', 'mem_gone')).toEqual(memory.historyOf('t', 'mem_gone'));
    expect(again.usage).toEqual(memory.usage);
    await reopened.close();
  });
});
