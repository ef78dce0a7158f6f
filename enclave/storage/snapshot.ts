import { open, rename } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { MemoryEvent } from '../memory/journal.js';
import type { MemoryRecord } from '../memory/memory-service.js';
import { CorruptStoreError } from './errors.js';
import { fsyncDir, writeAll } from './fs-utils.js';
import { decodePayload, encodeEnd, encodeEvent, encodeHeader, type FileMeta } from './payloads.js';
import { newHeader, readSealedFile, sealFrame, type StorageKey } from './sealed-file.js';

export const SNAPSHOT_NAME = 'snapshot.sealed';

export interface SnapshotEntry {
  record: MemoryRecord;
  vector: Float32Array;
}

/** Sealed bytes are handed to the file in chunks of about this size. */
const CHUNK_BYTES = 1024 * 1024;

/**
 * Writes a snapshot atomically: every record as a sealed frame between a header frame and
 * an end frame (which carries the count, so a shortened snapshot is detected), to a
 * temporary file that is synced, renamed over the old snapshot, and its folder synced.
 * Returns the snapshot's size in bytes.
 */
export async function writeSnapshot(path: string, key: StorageKey, meta: FileMeta, entries: readonly SnapshotEntry[]): Promise<number> {
  const tmp = `${path}.tmp`;
  const header = newHeader('snapshot', key);
  const handle = await open(tmp, 'w', 0o600);
  let position = 0;
  try {
    let chunk: Buffer[] = [header, sealFrame(key, header, 0, encodeHeader(meta))];
    let chunkBytes = 0;
    const flush = async () => {
      const data = Buffer.concat(chunk);
      chunk = [];
      chunkBytes = 0;
      await writeAll(handle, data, position);
      position += data.length;
    };
    let seq = 1;
    for (const { record, vector } of entries) {
      const frame = sealFrame(key, header, seq++, encodeEvent({ type: 'add', record, vector }));
      chunk.push(frame);
      chunkBytes += frame.length;
      // Each write also yields, so sealing a large snapshot does not stall requests.
      if (chunkBytes >= CHUNK_BYTES) await flush();
    }
    chunk.push(sealFrame(key, header, seq, encodeEnd(entries.length)));
    await flush();
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(tmp, path);
  await fsyncDir(dirname(path));
  return position;
}

export interface LoadedSnapshot {
  meta: FileMeta;
  events: MemoryEvent[];
}

/** Reads and verifies a whole snapshot; anything short of complete and authentic is refused. */
export function readSnapshot(data: Buffer, key: StorageKey, path: string): LoadedSnapshot {
  const name = basename(path);
  const file = readSealedFile(data, 'snapshot', key, name, { allowTail: false });
  const decoded = file.payloads.map((p, i) => decodePayload(p, `${name} frame ${i}`));
  const first = decoded[0];
  const last = decoded[decoded.length - 1];
  if (first?.type !== 'header' || first.meta.kind !== 'snapshot') throw new CorruptStoreError(`${name} has no snapshot header`);
  if (decoded.length < 2 || last.type !== 'end') throw new CorruptStoreError(`${name} is incomplete (no end mark)`);
  const events: MemoryEvent[] = [];
  for (const p of decoded.slice(1, -1)) {
    if (p.type !== 'event' || p.event.type !== 'add') throw new CorruptStoreError(`${name} holds an entry that is not a memory`);
    events.push(p.event);
  }
  if (last.count !== events.length) throw new CorruptStoreError(`${name} says it holds ${last.count} memories but holds ${events.length}`);
  return { meta: first.meta, events };
}
