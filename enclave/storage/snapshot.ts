import type { BlobStore, PutConditions } from '../../common/blob-store.js';
import type { ChangeInfo, MemoryEvent, MemoryRecord, MemoryVersion, ReplayMark } from '../memory/types.js';
import { CorruptStoreError } from './errors.js';
import { decodePayload, encodeEnd, encodeEvent, encodeHeader, encodeHeads, encodeReplayIds, TENANT_SEALED, type FileMeta } from './payloads.js';
import { newHeader, readSealedStream, sealFrame, type StorageKey } from './sealed-file.js';

export const SNAPSHOT_NAME = 'snapshot.sealed';

/** The chain of heads a snapshot keeps: prefixes of heads `first`… up to the snapshot's head (head-chain.ts). */
export interface SnapshotHeads {
  first: number;
  pieces: Iterable<Uint8Array>;
}

export interface SnapshotEntry {
  record: MemoryRecord;
  vector: Float32Array;
  /** Who made the current version and when, and the versions before it (memory/history.ts). */
  change?: ChangeInfo;
  past?: MemoryVersion[];
}

/** A deleted memory's history, without content. */
export type SnapshotTombstone = Extract<MemoryEvent, { type: 'tombstone' }>;

/** An entry sealed under its tenant's key (payloads.ts 0x0b), read or written as it is. */
export interface SealedEntry {
  type: 'sealed';
  tenant_id: string;
  payload: Buffer;
}

/** Replay ids of sealed requests still in their window (payloads.ts 0x0d): what a snapshot keeps of the log's marks. */
export interface ReplayIdsEntry {
  type: 'replays';
  marks: ReplayMark[];
}

/** Replay ids per frame of a snapshot: about 60 bytes each, so a frame stays far below any limit. */
const REPLAY_IDS_PER_FRAME = 1000;

/** How a snapshot writes each memory and tombstone, and the locked tenants' entries it carries over unopened (tenant-keys.ts). */
export interface SnapshotSealing {
  encode(event: MemoryEvent): Buffer;
  held: Iterable<Buffer>;
}

const plainly: SnapshotSealing = { encode: encodeEvent, held: [] };

/** Sealed bytes are handed to the host store in chunks of about this size. */
const CHUNK_BYTES = 64 * 1024;

/**
 * The longest a snapshot seals before it lets the event loop turn (requests, commits).
 * Handing a chunk over is not enough: while the host store's stream has room, the put takes
 * the next one at once, within the same turn, so without this a large snapshot holds every
 * request and commit for the stream's buffer's worth of sealing at a time.
 */
export const SNAPSHOT_SLICE_MS = 8;

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Writes a snapshot atomically (one put: the host store replaces the blob only once all of
 * it is on disk): the header frame, the chain of heads (if given), every record as a sealed
 * frame, then every deleted memory's history (`deleted`), and an end frame, which carries
 * their counts, so a shortened snapshot is detected. A keyed tenant's memories and
 * tombstones are sealed under its key (`sealing.encode`), and locked tenants' entries are
 * copied as they are after the memories (`sealing.held`); all of them are counted apart. The
 * replay ids still in their window (`replays`) come after the heads, before the memories.
 * Returns its size, count and version; refused (BlobConflictError) if `conditions` fail.
 */
export async function writeSnapshot(
  blobs: BlobStore, name: string, key: StorageKey, meta: FileMeta, entries: Iterable<SnapshotEntry>, heads?: SnapshotHeads,
  deleted: Iterable<SnapshotTombstone> = [], conditions?: PutConditions, sealing: SnapshotSealing = plainly, replays: readonly ReplayMark[] = [],
  sliceMs = SNAPSHOT_SLICE_MS,
): Promise<{ bytes: number; count: number; version: string }> {
  let bytes = 0;
  let count = 0;
  let tombstones = 0;
  let keyed = 0;
  // A frame of a keyed tenant (0x0b) counts as sealed, whatever it holds.
  const isSealed = (payload: Buffer) => payload[0] === TENANT_SEALED;
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
    // A chunk is handed over only after the event loop has turned, once a slice is used up.
    let sliceStarted = performance.now();
    const handOver = async () => {
      if (performance.now() - sliceStarted >= sliceMs) {
        await nextTurn();
        sliceStarted = performance.now();
      }
      return flush();
    };
    let seq = 1;
    let first = heads?.first ?? 0;
    for (const piece of heads?.pieces ?? []) {
      chunk.push(sealFrame(key, header, seq++, encodeHeads(first, piece)));
      first += piece.length / 8;
      yield flush();
    }
    const add = (payload: Buffer) => {
      const frame = sealFrame(key, header, seq++, payload);
      chunk.push(frame);
      chunkBytes += frame.length;
    };
    for (let i = 0; i < replays.length; i += REPLAY_IDS_PER_FRAME) add(encodeReplayIds(replays.slice(i, i + REPLAY_IDS_PER_FRAME)));
    for (const { record, vector, change, past } of entries) {
      const payload = sealing.encode({ type: 'add', record, vector, change, past });
      if (isSealed(payload)) keyed++;
      else count++;
      add(payload);
      if (chunkBytes >= CHUNK_BYTES) yield await handOver();
    }
    for (const payload of sealing.held) {
      keyed++;
      add(payload);
      if (chunkBytes >= CHUNK_BYTES) yield await handOver();
    }
    for (const tombstone of deleted) {
      const payload = sealing.encode(tombstone);
      if (isSealed(payload)) keyed++;
      else tombstones++;
      add(payload);
      if (chunkBytes >= CHUNK_BYTES) yield await handOver();
    }
    chunk.push(sealFrame(key, header, seq, encodeEnd(count, tombstones, keyed, replays.length)));
    yield flush();
  }
  const { version } = await blobs.put(name, sealed(), conditions);
  return { bytes, count, version };
}

