import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiError } from '../../common/errors.js';
import { GroupCommitLog } from '../../enclave/storage/group-commit.js';
import { SealedLog, type LogFile } from '../../enclave/storage/log-file.js';
import { deriveStorageKey, readSealedFile } from '../../enclave/storage/sealed-file.js';

const key = deriveStorageKey(randomBytes(32));
const meta = { format: 1, kind: 'log' as const, generation: 1, embedding_model: 'm', dimension: 3, created_at: 0 };
let dir: string;
let path: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'group-commit-'));
  path = join(dir, 'log-000000000001.sealed');
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
  close() { return this.inner.close(); }
}

const payload = (i: number) => Buffer.from(`entry ${i}`);
const entriesOnDisk = () => readSealedFile(readFileSync(path), 'log', key, 'log', { allowTail: false }).payloads.slice(1).map(String);

describe('group commit', () => {
  it('writes entries that arrive during a sync as one batch, acknowledging each only once it is on disk', async () => {
    const file = new WatchedLog(await SealedLog.create(path, key, meta));
    const log = new GroupCommitLog(file, { groupCommit: true });
    const applied: number[] = [];
    const acks = Array.from({ length: 100 }, (_, i) => log.append(payload(i), () => {
      // Runs when the entry is durable: it is in the file, and its batch has been synced.
      expect(file.durableEntries).toBeGreaterThan(i);
      expect(entriesOnDisk()).toContain(`entry ${i}`);
      applied.push(i);
    }));
    await Promise.all(acks);
    // The first entry starts a write alone; the 99 queued behind its sync share the next one.
    expect(file.appends).toEqual([1, 99]);
    expect(log.stats).toEqual({ commits: 100, syncs: 2, largestBatch: 99 });
    expect(applied).toEqual([...Array(100).keys()]);
    expect(entriesOnDisk()).toEqual(Array.from({ length: 100 }, (_, i) => `entry ${i}`));
    await file.close();
  });

  it('without group commit, syncs once per entry', async () => {
    const file = new WatchedLog(await SealedLog.create(path, key, meta));
    const log = new GroupCommitLog(file, { groupCommit: false });
    await Promise.all(Array.from({ length: 20 }, (_, i) => log.append(payload(i), () => {})));
    expect(log.stats).toEqual({ commits: 20, syncs: 20, largestBatch: 1 });
    expect(entriesOnDisk()).toHaveLength(20);
    await file.close();
  });

  it('after a failed write, refuses that batch, everything queued and everything later, and reports once', async () => {
    const file = new WatchedLog(await SealedLog.create(path, key, meta), 2);
    const failures: Error[] = [];
    const log = new GroupCommitLog(file, { groupCommit: true, onFailure: (err) => failures.push(err) });
    const applied: number[] = [];
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => log.append(payload(i), () => applied.push(i))));
    expect(results[0].status).toBe('fulfilled');
    for (const r of results.slice(1)) {
      expect(r.status).toBe('rejected');
      const err = (r as PromiseRejectedResult).reason as ApiError;
      expect(err).toBeInstanceOf(ApiError);
      expect([err.status, err.code]).toEqual([503, 'storage_unavailable']);
    }
    expect(applied).toEqual([0]);
    await expect(log.append(payload(99), () => applied.push(99))).rejects.toMatchObject({ status: 503 });
    expect(failures.map((e) => e.message)).toEqual(['EIO: simulated disk failure']);
    await file.close();
  });

  it('writes a batch of entries in one write and sync, and refuses all of it when that write fails', async () => {
    const file = new WatchedLog(await SealedLog.create(path, key, meta), 2);
    const log = new GroupCommitLog(file, { groupCommit: true });
    let applied = 0;
    await log.appendAll([payload(0), payload(1), payload(2), payload(3), payload(4)], () => { applied++; });
    expect(file.appends).toEqual([5]);
    expect(applied).toBe(1);
    await expect(log.appendAll([payload(5), payload(6)], () => { applied++; })).rejects.toMatchObject({ status: 503 });
    expect(applied).toBe(1);
    expect(entriesOnDisk()).toEqual(['entry 0', 'entry 1', 'entry 2', 'entry 3', 'entry 4']);
    await file.close();
  });

  it('runs exclusive tasks between batches, with no write in flight', async () => {
    const file = new WatchedLog(await SealedLog.create(path, key, meta));
    const log = new GroupCommitLog(file, { groupCommit: true });
    const seen: boolean[] = [];
    const work: Promise<void>[] = [];
    for (let i = 0; i < 30; i++) {
      work.push(log.append(payload(i), () => {}));
      if (i % 10 === 5) work.push(log.exclusive(async () => { seen.push(file.inFlight); await new Promise((r) => setTimeout(r, 5)); seen.push(file.inFlight); }));
    }
    await Promise.all(work);
    expect(seen).toEqual([false, false, false, false, false, false]);
    expect(entriesOnDisk()).toHaveLength(30);
    await log.drain();
    await file.close();
  });
});
