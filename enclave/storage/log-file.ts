import { open, rename, type FileHandle } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { encodeHeader, type FileMeta } from './payloads.js';
import { newHeader, sealFrame, type StorageKey } from './sealed-file.js';
import { fsyncDir, writeAll } from './fs-utils.js';

/** An open log that batches of sealed entries are appended to. */
export interface LogFile {
  readonly generation: number;
  /** Bytes in the file, header included. */
  readonly size: number;
  /** Seals each payload as the next frame, writes them, and returns once they are on disk. */
  append(payloads: Uint8Array[]): Promise<void>;
  close(): Promise<void>;
}

/** Log file names sort by generation: log-000000000001.sealed, … */
export const logName = (generation: number) => `log-${String(generation).padStart(12, '0')}.sealed`;
export const logGeneration = (name: string): number | undefined => {
  const m = /^log-(\d{12})\.sealed$/.exec(name);
  return m ? Number(m[1]) : undefined;
};

export class SealedLog implements LogFile {
  private constructor(
    private readonly handle: FileHandle,
    private readonly key: StorageKey,
    private readonly header: Buffer,
    readonly generation: number,
    private nextSeq: number,
    private bytes: number,
  ) {}

  get size(): number {
    return this.bytes;
  }

  /**
   * Creates a log: header and its first frame (the file's metadata) are written to a
   * temporary file, synced, then renamed into place and the folder synced, so a log that
   * exists is always complete up to its first frame.
   */
  static async create(path: string, key: StorageKey, meta: FileMeta): Promise<SealedLog> {
    const tmp = `${path}.tmp`;
    const header = newHeader('log', key);
    const start = Buffer.concat([header, sealFrame(key, header, 0, encodeHeader(meta))]);
    const handle = await open(tmp, 'wx+', 0o600);
    try {
      await writeAll(handle, start, 0);
      await handle.sync();
      await rename(tmp, path);
      await fsyncDir(dirname(path));
    } catch (err) {
      await handle.close();
      throw new Error(`cannot create ${basename(path)}: ${(err as Error).message}`);
    }
    return new SealedLog(handle, key, header, meta.generation, 1, start.length);
  }

  /** Opens an existing, already verified log to append after its last good frame, cutting what follows. */
  static async reopen(path: string, key: StorageKey, header: Buffer, generation: number, nextSeq: number, validEnd: number): Promise<SealedLog> {
    const handle = await open(path, 'r+');
    try {
      const { size } = await handle.stat();
      if (size !== validEnd) {
        await handle.truncate(validEnd);
        await handle.sync();
      }
    } catch (err) {
      await handle.close();
      throw err;
    }
    return new SealedLog(handle, key, header, generation, nextSeq, validEnd);
  }

  async append(payloads: Uint8Array[]): Promise<void> {
    const frames = payloads.map((p, i) => sealFrame(this.key, this.header, this.nextSeq + i, p));
    const data = frames.length === 1 ? frames[0] : Buffer.concat(frames);
    await writeAll(this.handle, data, this.bytes);
    // fdatasync: the data and the new file size, without unrelated metadata.
    await this.handle.datasync();
    this.nextSeq += payloads.length;
    this.bytes += data.length;
  }

  async close(): Promise<void> {
    await this.handle.close();
  }
}
