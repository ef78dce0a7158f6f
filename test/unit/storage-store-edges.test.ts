import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { BlobInfo, BlobStore } from '../../common/blob-store.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { CorruptStoreError, SupersededError } from '../../enclave/storage/errors.js';
import { logName } from '../../enclave/storage/log-file.js';
import { decodePayload, encodeEnd, encodeEvent, encodeHeader, FORMAT_VERSION, type FileMeta } from '../../enclave/storage/payloads.js';
import { deriveStorageKey, newHeader, readSealedFile, sealFrame } from '../../enclave/storage/sealed-file.js';
import { advanceHead, genesisHead } from '../../enclave/storage/state-head.js';
import { writeSnapshot } from '../../enclave/storage/snapshot.js';
import { DurableStore, type StoreOptions } from '../../enclave/storage/store.js';
import { storeFixture } from '../helpers/store-fixture.js';

/**
 * The edges of the durable store (enclave/storage/store.ts) that its main tests pass by: what a
 * host that lists a blob but will not hand it over, or hands over segments whose header the
 * enclave never wrote, gets at start; what the store tells the operator in its log; and the
 * sizes that time compaction. Each case is one a mutation of store.ts left unnoticed.
 */
const fx = storeFixture('store-edges');
const sealingKey = randomBytes(32);
const key = deriveStorageKey(sealingKey);

/** What the store logged, level by level: [level, fields, message]; `logged` waits for a message. */
function recorder() {
  const lines: Array<[string, Record<string, unknown>, string]> = [];
  const waiting: Array<{ message: string; resolve: () => void }> = [];
  const at = (level: string) => (fields: Record<string, unknown>, message: string) => {
    lines.push([level, fields, message]);
    for (const w of waiting.filter((w) => w.message === message)) w.resolve();
  };
  const logged = (message: string) => (lines.some((l) => l[2] === message) ? Promise.resolve() : new Promise<void>((resolve) => waiting.push({ message, resolve })));
  return { lines, logged, log: { error: at('error'), warn: at('warn'), info: at('info') } as unknown as StoreOptions['log'] };
}

const start = (options: Partial<StoreOptions> = {}) => fx.open(sealingKey, options);
const stop = (store: DurableStore) => fx.stop(store);
const refusal = (options: Partial<StoreOptions> = {}) => start(options).then(() => 'opened', (err: Error) => {
  expect(err).toBeInstanceOf(CorruptStoreError);
  return err.message;
});
const files = () => readdirSync(fx.dir).sort();
const contents = (memory: MemoryService) => [...memory.entries()].map((e) => e.record.content).sort();

/**
 * A host store that lists every blob but hands `name` over only its first `reads` times
 * (the store reads a segment twice: its header first, then the whole of it).
 */
