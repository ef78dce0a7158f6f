import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { BlobConflictError, isValidBlobName, readOffset, type BlobInfo, type BlobStore, type PutConditions } from '../common/blob-store.js';
import { fsyncDir, writeAll } from './fs-utils.js';
import { MAX_SHARDS } from '../protocol/shards.js';

/** Bytes per chunk when a blob is read back: small enough to stream, large enough to be cheap. */
const READ_CHUNK_BYTES = 1024 * 1024;

export class BlobNameError extends Error {
  constructor(name: string) {
    super(`invalid blob name ${JSON.stringify(name.slice(0, 200))}`);
    this.name = 'BlobNameError';
  }
}

/**
 * Blobs as files in one folder (DATA_DIR): the host store's disk. A blob `memory/log-1`
 * is the file `<dir>/memory/log-1`. Names are checked before any path is built, so no
 * name reaches outside the folder. Every change is synced, with its folder, before it
 * resolves; replacements go through a temporary file and a rename. Conditions are checked
 * and acted on with no other operation on the same blob in between.
 */
/**
 * Blobs kept open for appends; beyond, the one least recently appended to is closed. Each shard
 * appends to one segment at a time (two during a compaction), and one host store serves every
 * shard of a cluster (up to MAX_SHARDS, protocol/shards.ts): fewer handles than logs in use would
 * reopen a log at nearly every append.
 */
export const MAX_OPEN_FOR_APPEND = 2 * MAX_SHARDS;

export class FsBlobStore implements BlobStore {
  /**
   * Blobs being appended to, kept open with their size: an append is then one write and one
   * fdatasync, not also an open, a stat and a close (each a trip through libuv's pool). Only
   * this process writes the folder, so the cached size stays true.
   */
  private readonly appending = new Map<string, { handle: FileHandle; size: number }>();
  /**
   * Each blob's version: this process's random id and a counter, new at every write. Only
   * this process writes the folder (data-dir-lock.ts), so it sees every change; after a
   * restart every blob gets a new version, and a put conditional on an old one fails (safe).
   */
  private readonly versions = new Map<string, string>();
  private readonly boot = randomBytes(6).toString('hex');
  private writes = 0;
  /** Operations on one blob run one at a time, so a condition still holds when the write it guards is made. */
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(readonly dir: string) {}

