import { open, type FileHandle } from 'node:fs/promises';

/** Makes a directory's entries (a create, rename or unlink in it) durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Writes all of `data` at `position`; a regular file may accept a write in parts. */
export async function writeAll(handle: FileHandle, data: Uint8Array, position: number): Promise<void> {
  let done = 0;
  while (done < data.length) {
    const { bytesWritten } = await handle.write(data, done, data.length - done, position + done);
    if (bytesWritten === 0) throw new Error('write made no progress');
    done += bytesWritten;
  }
}