function withholding(name: string, reads: number): BlobStore {
  const blobs = fx.host();
  let count = 0;
  return new Proxy(blobs, {
    get(target, prop, receiver) {
      if (prop === 'read') {
        return async (n: string) => (n === name && count++ >= reads ? undefined : target.read(n));
      }
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** A segment's meta as the store writes it, with `changes` over it. */
function segmentMeta(changes: Partial<FileMeta> = {}): FileMeta & { head: ReturnType<typeof genesisHead> } {
  const storeId = 'ab'.repeat(16);
  return {
    store_id: storeId, format: FORMAT_VERSION, kind: 'log', generation: 1, embedding_model: fx.embedder.id, dimension: fx.embedder.dimension,
    embedding_sha256: fx.embedder.sha256, created_at: 1_700_000_000, head: genesisHead(storeId), max_bytes: 1 << 20, ...changes,
  } as FileMeta & { head: ReturnType<typeof genesisHead> };
}

/** Writes log `generation` sealed under the store's key: its header frame, then `payloads` as frames. */
async function forgeSegment(meta: FileMeta, payloads: Buffer[] = [], generation = 1) {
  const header = newHeader('log', key);
  const frames = [encodeHeader(meta), ...payloads].map((p, seq) => sealFrame(key, header, seq, p));
  await fx.host().put(logName(generation), Buffer.concat([header, ...frames]));
}

describe('blobs the host lists but does not hand over', () => {
  it('a snapshot, a segment\'s header, or the rest of a segment: refused, naming the blob', async () => {
    const a = await start();
    await a.memory.add({ tenant_id: 't', content: 'kept' });
    await a.store.compact();
    await a.memory.add({ tenant_id: 't', content: 'after the snapshot' });
    await stop(a.store);
    expect(files()).toEqual(['log-000000000002.sealed', 'snapshot.sealed']);

    const listedBut = 'was listed by the host store but cannot be read';
    expect(await refusal({ blobs: withholding('snapshot.sealed', 0) })).toBe(`snapshot.sealed ${listedBut}`);
    expect(await refusal({ blobs: withholding('log-000000000002.sealed', 0) })).toBe(`log-000000000002.sealed ${listedBut}`);
    expect(await refusal({ blobs: withholding('log-000000000002.sealed', 1) })).toBe(`log-000000000002.sealed ${listedBut}`);
    expect(contents((await start()).memory)).toEqual(['after the snapshot', 'kept']);
  });
});

describe('segment headers the enclave did not write', () => {
  it('refuses a future format, a snapshot\'s kind, a generation or size limit that is not a positive integer, and a chained file without store or head', async () => {
    const cases: Array<[Partial<FileMeta>, string]> = [
      [{ format: 5 }, 'log-000000000001.sealed has format 5; this enclave reads formats 1, 2, 3, 4'],
      [{ kind: 'snapshot' }, 'log-000000000001.sealed is a snapshot, not a log'],
      [{ generation: 0 }, 'log-000000000001.sealed has no valid generation'],
      [{ generation: 1.5 }, 'log-000000000001.sealed has no valid generation'],
      [{ max_bytes: 0 }, 'log-000000000001.sealed has no valid size limit'],
      [{ max_bytes: 2.5 }, 'log-000000000001.sealed has no valid size limit'],
      [{ store_id: undefined }, 'log-000000000001.sealed has no store id or state head'],
      [{ head: undefined }, 'log-000000000001.sealed has no store id or state head'],
    ];
    for (const [changes, reason] of cases) {
      await forgeSegment(segmentMeta(changes));
      expect(await refusal(), JSON.stringify(changes)).toBe(reason);
      rmSync(join(fx.dir, logName(1)));
    }
    // The same segment, as the store writes it, opens: each refusal above is the one change's.
    await forgeSegment(segmentMeta());
    expect((await start()).store.recovery).toMatchObject({ logs: 1, events: 0, head: genesisHead('ab'.repeat(16)) });
  });

  it('refuses a segment whose first frame is not its header, or that holds an entry that is not a change', async () => {
    const record = { id: 'mem_1', object: 'memory' as const, tenant_id: 't', content: 'x', metadata: {}, created_at: 1 };
    const change = encodeEvent({ type: 'add', record, vector: new Float32Array(fx.embedder.dimension) });
    const header = newHeader('log', key);
    await fx.host().put(logName(1), Buffer.concat([header, sealFrame(key, header, 0, change)]));
    expect(await refusal()).toBe('log-000000000001.sealed has no log header');
    rmSync(join(fx.dir, logName(1)));

    await forgeSegment(segmentMeta(), [change, encodeEnd(1)]);
    expect(await refusal()).toBe('log-000000000001.sealed holds an entry that is not a change');
  });
});

/** A host store whose appends, or puts of the blobs named, fail (a disk gone bad) while `down` says so. */
function flaky(down: { appends?: boolean; puts?: (name: string) => boolean }): BlobStore {
  const blobs = fx.host();
  return new Proxy(blobs, {
    get(target, prop, receiver) {
      if (prop === 'append') {
        return (name: string, offset: number, data: Uint8Array) => (down.appends ? Promise.reject(new Error('EIO: i/o error, write')) : target.append(name, offset, data));
      }
      if (prop === 'put') {
        return (name: string, ...rest: Parameters<BlobStore['put']> extends [string, ...infer R] ? R : never) =>
          (down.puts?.(name) ? Promise.reject(new Error('EIO: i/o error, open')) : target.put(name, ...rest));
      }
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe('what the store tells its operator', () => {
  it('a write the host store fails: refused (503), logged and reported; the next one is stored', async () => {
    const down = { appends: false };
    const { lines, log } = recorder();
    const failures: Error[] = [];
    const fenced: Error[] = [];
    const a = await start({ blobs: flaky(down), log, onFailure: (err) => failures.push(err), onFenced: (err) => fenced.push(err) });
    down.appends = true;
    await expect(a.memory.add({ tenant_id: 't', content: 'lost' })).rejects.toMatchObject({ status: 503, code: 'storage_unavailable' });
    expect(failures.map((e) => e.message)).toEqual(['EIO: i/o error, write']);
    expect(lines).toEqual([['error', { err: 'EIO: i/o error, write' }, 'memory log write failed; the change was refused (503) and later writes try again']]);
    down.appends = false;
    await a.memory.add({ tenant_id: 't', content: 'stored' });
    expect(a.store.takenOver).toBe(false);
    expect(fenced).toEqual([]);
    await stop(a.store);
    expect(contents((await start()).memory)).toEqual(['stored']);
  });

  it('another writer: logged and reported once, not as a failed write, and every later change refused', async () => {
    const { lines, log } = recorder();
    const failures: Error[] = [];
    const fenced: Error[] = [];
    // One host store serves both writers, as one host store process does.
    const blobs = fx.host();
    const old = await start({ blobs, log, onFailure: (err) => failures.push(err), onFenced: (err) => fenced.push(err) });
    await old.memory.add({ tenant_id: 't', content: 'before' });
    await start({ blobs });
    await expect(old.memory.add({ tenant_id: 't', content: 'after' })).rejects.toMatchObject({ status: 503 });
    await expect(old.memory.add({ tenant_id: 't', content: 'and after' })).rejects.toMatchObject({
      status: 503, code: 'shard_not_owned',
      message: 'the memory store is no longer owned by this enclave (owner generation 0): another owner has written it since; the change was not saved',
    });
    await expect(old.store.compact()).rejects.toThrow();
    expect(fenced).toHaveLength(1);
    expect(failures).toEqual([]);
    expect(lines).toEqual([['error', { store: 'the memory store', generation: 0, err: fenced[0].message }, 'another writer has written the memory store since this enclave opened it: this enclave no longer owns it and refuses every change to it from now on (503 shard_not_owned)']]);
  });

  it('a new segment the host store cannot make: compaction postponed, logged, and done after the next batch once it can', async () => {
    const down = { puts: (name: string) => name === logName(2) };
    const { lines, logged, log } = recorder();
    const a = await start({ blobs: flaky(down), log, snapshotLogBytes: 1 });
    await a.memory.add({ tenant_id: 't', content: 'one' });
    // Compaction is tried after the batch, once its change is acknowledged.
    await logged('could not start a new memory log; compaction postponed');
    expect(lines).toContainEqual(['error', { err: `cannot create ${logName(2)}: EIO: i/o error, open` }, 'could not start a new memory log; compaction postponed']);
    expect(a.store.stats()).toMatchObject({ generation: 1, snapshots: 0 });
    down.puts = () => false;
    await a.memory.add({ tenant_id: 't', content: 'two' });
    await stop(a.store);
    expect(a.store.stats()).toMatchObject({ generation: 2, snapshots: 1 });
    expect(lines).toContainEqual(['info', { generation: 2, memories: 2, bytes: a.store.stats().lastSnapshotBytes, ms: expect.any(Number) }, 'memory snapshot written; older logs deleted']);
    expect(files()).toEqual([logName(2), 'snapshot.sealed']);
  });

  it('a snapshot the host store cannot write: compact() fails, logged, the older logs kept', async () => {
    const down = { puts: (name: string) => name === 'snapshot.sealed' };
    const { lines, log } = recorder();
    const a = await start({ blobs: flaky(down), log });
    await a.memory.add({ tenant_id: 't', content: 'one' });
    await expect(a.store.compact()).rejects.toThrow('EIO: i/o error, open');
    expect(lines).toEqual([['error', { err: 'EIO: i/o error, open', generation: 2 }, 'memory snapshot failed; older logs kept']]);
    expect(a.store.takenOver).toBe(false);
    await a.memory.add({ tenant_id: 't', content: 'two' });
    await stop(a.store);
    expect(files()).toEqual([logName(1), logName(2)]);
    expect(contents((await start()).memory)).toEqual(['one', 'two']);
  });

  it('a cut tail is logged with where it was and how long; a store from before the chain is logged as rewritten', async () => {
    const a = await start();
    await a.memory.add({ tenant_id: 't', content: 'kept' });
    await stop(a.store);
    const blobs = fx.host();
    const [{ size }] = await blobs.list(logName(1));
    await blobs.append(logName(1), size, Buffer.from('SBX1\x00\x00\x00'));
    const cut = recorder();
    const b = await start({ log: cut.log });
    expect(cut.lines).toEqual([['warn', { file: logName(1), offset: size, bytes: 7 }, 'cut a torn or corrupt tail from the memory log (an interrupted append, or damage after the last good entry)']]);
    await stop(b.store);
    rmSync(join(fx.dir, logName(1)));

    await forgeSegment(segmentMeta({ format: 2, store_id: undefined, head: undefined }));
    const legacy = recorder();
    const c = await start({ log: legacy.log });
    expect(legacy.lines[0]).toEqual(['info', { format: FORMAT_VERSION }, 'rewriting the memory store in the current format']);
    expect(c.store.recovery.snapshotGeneration).toBeNull();
    expect(files()).toEqual([logName(2), 'snapshot.sealed']);
  });
});

describe('a closed store, its figures, and when it compacts', () => {
  it('refuses a change once closed', async () => {
    const a = await start();
    await stop(a.store);
    await expect(a.memory.add({ tenant_id: 't', content: 'too late' })).rejects.toThrow('the memory store is closed');
  });

  it('counts its segment\'s bytes, its snapshots and the last one\'s size as they are on disk', async () => {
    const a = await start();
    for (let i = 0; i < 3; i++) await a.memory.add({ tenant_id: 't', content: `memory ${i}` });
    await a.store.compact();
    await a.memory.add({ tenant_id: 't', content: 'after' });
    const stats = a.store.stats();
    await stop(a.store);
    const listed = Object.fromEntries((await fx.host().list('')).map((b) => [b.name, b.size]));
    expect(stats).toMatchObject({ generation: 2, snapshots: 1, logBytes: listed[logName(2)], lastSnapshotBytes: listed['snapshot.sealed'], commits: 4 });
    expect(a.store.headChain()).toEqual({ from: 0, heads: 5, bytes: expect.any(Number) });
  });

  it('starts a new segment once the log passes the larger of the limit and the last snapshot, not before', async () => {
    const a = await start({ snapshotLogBytes: 1 << 30 });
    for (let i = 0; i < 40; i++) await a.memory.add({ tenant_id: 't', content: `memory number ${i}` });
    await a.store.compact();
    const snapshotBytes = a.store.stats().lastSnapshotBytes;
    await stop(a.store);
    // A limit far below the snapshot: the snapshot's size is what counts, read as it streams in.
    const b = await start({ snapshotLogBytes: 1 });
    expect(b.store.stats().lastSnapshotBytes).toBe(snapshotBytes);
    await b.memory.add({ tenant_id: 't', content: 'one more' });
    expect(b.store.stats()).toMatchObject({ generation: 2, snapshots: 0 });
    while (b.store.stats().logBytes < snapshotBytes) await b.memory.add({ tenant_id: 't', content: 'padding '.repeat(50) });
    await b.memory.add({ tenant_id: 't', content: 'past it' });
    await stop(b.store);
    expect(b.store.stats()).toMatchObject({ generation: 3, snapshots: 1 });
  });
});

/** A host store that lists its blobs in reverse order, each with size 0: neither is trusted. */
function misleadingLister(): BlobStore {
  const blobs = fx.host();
  return new Proxy(blobs, {
    get(target, prop, receiver) {
      if (prop === 'list') return async (prefix?: string) => (await target.list(prefix)).map((b): BlobInfo => ({ ...b, size: 0 })).reverse();
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** The meta in a sealed file's header frame. */
async function headerOf(name: string, kind: 'log' | 'snapshot' = 'log'): Promise<FileMeta> {
  const file = await readSealedFile(readFileSync(join(fx.dir, name)), kind, key, name, { allowTail: true });
  const header = decodePayload(file.payloads[0], name);
  if (header.type !== 'header') throw new Error(`${name} has no header`);
  return header.meta;
}

describe('what the host lists', () => {
  it('segments listed out of order and sizes listed as 0: replayed in order, and a torn tail still cut where it is', async () => {
    const a = await start({ blobs: flaky({ puts: (name) => name === 'snapshot.sealed' }) });
    for (const content of ['one', 'two']) {
      await a.memory.add({ tenant_id: 't', content });
      await expect(a.store.compact()).rejects.toThrow();
    }
    await a.memory.update('t', [...a.memory.entries()].find((e) => e.record.content === 'one')!.record.id, { content: 'one, updated' });
    await a.memory.add({ tenant_id: 't', content: 'three' });
    await stop(a.store);
    expect(files()).toEqual([logName(1), logName(2), logName(3)]);
    const size = statSync(join(fx.dir, logName(3))).size;
    await fx.host().append(logName(3), size, Buffer.from('torn'));

    const b = await start({ blobs: misleadingLister() });
    expect(b.store.recovery).toMatchObject({ logs: 3, events: 4, cutTail: { file: logName(3), offset: size, bytes: 4 } });
    expect(contents(b.memory)).toEqual(['one, updated', 'three', 'two']);
    await b.memory.add({ tenant_id: 't', content: 'four' });
    await stop(b.store);
    expect(contents((await start()).memory)).toEqual(['four', 'one, updated', 'three', 'two']);
  });

  it('a junk tail running past the segment\'s limit is cut whole, from the size the host lists', async () => {
    // A segment that promised at most 4 KiB, then 4 MiB of junk: read only up to the limit (a
    // chunk or so), so where the junk ends is known only from the listing.
    const meta = segmentMeta({ max_bytes: 4096 });
    await forgeSegment(meta);
    const size = statSync(join(fx.dir, logName(1))).size;
    await fx.host().append(logName(1), size, Buffer.alloc(4 << 20, 7));
    const a = await start();
    expect(a.store.recovery.cutTail).toMatchObject({ file: logName(1), offset: size });
    await a.memory.add({ tenant_id: 't', content: 'after the cut' });
    await stop(a.store);
    expect(statSync(join(fx.dir, logName(1))).size).toBeLessThan(4096);
    expect(contents((await start()).memory)).toEqual(['after the cut']);
  });
});

describe('what the store writes in its headers', () => {
  it('each segment names the most bytes it will hold: four times the larger of the limit and the last snapshot, plus 128 MiB; and when it was made, in seconds', async () => {
    const before = Math.floor(Date.now() / 1000);
    const a = await start({ snapshotLogBytes: 1 << 30 });
    expect(await headerOf(logName(1))).toMatchObject({ kind: 'log', generation: 1, format: FORMAT_VERSION, max_bytes: 4 * 2 ** 30 + 128 * 1024 * 1024 });
    for (let i = 0; i < 30; i++) await a.memory.add({ tenant_id: 't', content: `memory number ${i} of a snapshot larger than the limit` });
    await a.store.compact();
    await stop(a.store);
    // Restarted with a limit below the snapshot's size: the snapshot's size (as read) is what counts.
    const snapshotBytes = statSync(join(fx.dir, 'snapshot.sealed')).size;
    expect(snapshotBytes).toBeGreaterThan(4096);
    const b = await start({ snapshotLogBytes: 4096 });
    await b.store.compact();
    await stop(b.store);
    const after = Math.ceil(Date.now() / 1000);
    const third = await headerOf(logName(3));
    expect(third).toMatchObject({ generation: 3, max_bytes: 4 * snapshotBytes + 128 * 1024 * 1024, store_id: a.store.storeId, embedding_model: fx.embedder.id });
    expect(third.created_at).toBeGreaterThanOrEqual(before);
    expect(third.created_at).toBeLessThanOrEqual(after);
    expect(await headerOf('snapshot.sealed', 'snapshot')).toMatchObject({ kind: 'snapshot', generation: 3, store_id: a.store.storeId });
  });

  it('without a prefix its blobs are memory/…; a clean start reports exactly what it recovered', async () => {
    const blobs = fx.host();
    const a = await start({ blobs, prefix: undefined });
    await a.memory.add({ tenant_id: 't', content: 'one' });
    const head = a.store.head;
    await stop(a.store);
    expect((await blobs.list('')).map((b) => b.name)).toEqual([`memory/${logName(1)}`]);
    const b = await start({ blobs, prefix: undefined });
    expect(b.store.recovery).toStrictEqual({ snapshotGeneration: null, logs: 1, events: 1, head });
  });
});

describe('a stored change that fails to apply at recovery', () => {
  it('a delete, or a memory of the snapshot, is skipped by name and place; a non-Error is named so; damage refuses the store', async () => {
    const a = await start();
    const kept = await a.memory.add({ tenant_id: 't', content: 'in the snapshot' });
    const second = await a.memory.add({ tenant_id: 't', content: 'in the snapshot too' });
    await a.store.compact();
    const gone = await a.memory.add({ tenant_id: 't', content: 'deleted later' });
    await a.memory.delete('t', gone.id);
    await stop(a.store);

    const openWith = async (fails: (event: Parameters<MemoryService['apply']>[0]) => unknown, log?: StoreOptions['log']) => {
      const memory = new MemoryService(fx.embedder);
      const target = {
        apply: (event: Parameters<MemoryService['apply']>[0]) => {
          const thrown = fails(event);
          if (thrown !== undefined) throw thrown;
          memory.apply(event);
        },
        entries: () => memory.entries(),
      };
      const store = await DurableStore.open({ blobs: fx.host(), prefix: '', sealingKey, embedding: memory.embeddingModel, snapshotLogBytes: 1 << 30, log }, target);
      fx.track(store);
      return { memory, store };
    };
    const { lines, log } = recorder();
    const b = await openWith((e) => (e.type === 'delete' ? 'not an error object' : e.type === 'add' && e.record.id !== gone.id ? new TypeError('bad record') : undefined), log);
    const inSnapshot = [kept.id, second.id].sort();
    const skipped = b.store.recovery.skipped!;
    expect(skipped).toEqual([
      { change: 'add', id: expect.any(String), at: 'snapshot.sealed record 0', reason: 'TypeError: bad record' },
      { change: 'add', id: expect.any(String), at: 'snapshot.sealed record 1', reason: 'TypeError: bad record' },
      { change: 'delete', id: gone.id, at: `${logName(2)} frame 2`, reason: 'not an Error' },
    ]);
    expect([skipped[0].id, skipped[1].id].sort()).toEqual(inSnapshot);
    expect(lines).toEqual(skipped.map((fields) => ['error', fields, 'a stored change failed to apply at recovery; skipped it and went on']));
    expect(contents(b.memory)).toEqual(['deleted later']);
    await stop(b.store);

    const refused = await openWith((e) => (e.type === 'delete' ? new CorruptStoreError('a change of another shard\'s tenant') : undefined)).then(() => 'opened', (err: Error) => err.message);
    expect(refused).toBe('a change of another shard\'s tenant');
  });
});

describe('an embedding model change, as the operator sees it', () => {
  it('an empty store starts over; one with memories is re-embedded; each step logged with both models', async () => {
    const a = await start();
    await stop(a.store);
    const current = a.memory.embeddingModel;
    const next = { ...current, sha256: 'ff'.repeat(32) };
    const empty = recorder();
    await stop((await start({ log: empty.log, embedding: next, reembed: async () => {} })).store);
    const models = { from: `${current.id} (${current.dimension}-d, sha256 ${current.sha256.slice(0, 12)})`, to: `${next.id} (${next.dimension}-d, sha256 ffffffffffff)` };
    expect(empty.lines.filter((l) => l[0] === 'info' && l[2] !== 'memory snapshot written; older logs deleted')).toEqual([
      ['info', models, 'the store holds no memories: starting it over under the new embedding model'],
      ['info', { model: next.id, memories: 0 }, 'memory store rewritten under the new embedding model'],
    ]);

    const b = await start({ embedding: next });
    await b.memory.add({ tenant_id: 't', content: 'one' });
    await b.memory.add({ tenant_id: 't', content: 'two' });
    await stop(b.store);
    const full = recorder();
    let reembeds = 0;
    const memory = new MemoryService(fx.embedder);
    const c = await DurableStore.open({
      blobs: fx.host(), prefix: '', sealingKey, embedding: current, snapshotLogBytes: 1 << 30, log: full.log,
      reembed: async () => { reembeds++; await memory.reembed(fx.embedder); },
    }, memory);
    fx.track(c);
    expect(reembeds).toBe(1);
    expect(c.recovery.modelChange).toEqual({ from: next, to: current, memories: 2 });
    expect(full.lines.filter((l) => l[0] === 'info' && l[2] !== 'memory snapshot written; older logs deleted')).toEqual([
      ['info', { from: models.to, to: models.from, memories: 2 }, 'embedding model changed: re-embedding every stored memory'],
      ['info', { model: current.id, memories: 2 }, 'memory store rewritten under the new embedding model'],
    ]);
  });
});

describe('stores of earlier formats', () => {
  const record = (n: number) => ({ id: `mem_${String(n).padStart(32, '0')}`, object: 'memory' as const, tenant_id: 't', content: `memory ${n}`, metadata: {}, created_at: 1_700_000_000 });
  const change = async (n: number) => encodeEvent({ type: 'add', record: record(n), vector: (await fx.embedder.embed([`memory ${n}`]))[0] });

  it('format 3 (chained, no chain of heads in the snapshot): opened as it is, its heads from the segment\'s first on', async () => {
    const storeId = 'cd'.repeat(16);
    const meta = segmentMeta({ format: 3, store_id: storeId, head: genesisHead(storeId), max_bytes: undefined });
    // A format 3 snapshot: no heads; the segment after it starts at its head.
    const atSnapshot = advanceHead(genesisHead(storeId), await change(0));
    await writeSnapshot(fx.host(), 'snapshot.sealed', key, { ...meta, kind: 'snapshot', generation: 2, head: atSnapshot } as FileMeta,
      [{ record: record(0), vector: (await fx.embedder.embed(['memory 0']))[0] }]);
    const payloads = [await change(1), await change(2)];
    await forgeSegment({ ...meta, generation: 2, head: atSnapshot } as FileMeta, payloads, 2);
    const { lines, log } = recorder();
    const a = await start({ log });
    const head = advanceHead(advanceHead(atSnapshot, payloads[0]), payloads[1]);
    expect(a.store.recovery).toMatchObject({ snapshotGeneration: 2, logs: 1, events: 3, head });
    expect(a.store.head).toEqual(head);
    expect(a.store.headChain()).toMatchObject({ from: 1, heads: 3 });
    expect(a.store.ancestry(atSnapshot)).toBe('yes');
    expect(a.store.ancestry(genesisHead(storeId))).toBe('unknown');
    expect(lines.filter((l) => l[0] !== 'warn')).toEqual([]);
    expect(files()).toEqual([logName(2), 'snapshot.sealed']);
  });

  it('format 2 (no chain at all): its changes replayed, then rewritten at once as a new chain', async () => {
    await forgeSegment(segmentMeta({ format: 2, store_id: undefined, head: undefined, max_bytes: undefined }), [await change(1), await change(2)]);
    const a = await start();
    expect(a.store.recovery).toMatchObject({ snapshotGeneration: null, logs: 1, events: 2, head: genesisHead(a.store.storeId) });
    expect(a.store.storeId).toMatch(/^[0-9a-f]{32}$/);
    expect(contents(a.memory)).toEqual(['memory 1', 'memory 2']);
    expect(files()).toEqual([logName(2), 'snapshot.sealed']);
    await stop(a.store);
    expect((await headerOf('snapshot.sealed', 'snapshot'))).toMatchObject({ format: FORMAT_VERSION, store_id: a.store.storeId });
  });
});

describe('more refusals at start, each naming what is wrong', () => {
  it('a missing segment: what the snapshot is followed by, or what was found', async () => {
    const a = await start({ blobs: flaky({ puts: (name) => name === 'snapshot.sealed' }) });
    for (const content of ['one', 'two']) {
      await a.memory.add({ tenant_id: 't', content });
      await expect(a.store.compact()).rejects.toThrow();
    }
    await stop(a.store);
    rmSync(join(fx.dir, logName(1)));
    expect(await refusal()).toBe(`${logName(1)} is missing (found ${logName(2)}, ${logName(3)})`);
  });

  it('a segment after the snapshot missing, with a later one there', async () => {
    const a = await start({ blobs: flaky({ puts: (name) => name === 'snapshot.sealed' && files().includes(logName(3)) }) });
    await a.memory.add({ tenant_id: 't', content: 'one' });
    await a.store.compact();
    await a.memory.add({ tenant_id: 't', content: 'two' });
    await expect(a.store.compact()).rejects.toThrow();
    await stop(a.store);
    expect(files()).toEqual([logName(2), logName(3), 'snapshot.sealed']);
    rmSync(join(fx.dir, logName(2)));
    expect(await refusal()).toBe(`${logName(2)} is missing (snapshot.sealed is followed by ${logName(3)})`);
  });

  it('lets go of the snapshot it was reading when it refuses, at once (not when the stream is garbage collected)', async () => {
    const a = await start();
    await a.memory.add({ tenant_id: 't', content: 'one' });
    await a.store.compact();
    await stop(a.store);
    rmSync(join(fx.dir, logName(2)));
    // The host store's read streams, each noting when its reader let go of it.
    const reads: Array<{ name: string; done: boolean }> = [];
    const host = fx.host();
    const watched = new Proxy(host, {
      get(target, prop, receiver) {
        if (prop === 'read') {
          return async (name: string) => {
            const chunks = await target.read(name);
            if (!chunks) return chunks;
            const read = { name, done: false };
            reads.push(read);
            return (async function* () {
              try {
                yield* chunks;
              } finally {
                read.done = true;
              }
            })();
          };
        }
        const value = Reflect.get(target, prop, receiver) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    expect(await refusal({ blobs: watched })).toBe(`${logName(2)} is missing (snapshot.sealed is followed by no log)`);
    expect(reads).toEqual([{ name: 'snapshot.sealed', done: true }]);
  });

  it('a store other than the one it must be, unnamed: named by its prefix', async () => {
    const a = await start();
    await stop(a.store);
    const other = 'ef'.repeat(16);
    expect(await refusal({ storeId: other })).toBe(
      ` holds store ${a.store.storeId}, but the shard map says it is store ${other} (its blobs were swapped with another shard's, or brought from elsewhere)`,
    );
  });

  it('an entry that does not decode, named by segment and frame', async () => {
    await forgeSegment(segmentMeta(), [Buffer.of(0xff, 1, 2, 3)]);
    expect(await refusal()).toMatch(new RegExp(`^${logName(1)} frame 1: unreadable entry`));
  });

  it('a segment that does not start where the snapshot, or an empty store, ends; a format 4 snapshot without its chain of heads', async () => {
    const a = await start();
    await a.memory.add({ tenant_id: 't', content: 'one' });
    await a.store.compact();
    await stop(a.store);
    const storeId = a.store.storeId;
    const doesNotContinue = (after: string) => new RegExp(`^${logName(2)} does not continue ${after}: it starts at state 0:[0-9a-f]{16} but that ends at 1:[0-9a-f]{16} ` +
      '\\(a segment was dropped, cut short, swapped, replaced by an older copy, or brought from elsewhere\\)$');
    rmSync(join(fx.dir, logName(2)));
    await forgeSegment(segmentMeta({ store_id: storeId, head: genesisHead(storeId), generation: 2 }), [], 2);
    expect(await refusal()).toMatch(doesNotContinue('snapshot.sealed'));

    // The snapshot put back without its chain of heads (as format 4 always has one).
    const meta = (await headerOf('snapshot.sealed', 'snapshot'));
    await writeSnapshot(fx.host(), 'snapshot.sealed', key, meta, []);
    expect(await refusal()).toMatch(/^snapshot\.sealed has no chain of heads ending at its state 1:[0-9a-f]{16}$/);

    // No snapshot: the first segment must start at the empty store's head.
    rmSync(join(fx.dir, 'snapshot.sealed'));
    rmSync(join(fx.dir, logName(2)));
    await forgeSegment(segmentMeta({ store_id: storeId, head: { seq: 1, hash: 'ab'.repeat(32) } }));
    expect(await refusal()).toMatch(new RegExp(`^${logName(1)} does not continue an empty store: it starts at state 1:abababababababab but that ends at 0:`));
  });

  it('a header frame that does not decode, named as frame 0', async () => {
    const header = newHeader('log', key);
    await fx.host().put(logName(1), Buffer.concat([header, sealFrame(key, header, 0, Buffer.of(0xff))]));
    expect(await refusal()).toMatch(new RegExp(`^${logName(1)} frame 0: unreadable entry`));
  });

  it('a segment the host changes between the two reads of it (header, then the whole)', async () => {
    await forgeSegment(segmentMeta({ created_at: 1 }));
    const first = readFileSync(join(fx.dir, logName(1)));
    await forgeSegment(segmentMeta({ created_at: 2 }));
    const second = readFileSync(join(fx.dir, logName(1)));
    const serving = (reads: Buffer[]): BlobStore => {
      const blobs = fx.host();
      let n = 0;
      return new Proxy(blobs, {
        get(target, prop, receiver) {
          if (prop === 'read') {
            return async (name: string) => {
              if (name !== logName(1)) return target.read(name);
              const bytes = reads[Math.min(n++, reads.length - 1)];
              return (async function* () { yield bytes; })();
            };
          }
          const value = Reflect.get(target, prop, receiver) as unknown;
          return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        },
      });
    };
    const changed = `${logName(1)} changed while it was being read`;
    expect(await refusal({ blobs: serving([first, second]) })).toBe(changed);
    // The second read cut to the file's own header: no frame at all.
    expect(await refusal({ blobs: serving([first, first.subarray(0, 32)]) })).toBe(changed);
    expect(await refusal({ blobs: serving([first, first]) })).toBe('opened');
  });
});

describe('compaction against what the host store holds', () => {
  it('goes on compacting as the log grows again past the last snapshot, not just once', async () => {
    const a = await start({ snapshotLogBytes: 2048 });
    for (let i = 0; i < 150 && a.store.stats().snapshots < 3; i++) await a.memory.add({ tenant_id: 't', content: `memory number ${i} `.repeat(4) });
    await stop(a.store);
    expect(a.store.stats().snapshots).toBeGreaterThanOrEqual(3);
  });

  it('a snapshot put there after the store read it (absent, or at another version): its own is refused, as another writer\'s', async () => {
    const blobs = fx.host();
    const { lines, log } = recorder();
    const a = await start({ blobs, log });
    await a.memory.add({ tenant_id: 't', content: 'one' });
    await blobs.put('snapshot.sealed', Buffer.from('planted by the host'));
    await expect(a.store.compact()).rejects.toThrow(/snapshot\.sealed/);
    expect(a.store.takenOver).toBe(true);
    // Only the takeover is logged, not as a failed snapshot.
    expect(lines.map((l) => l[2])).toEqual(['another writer has written the memory store since this enclave opened it: this enclave no longer owns it and refuses every change to it from now on (503 shard_not_owned)']);
    await stop(a.store);
    await blobs.delete('snapshot.sealed');

    const b = await start({ blobs });
    await b.store.compact();
    const snapshot = readFileSync(join(fx.dir, 'snapshot.sealed'));
    // The same bytes written again are another version: the host has been there.
    await blobs.put('snapshot.sealed', snapshot);
    await expect(b.store.compact()).rejects.toThrow(/snapshot\.sealed/);
    expect(b.store.takenOver).toBe(true);
  });

  it('a next segment the host put there first: the store stops as taken over, logged once, not as a postponed compaction', async () => {
    const blobs = fx.host();
    const { lines, logged, log } = recorder();
    const a = await start({ blobs, log, snapshotLogBytes: 1 });
    await blobs.put(logName(2), Buffer.from('planted by the host'));
    await a.memory.add({ tenant_id: 't', content: 'one' });
    const takeover = 'another writer has written the memory store since this enclave opened it: this enclave no longer owns it and refuses every change to it from now on (503 shard_not_owned)';
    await logged(takeover);
    expect(lines.map((l) => l[2])).toEqual([takeover]);
    expect(a.store.takenOver).toBe(true);
  });

  it('a confirmation refused because a member has seen a newer owner (freshness across enclaves): that write and every later one answer 503 shard_not_owned naming it, and the store stops as taken over', async () => {
    const { lines, log } = recorder();
    let refuse = false;
    const newer = new SupersededError('a member of the service has seen owner generation 2 of shard 0, above this owner\'s 1: the shard has a newer owner', 1, 2);
    const a = await start({ log, confirm: async () => { if (refuse) throw newer; } });
    await a.memory.add({ tenant_id: 't', content: 'one' });
    refuse = true;
    const refusal = { status: 503, code: 'shard_not_owned', message: expect.stringContaining('has seen owner generation 2 of shard 0') as unknown };
    await expect(a.memory.add({ tenant_id: 't', content: 'two' })).rejects.toMatchObject(refusal);
    expect(a.store.takenOver).toBe(true);
    // For good, even were the members to confirm again.
    refuse = false;
    await expect(a.memory.add({ tenant_id: 't', content: 'three' })).rejects.toMatchObject(refusal);
    expect(lines.map((l) => l[2])).toEqual(['a member of the service has seen a newer owner of the memory store: this enclave no longer owns it and refuses every change to it from now on (503 shard_not_owned)']);
  });

  it('with the default prefix, deletes the older segments under it once the snapshot is written', async () => {
    const blobs = fx.host();
    const { lines, log } = recorder();
    const started = performance.now();
    const a = await start({ blobs, prefix: undefined, log });
    await a.memory.add({ tenant_id: 't', content: 'one' });
    await a.store.compact();
    await stop(a.store);
    expect((await blobs.list('')).map((b) => b.name)).toEqual([`memory/${logName(2)}`, 'memory/snapshot.sealed']);
    // The time it took, counted from its start: no more than the test has run.
    const [, written] = lines.find((l) => l[2] === 'memory snapshot written; older logs deleted')!;
    expect(written.ms).toBeGreaterThanOrEqual(0);
    expect(written.ms).toBeLessThanOrEqual(Math.ceil(performance.now() - started));
  });
});