  async list(prefix = ''): Promise<BlobInfo[]> {
    const out: BlobInfo[] = [];
    const walk = async (folder: string, relative: string, depth: number): Promise<void> => {
      let entries;
      try {
        entries = await readdir(folder, { withFileTypes: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw err;
      }
      for (const entry of entries) {
        const name = relative + entry.name;
        if (entry.isDirectory() && depth === 0) await walk(join(folder, entry.name), `${name}/`, 1);
        else if (entry.isFile() && isValidBlobName(name) && name.startsWith(prefix)) {
          out.push({ name, size: (await stat(join(folder, entry.name))).size, version: this.versionOf(name) });
        }
      }
    };
    await walk(this.dir, '', 0);
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async read(name: string, from?: number): Promise<AsyncIterable<Buffer> | undefined> {
    const path = this.path(name);
    const start = readOffset(from);
    try {
      // Opened here so a missing blob is reported now, not on the first chunk.
      const handle = await open(path, 'r');
      return handle.createReadStream({ highWaterMark: READ_CHUNK_BYTES, autoClose: true, start }) as AsyncIterable<Buffer>;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async put(name: string, data: Uint8Array | AsyncIterable<Uint8Array>, conditions: PutConditions = {}): Promise<{ version: string }> {
    const path = this.path(name);
    // The whole put holds the blob, so its condition still holds at the rename, and two
    // writers' puts of one blob never share the temporary file.
    return this.one(name, async () => {
      await this.check(name, path, conditions);
      await mkdir(dirname(path), { recursive: true, mode: 0o700 });
      const tmp = `${path}.tmp`;
      const handle = await open(tmp, 'w', 0o600);
      try {
        let position = 0;
        for await (const chunk of data instanceof Uint8Array ? [data] : data) {
          await writeAll(handle, chunk, position);
          position += chunk.length;
        }
        await handle.sync();
      } catch (err) {
        await handle.close();
        await rm(tmp, { force: true });
        throw err;
      }
      await handle.close();
      await this.forget(name);
      await rename(tmp, path);
      await fsyncDir(dirname(path));
      return { version: this.changed(name) };
    });
  }

  async append(name: string, offset: number, data: Uint8Array): Promise<void> {
    const path = this.path(name);
    return this.one(name, async () => {
      const file = await this.openForAppend(name, path);
      if (file.size !== offset) throw new BlobConflictError(`${name} ends at ${file.size}; an append at ${offset} is refused`);
      if (data.length === 0) return;
      try {
        await writeAll(file.handle, data, offset);
        // fdatasync: the data and the new size, without unrelated metadata.
        await file.handle.datasync();
      } catch (err) {
        // All or nothing: what part of the write got through is cut, so the writer may try again at the same offset.
        await file.handle.truncate(offset).catch(() => {});
        await this.forget(name);
        throw err;
      }
      file.size = offset + data.length;
      this.changed(name);
    });
  }

  async truncate(name: string, length: number, ifSize: number): Promise<void> {
    const path = this.path(name);
    return this.one(name, async () => {
      const file = await this.openForAppend(name, path);
      if (file.size !== ifSize || length > ifSize) throw new BlobConflictError(`${name} has ${file.size} bytes; a cut to ${length} of ${ifSize} bytes is refused`);
      try {
        await file.handle.truncate(length);
        await file.handle.datasync();
      } catch (err) {
        await this.forget(name);
        throw err;
      }
      file.size = length;
      this.changed(name);
    });
  }

  async delete(name: string): Promise<void> {
    const path = this.path(name);
    await this.one(name, async () => {
      await this.forget(name);
      await rm(path, { force: true });
      this.versions.delete(name);
      await fsyncDir(dirname(path)).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
    });
  }

  async release(name: string): Promise<void> {
    await this.forget(name);
  }

  async close(): Promise<void> {
    for (const name of [...this.appending.keys()]) await this.forget(name);
  }

  /** The blob's open handle and size, kept for the appends to come. */
  private async openForAppend(name: string, path: string): Promise<{ handle: FileHandle; size: number }> {
    const kept = this.appending.get(name);
    if (kept) {
      // Most recently used last: the first key is the one to close.
      this.appending.delete(name);
      this.appending.set(name, kept);
      return kept;
    }
    const handle = await open(path, 'r+');
    const file = { handle, size: (await handle.stat()).size };
    // The least recently used is closed in its own blob's turn, never under an append of it in flight
    // (closing it here failed that append with "file closed"); not awaited, since that turn may
    // itself wait on this blob's.
    if (this.appending.size >= MAX_OPEN_FOR_APPEND) {
      const oldest = this.appending.keys().next().value!;
      void this.one(oldest, () => this.forget(oldest));
    }
    this.appending.set(name, file);
    return file;
  }

  private async check(name: string, path: string, { ifAbsent, ifVersion }: PutConditions): Promise<void> {
    if (!ifAbsent && ifVersion === undefined) return;
    const exists = await stat(path).then(() => true, (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return false;
      throw err;
    });
    if (ifAbsent && exists) throw new BlobConflictError(`${name} exists; a put if absent is refused`);
    if (ifVersion !== undefined && (!exists || this.versionOf(name) !== ifVersion)) {
      throw new BlobConflictError(`${name} is ${exists ? `at version ${this.versionOf(name)}` : 'absent'}; a put if at version ${ifVersion} is refused`);
    }
  }

  private versionOf(name: string): string {
    return this.versions.get(name) ?? this.changed(name);
  }

  private changed(name: string): string {
    const version = `${this.boot}-${++this.writes}`;
    this.versions.set(name, version);
    return version;
  }

  private one<T>(name: string, work: () => Promise<T>): Promise<T> {
    const before = this.queues.get(name) ?? Promise.resolve();
    const result = before.then(work);
    const settled = result.catch(() => {});
    this.queues.set(name, settled);
    void settled.then(() => {
      if (this.queues.get(name) === settled) this.queues.delete(name);
    });
    return result;
  }

  private async forget(name: string): Promise<void> {
    const entry = this.appending.get(name);
    if (!entry) return;
    this.appending.delete(name);
    await entry.handle.close().catch(() => {});
  }

  /** Deletes temporary files a crash left behind (a put that never finished): never a blob. */
  async removeLeftovers(): Promise<string[]> {
    const removed: string[] = [];
    const sweep = async (folder: string, depth: number): Promise<void> => {
      const entries = await readdir(folder, { withFileTypes: true }).catch(() => []);
      for (const entry of entries) {
        const path = join(folder, entry.name);
        if (entry.isDirectory() && depth === 0 && !entry.name.endsWith('.tmp')) await sweep(path, 1);
        else if (entry.name.endsWith('.tmp')) {
          await rm(path, { recursive: true, force: true });
          removed.push(path);
        }
      }
    };
    await sweep(this.dir, 0);
    return removed;
  }

  private path(name: string): string {
    if (!isValidBlobName(name)) throw new BlobNameError(name);
    return join(this.dir, name);
  }
}
