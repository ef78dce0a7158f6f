import { mkdir, open, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { isValidBlobName, type BlobInfo, type BlobStore } from '../common/blob-store.js';
import { fsyncDir, writeAll } from './fs-utils.js';

/** Bytes per chunk when a blob is read back: small enough to stream, large enough to be cheap. */
const READ_CHUNK_BYTES = 1024 * 1024;

export class BlobNameError extends Error {
  constructor(name: string) {
    super(`invalid blob name ${JSON.stringify(name.slice(0, 200))}`);
    this.name = 'BlobNameError';
  }
}

/** The blob is shorter than the offset an append was asked to write at. */
export class BlobOffsetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BlobOffsetError';
  }
}

/**
 * Blobs as files in one folder (DATA_DIR): the host store's disk. A blob `memory/log-1`
 * is the file `<dir>/memory/log-1`. Names are checked before any path is built, so no
 * name reaches outside the folder. Every change is synced, with its folder, before it
 * resolves; replacements go through a temporary file and a rename.
 */
export class FsBlobStore implements BlobStore {
  /**
   * Blobs being appended to, kept open with their size: an append is then one write and one
   * fdatasync, not also an open, a stat and a close (each a trip through libuv's pool). Only
   * this process writes the folder, so the cached size stays true.
   */
  private readonly appending = new Map<string, { handle: FileHandle; size: number }>();

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
          out.push({ name, size: (await stat(join(folder, entry.name))).size });
        }
      }
    };
    await walk(this.dir, '', 0);
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async read(name: string): Promise<AsyncIterable<Buffer> | undefined> {
    const path = this.path(name);
    try {
      // Opened here so a missing blob is reported now, not on the first chunk.
      const handle = await open(path, 'r');
      return handle.createReadStream({ highWaterMark: READ_CHUNK_BYTES, autoClose: true }) as AsyncIterable<Buffer>;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async put(name: string, data: Uint8Array | AsyncIterable<Uint8Array>): Promise<void> {
    const path = this.path(name);
    await this.forget(name);
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
    await rename(tmp, path);
    await fsyncDir(dirname(path));
  }

  async append(name: string, offset: number, data: Uint8Array): Promise<void> {
    const path = this.path(name);
    let file = this.appending.get(name);
    if (!file) {
      const handle = await open(path, 'r+');
      file = { handle, size: (await handle.stat()).size };
      await this.keepOpen(name, file);
    }
    try {
      if (file.size < offset) throw new BlobOffsetError(`${name} has ${file.size} bytes; cannot write at ${offset}`);
      if (file.size > offset) {
        await file.handle.truncate(offset);
        file.size = offset;
      }
      await writeAll(file.handle, data, offset);
      // fdatasync: the data and the new size, without unrelated metadata.
      await file.handle.datasync();
      file.size = offset + data.length;
    } catch (err) {
      // The file's state is unknown after a failed write: reopen (and re-read its size) next time.
      await this.forget(name);
      throw err;
    }
  }

  async delete(name: string): Promise<void> {
    const path = this.path(name);
    await this.forget(name);
    await rm(path, { force: true });
    await fsyncDir(dirname(path)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  async release(name: string): Promise<void> {
    await this.forget(name);
  }

  async close(): Promise<void> {
    for (const name of [...this.appending.keys()]) await this.forget(name);
  }

  private async keepOpen(name: string, entry: { handle: FileHandle; size: number }): Promise<void> {
    // The enclave appends to one segment at a time (two during a compaction): a few suffice.
    if (this.appending.size >= 4) await this.forget(this.appending.keys().next().value!);
    this.appending.set(name, entry);
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