export interface SnapshotReader {
  /** The snapshot's metadata, checked before any of its memories is handed out. */
  meta: FileMeta;
  /** Its chain of heads (format 4), read before its memories: consecutive pieces from `first`. */
  heads?: { first: number; pieces: Buffer[] };
  /** Its replay ids, then its memories (and keyed tenants' sealed entries), streamed; throws at the end if the snapshot is incomplete. */
  events: AsyncIterable<MemoryEvent | SealedEntry | ReplayIdsEntry>;
  /** Lets go of the blob's stream if its memories were not all read (a refused open); harmless after. */
  close(): Promise<void>;
}

/**
 * Opens a snapshot for streaming: reads and returns its header, then hands out its memories
 * one by one as the blob arrives. Anything short of complete and authentic is refused.
 */
export async function readSnapshot(chunks: AsyncIterable<Buffer>, key: StorageKey, name: string): Promise<SnapshotReader> {
  const payloads = readSealedStream(chunks, 'snapshot', key, name)[Symbol.asyncIterator]();
  const close = async () => { await payloads.return?.(undefined); };
  try {
    return await readOpened(payloads, name, close);
  } catch (err) {
    await close();
    throw err;
  }
}

async function readOpened(payloads: AsyncIterator<Buffer>, name: string, close: () => Promise<void>): Promise<SnapshotReader> {
  const first = await payloads.next();
  const head = first.done ? undefined : decodePayload(first.value, `${name} frame 0`);
  if (head?.type !== 'header' || head.meta.kind !== 'snapshot') throw new CorruptStoreError(`${name} has no snapshot header`);
  // The chain of heads comes first, in consecutive pieces; the first frame after it is kept for events().
  let heads: SnapshotReader['heads'];
  let frame = 1;
  let pending = await payloads.next();
  for (; !pending.done; frame++, pending = await payloads.next()) {
    const p = decodePayload(pending.value, `${name} frame ${frame}`);
    if (p.type !== 'heads') break;
    heads ??= { first: p.first, pieces: [] };
    const expected = heads.first + heads.pieces.reduce((n, piece) => n + piece.length / 8, 0);
    if (p.first !== expected) throw new CorruptStoreError(`${name} frame ${frame}: heads from ${p.first}, expected ${expected}`);
    heads.pieces.push(p.prefixes);
  }
  const firstEvent = { frame, next: pending };
  async function* events(): AsyncIterable<MemoryEvent | SealedEntry | ReplayIdsEntry> {
    let count = 0;
    let tombstones = 0;
    let sealed = 0;
    let replays = 0;
    for (let { frame, next } = firstEvent; !next.done; frame++, next = await payloads.next()) {
      const p = decodePayload(next.value, `${name} frame ${frame}`);
      if (p.type === 'end') {
        if (p.count !== count) throw new CorruptStoreError(`${name} says it holds ${p.count} memories but holds ${count}`);
        if ((p.deleted ?? 0) !== tombstones) throw new CorruptStoreError(`${name} says it holds ${p.deleted ?? 0} deleted memories' histories but holds ${tombstones}`);
        if ((p.sealed ?? 0) !== sealed) throw new CorruptStoreError(`${name} says it holds ${p.sealed ?? 0} entries sealed under tenant keys but holds ${sealed}`);
        if ((p.replays ?? 0) !== replays) throw new CorruptStoreError(`${name} says it holds ${p.replays ?? 0} replay ids but holds ${replays}`);
        if (!(await payloads.next()).done) throw new CorruptStoreError(`${name} has entries after its end mark`);
        return;
      }
      if (p.type === 'replays') {
        if (count + sealed + tombstones > 0) throw new CorruptStoreError(`${name} frame ${frame}: replay ids after its memories`);
        replays += p.marks.length;
        yield p;
        continue;
      }
      // A snapshot's changes carry no replay mark: its ids are kept apart, above.
      if ((p.type === 'sealed' || p.type === 'event') && p.replay) throw new CorruptStoreError(`${name} frame ${frame}: a memory with a replay mark`);
      if (p.type === 'sealed') {
        sealed++;
        yield p;
        continue;
      }
      if (p.type === 'event' && p.event.type === 'tombstone') {
        tombstones++;
        yield p.event;
        continue;
      }
      if (p.type !== 'event' || p.event.type !== 'add' || tombstones > 0) throw new CorruptStoreError(`${name} holds an entry that is not a memory`);
      count++;
      yield p.event;
    }
    throw new CorruptStoreError(`${name} is incomplete (no end mark)`);
  }
  return { meta: head.meta, ...(heads ? { heads } : {}), events: events(), close };
}
