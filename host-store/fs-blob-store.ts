import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
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
    const handle = await open(this.path(name), 'r+');
    try {
      const { size } = await handle.stat();
      if (size < offset) throw new BlobOffsetError(`${name} has ${size} bytes; cannot write at ${offset}`);
      if (size > offset) await handle.truncate(offset);
      await writeAll(handle, data, offset);
      // fdatasync: the data and the new size, without unrelated metadata.
      await handle.datasync();
    } finally {
      await handle.close();
    }
  }

  async delete(name: string): Promise<void> {
    const path = this.path(name);
    await rm(path, { force: true });
    await fsyncDir(dirname(path)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  async close(): Promise<void> {}

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
