import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiError } from '../../common/errors.js';
import { GroupCommitLog } from '../../enclave/storage/group-commit.js';
import { SealedLog, type LogFile } from '../../enclave/storage/log-file.js';
import { deriveStorageKey, readSealedFile } from '../../enclave/storage/sealed-file.js';
import { genesisHead } from '../../enclave/storage/state-head.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';

const key = deriveStorageKey(randomBytes(32));
const meta = { format: 3, kind: 'log' as const, generation: 1, embedding_model: 'm', dimension: 3, created_at: 0, store_id: 's', head: genesisHead('s') };
const NAME = 'log-000000000001.sealed';
let dir: string;
let path: string;
let blobs: FaultyBlobs;

/** The host store's folder, with appends that can be made to fail: before writing, or after writing (an answer lost). */
class FaultyBlobs extends FsBlobStore {
  failNext?: 'before-write' | 'after-write';
  override async append(name: string, offset: number, data: Uint8Array): Promise<void> {
    const fault = this.failNext;
    this.failNext = undefined;
    if (fault === 'before-write') throw new Error('EIO: simulated disk failure');
    await super.append(name, offset, data);
    if (fault === 'after-write') throw new Error('host store did not answer');
  }
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'group-commit-'));
  path = join(dir, NAME);
  blobs = new FaultyBlobs(dir);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A real sealed log that records what it was asked to do. */
class WatchedLog implements LogFile {
  appends: number[] = [];
  inFlight = false;
  durableEntries = 0;
  constructor(private readonly inner: LogFile, private readonly failOnAppend?: number) {}
  get generation() { return this.inner.generation; }
  get size() { return this.inner.size; }
  get head() { return this.inner.head; }
  async append(payloads: Uint8Array[]): Promise<void> {
    this.inFlight = true;
    try {
      if (this.appends.length + 1 === this.failOnAppend) throw new Error('EIO: simulated disk failure');
      await this.inner.append(payloads);
      this.appends.push(payloads.length);
      this.durableEntries += payloads.length;
    } finally {
      this.inFlight = false;
    }
  }
  confirm() { return this.inner.confirm(); }
  close() { return this.inner.close(); }
}

const payload = (i: number) => Buffer.from(`entry ${i}`);
const entriesOnDisk = async () => (await readSealedFile(readFileSync(path), 'log', key, 'log', { allowTail: false })).payloads.slice(1).map(String);

