import type { BlobStore } from '../../common/blob-store.js';
import type { MemoryEvent } from '../memory/journal.js';
import type { MemoryRecord } from '../memory/memory-service.js';
import { CorruptStoreError } from './errors.js';
import { decodePayload, encodeEnd, encodeEvent, encodeHeader, type FileMeta } from './payloads.js';
import { newHeader, readSealedStream, sealFrame, type StorageKey } from './sealed-file.js';

export const SNAPSHOT_NAME = 'snapshot.sealed';

export interface SnapshotEntry {
  record: MemoryRecord;
  vector: Float32Array;
}

/**
 * Sealed bytes are handed to the host store in chunks of about this size. Sealing a chunk
 * runs on the event loop, so a small chunk keeps a snapshot of a large store from delaying
 * queries by more than about a millisecond at a time.
 */
const CHUNK_BYTES = 64 * 1024;

/**
 * Writes a snapshot atomically (one put: the host store replaces the blob only once all of
 * it is on disk): every record as a sealed frame between a header frame and an end frame,
 * which carries the count, so a shortened snapshot is detected. Returns its size and count.
 */
export async function writeSnapshot(blobs: BlobStore, name: string, key: StorageKey, meta: FileMeta, entries: Iterable<SnapshotEntry>): Promise<{ bytes: number; count: number }> {
  let bytes = 0;
  let count = 0;
  async function* sealed(): AsyncIterable<Buffer> {
    const header = newHeader('snapshot', key);
    let chunk: Buffer[] = [header, sealFrame(key, header, 0, encodeHeader(meta))];
    let chunkBytes = 0;
    const flush = () => {
      const data = Buffer.concat(chunk);
      chunk = [];
      chunkBytes = 0;
      bytes += data.length;
      return data;
    };
    let seq = 1;
    for (const { record, vector } of entries) {
      const frame = sealFrame(key, header, seq++, encodeEvent({ type: 'add', record, vector }));
      count++;
      chunk.push(frame);
      chunkBytes += frame.length;
      // Each chunk handed over also yields, so sealing a large snapshot does not stall requests.
      if (chunkBytes >= CHUNK_BYTES) yield flush();
    }
    chunk.push(sealFrame(key, header, seq, encodeEnd(count)));
    yield flush();
  }
  await blobs.put(name, sealed());
  return { bytes, count };
}

export interface SnapshotReader {
  /** The snapshot's metadata, checked before any of its memories is handed out. */
  meta: FileMeta;
  /** Its memories, streamed; throws at the end if the snapshot is incomplete. */
  events: AsyncIterable<MemoryEvent>;
}

/**
 * Opens a snapshot for streaming: reads and returns its header, then hands out its memories
 * one by one as the blob arrives. Anything short of complete and authentic is refused.
 */
export async function readSnapshot(chunks: AsyncIterable<Buffer>, key: StorageKey, name: string): Promise<SnapshotReader> {
  const payloads = readSealedStream(chunks, 'snapshot', key, name)[Symbol.asyncIterator]();
  const first = await payloads.next();
  const head = first.done ? undefined : decodePayload(first.value, `${name} frame 0`);
  if (head?.type !== 'header' || head.meta.kind !== 'snapshot') throw new CorruptStoreError(`${name} has no snapshot header`);
  async function* events(): AsyncIterable<MemoryEvent> {
    let count = 0;
    for (let frame = 1, next = await payloads.next(); !next.done; frame++, next = await payloads.next()) {
      const p = decodePayload(next.value, `${name} frame ${frame}`);
      if (p.type === 'end') {
        if (p.count !== count) throw new CorruptStoreError(`${name} says it holds ${p.count} memories but holds ${count}`);
        if (!(await payloads.next()).done) throw new CorruptStoreError(`${name} has entries after its end mark`);
        return;
      }
      if (p.type !== 'event' || p.event.type !== 'add') throw new CorruptStoreError(`${name} holds an entry that is not a memory`);
      count++;
      yield p.event;
    }
    throw new CorruptStoreError(`${name} is incomplete (no end mark)`);
  }
  return { meta: head.meta, events: events() };
}
