import { open, rename, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';

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

/**
 * Replaces a file atomically and durably: temporary file (`mode`, 0600 by default), sync,
 * rename, sync the folder. A crash leaves the old file or the new one, never half of one.
 */
export async function writeFileDurably(path: string, data: Uint8Array, mode = 0o600): Promise<void> {
  const tmp = `${path}.tmp`;
  const handle = await open(tmp, 'w', mode);
  try {
    await writeAll(handle, data, 0);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(tmp, path);
  await fsyncDir(dirname(path));
}