describe('group commit', () => {
  it('writes entries that arrive during a sync as one batch, acknowledging each only once it is on disk', async () => {
    const file = new WatchedLog(await SealedLog.create(blobs, NAME, key, meta));
    const log = new GroupCommitLog(file, { groupCommit: true });
    const applied: number[] = [];
    const onDisk: Buffer[] = [];
    const acks = Array.from({ length: 100 }, (_, i) => log.append(payload(i), () => {
      // Runs when the entry is durable: it is in the file, and its batch has been synced.
      expect(file.durableEntries).toBeGreaterThan(i);
      onDisk[i] = readFileSync(path);
      applied.push(i);
    }));
    await Promise.all(acks);
    for (const [i, bytes] of onDisk.entries()) {
      expect((await readSealedFile(bytes, 'log', key, 'log', { allowTail: false })).payloads.map(String)).toContain(`entry ${i}`);
    }
    // The first entry starts a write alone; the 99 queued behind its sync share the next one.
    expect(file.appends).toEqual([1, 99]);
    expect(log.stats).toEqual({ commits: 100, syncs: 2, largestBatch: 99 });
    expect(applied).toEqual([...Array(100).keys()]);
    expect(await entriesOnDisk()).toEqual(Array.from({ length: 100 }, (_, i) => `entry ${i}`));
    await file.close();
  });

  it('without group commit, syncs once per entry', async () => {
    const file = new WatchedLog(await SealedLog.create(blobs, NAME, key, meta));
    const log = new GroupCommitLog(file, { groupCommit: false });
    await Promise.all(Array.from({ length: 20 }, (_, i) => log.append(payload(i), () => {})));
    expect(log.stats).toEqual({ commits: 20, syncs: 20, largestBatch: 1 });
    expect(await entriesOnDisk()).toHaveLength(20);
    await file.close();
  });

  it('refuses only the batch whose write fails, and writes later batches over whatever it left', async () => {
    const file = new WatchedLog(await SealedLog.create(blobs, NAME, key, meta));
    const failures: Error[] = [];
    const log = new GroupCommitLog(file, { groupCommit: true, onFailure: (err) => failures.push(err) });
    const applied: number[] = [];
    await log.append(payload(0), () => applied.push(0));
    const headBefore = file.head;
    // The host wrote the batch but its answer was lost: the enclave cannot know, so it refuses it...
    blobs.failNext = 'after-write';
    const refused = await Promise.allSettled([1, 2].map((i) => log.appendAll([payload(i)], () => applied.push(i))));
    for (const r of refused) {
      const err = (r as PromiseRejectedResult).reason as ApiError;
      expect(err).toBeInstanceOf(ApiError);
      expect([err.status, err.code]).toEqual([503, 'storage_unavailable']);
    }
    expect(file.head).toEqual(headBefore);
    // ...and the next batch is written at the same offset, cutting what the host kept of it.
    blobs.failNext = 'before-write';
    await expect(log.append(payload(3), () => applied.push(3))).rejects.toMatchObject({ status: 503 });
    await log.append(payload(4), () => applied.push(4));
    expect(applied).toEqual([0, 4]);
    expect(await entriesOnDisk()).toEqual(['entry 0', 'entry 4']);
    expect(failures.map((e) => e.message)).toEqual(['host store did not answer', 'EIO: simulated disk failure']);
    expect(file.head.seq).toBe(2);
    await file.close();
  });

  it('confirms each batch\'s head before applying and acknowledging it; an unconfirmed batch is applied (it is durable) but refused with the confirmation\'s error', async () => {
    const file = new WatchedLog(await SealedLog.create(blobs, NAME, key, meta));
    const confirmed: number[] = [];
    let refuse = false;
    const applied: number[] = [];
    const log = new GroupCommitLog(file, {
      groupCommit: true,
      confirm: async (head) => {
        // Nothing of the batch is applied yet when its head is confirmed, and the head is the batch's own.
        expect(head).toEqual(file.head);
        expect(applied).not.toContain(head.seq - 1);
        confirmed.push(head.seq);
        if (refuse) throw new ApiError('witness_unavailable', 'no witness');
      },
    });
    await log.append(payload(0), () => applied.push(0));
    refuse = true;
    await expect(log.append(payload(1), () => applied.push(1))).rejects.toMatchObject({ status: 503, code: 'witness_unavailable' });
    refuse = false;
    await log.append(payload(2), () => applied.push(2));
    expect(confirmed).toEqual([1, 2, 3]);
    expect(applied).toEqual([0, 1, 2]);
    expect(await entriesOnDisk()).toEqual(['entry 0', 'entry 1', 'entry 2']);
    await file.close();
  });

  it('writes a batch of entries in one write and sync, and refuses all of it when that write fails', async () => {
    const file = new WatchedLog(await SealedLog.create(blobs, NAME, key, meta), 2);
    const log = new GroupCommitLog(file, { groupCommit: true });
    let applied = 0;
    await log.appendAll([payload(0), payload(1), payload(2), payload(3), payload(4)], () => { applied++; });
    expect(file.appends).toEqual([5]);
    expect(applied).toBe(1);
    await expect(log.appendAll([payload(5), payload(6)], () => { applied++; })).rejects.toMatchObject({ status: 503 });
    expect(applied).toBe(1);
    expect(await entriesOnDisk()).toEqual(['entry 0', 'entry 1', 'entry 2', 'entry 3', 'entry 4']);
    await file.close();
  });

  it('sends the next batch before applying the last one, and acknowledges each only once its own batch is durable', async () => {
    const file = new WatchedLog(await SealedLog.create(blobs, NAME, key, meta));
    const log = new GroupCommitLog(file, { groupCommit: true });
    const seen: Array<{ entry: number; nextInFlight: boolean; durable: number }> = [];
    const acked: number[] = [];
    const first = log.append(payload(0), () => seen.push({ entry: 0, nextInFlight: file.inFlight, durable: file.durableEntries }));
    // Queued behind the first batch's sync: one batch, sent as soon as the first is durable.
    const rest = [1, 2, 3].map((i) => log.append(payload(i), () => seen.push({ entry: i, nextInFlight: file.inFlight, durable: file.durableEntries })).then(() => acked.push(i)));
    await first;
    // The first entry was applied while the second batch was already being written, which it is not part of.
    expect(seen).toEqual([{ entry: 0, nextInFlight: true, durable: 1 }]);
    expect(acked).toEqual([]);
    await Promise.all(rest);
    expect(seen.slice(1)).toEqual([1, 2, 3].map((entry) => ({ entry, nextInFlight: false, durable: 4 })));
    expect(file.appends).toEqual([1, 3]);
    expect(await entriesOnDisk()).toEqual(['entry 0', 'entry 1', 'entry 2', 'entry 3']);
    await file.close();
  });

  it('sends nothing while betweenBatches has work to do, and runs it with no write in flight', async () => {
    const file = new WatchedLog(await SealedLog.create(blobs, NAME, key, meta));
    let due = true;
    const between: boolean[] = [];
    const log = new GroupCommitLog(file, {
      groupCommit: true,
      betweenDue: () => due,
      betweenBatches: async () => {
        between.push(file.inFlight);
        due = false;
      },
    });
    const inFlightAtApply: boolean[] = [];
    const apply = () => inFlightAtApply.push(file.inFlight);
    const first = log.append(payload(0), apply);
    const second = log.append(payload(1), apply);
    const third = log.append(payload(2), apply);
    await Promise.all([first, second, third]);
    // Due after the first batch: the second was not sent until betweenBatches had run (and
    // found nothing due after it, so it ran once more, still with nothing in flight).
    expect(inFlightAtApply).toEqual([false, false, false]);
    expect(between).toEqual([false, false]);
    expect(file.appends).toEqual([1, 2]);
    await file.close();
  });

  it('runs exclusive tasks between batches, with no write in flight', async () => {
    const file = new WatchedLog(await SealedLog.create(blobs, NAME, key, meta));
    const log = new GroupCommitLog(file, { groupCommit: true });
    const seen: boolean[] = [];
    const work: Promise<void>[] = [];
    for (let i = 0; i < 30; i++) {
      work.push(log.append(payload(i), () => {}));
      if (i % 10 === 5) work.push(log.exclusive(async () => { seen.push(file.inFlight); await new Promise((r) => setTimeout(r, 5)); seen.push(file.inFlight); }));
    }
    await Promise.all(work);
    expect(seen).toEqual([false, false, false, false, false, false]);
    expect(await entriesOnDisk()).toHaveLength(30);
    await log.drain();
    await file.close();
  });
});
