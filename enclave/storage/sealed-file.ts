/**
 * The sealed file format shared by the memory log and snapshots. Every byte of user data
 * on disk goes through here.
 *
 *   file   = header frame*
 *   header = magic (8, "PASLOG01" | "PASSNP01" | "PASGRF01") | file id (16, random) | key id (8)      — in clear
 *   frame  = "SBX1" (4) | box length (u32 BE) | nonce (24, random) | secretbox(body)
 *   body   = header (32) | sequence number (u64 BE) | payload
 *
 * secretbox (XSalsa20-Poly1305) authenticates the body, and the body repeats the file's
 * header and the frame's position, so a frame cannot be altered, reordered, dropped from
 * the middle, duplicated, or moved from another file (even one sealed with the same key)
 * without the reader noticing. The key id only lets the reader say "wrong key" plainly.
 */
import { createHash, hkdfSync, randomBytes } from 'node:crypto';
import { SECRETBOX, secretbox, secretboxOpen } from './secretbox.js';
import { CorruptStoreError, PreparedStateStale } from './errors.js';
import { pooledRandomBytes } from '../random-bytes.js';

export type FileKind = 'log' | 'snapshot' | 'graph';

export const HEADER_BYTES = 32;
const MAGIC: Record<FileKind, Buffer> = { log: Buffer.from('PASLOG01'), snapshot: Buffer.from('PASSNP01'), graph: Buffer.from('PASGRF01') };
const FRAME_MAGIC = Buffer.from('SBX1');
const FRAME_PREFIX = 4 + 4 + SECRETBOX.nonceLength;
const BODY_PREFIX = HEADER_BYTES + 8;
/** No legitimate frame is this large (a memory is at most ~130 KB); larger means damage. */
export const MAX_BOX_BYTES = 16 * 1024 * 1024;

export interface StorageKey {
  /** The secretbox key for memory files, derived from the sealing key. */
  readonly box: Uint8Array;
  /** 8 bytes that name the sealing key without revealing it. */
  readonly id: Buffer;
}

/** Derives the memory-store key (domain-separated, so the sealing key can seal other things too). */
export function deriveStorageKey(sealingKey: Uint8Array): StorageKey {
  if (sealingKey.length !== SECRETBOX.keyLength) throw new Error(`sealing key must be ${SECRETBOX.keyLength} bytes`);
  const box = new Uint8Array(hkdfSync('sha256', sealingKey, Buffer.alloc(0), 'private-agent-service/memory-store/v1', 32));
  const id = createHash('sha256').update('private-agent-service/key-id/v1\0').update(box).digest().subarray(0, 8);
  return { box, id: Buffer.from(id) };
}

/** A fresh header: a new random file id under the given key. */
export function newHeader(kind: FileKind, key: StorageKey): Buffer {
  return Buffer.concat([MAGIC[kind], randomBytes(16), key.id]);
}

export function sealFrame(key: StorageKey, header: Buffer, seq: number, payload: Uint8Array): Buffer {
  const body = Buffer.allocUnsafe(BODY_PREFIX + payload.length);
  header.copy(body, 0);
  body.writeBigUInt64BE(BigInt(seq), HEADER_BYTES);
  body.set(payload, BODY_PREFIX);
  const nonce = pooledRandomBytes(SECRETBOX.nonceLength);
  const box = secretbox(body, nonce, key.box);
  const frame = Buffer.allocUnsafe(FRAME_PREFIX + box.length);
  FRAME_MAGIC.copy(frame, 0);
  frame.writeUInt32BE(box.length, 4);
  nonce.copy(frame, 8);
  frame.set(box, FRAME_PREFIX);
  return frame;
}

type FrameResult =
  | { kind: 'ok'; seq: number; payload: Buffer; end: number }
  /** Authentic under our key but from another file: only tampering does that. */
  | { kind: 'foreign' }
  /** The bytes end inside the frame, as after a crash mid-append. */
  | { kind: 'torn' }
  /** Not a frame, or one that does not authenticate. */
  | { kind: 'bad' };

function openFrame(key: StorageKey, header: Buffer, buf: Buffer, offset: number): FrameResult {
  if (buf.length - offset < FRAME_PREFIX) {
    // A short remainder is torn if what is there could still be the start of a frame.
    const have = buf.subarray(offset, offset + 4);
    return FRAME_MAGIC.subarray(0, have.length).equals(have) ? { kind: 'torn' } : { kind: 'bad' };
  }
  if (!buf.subarray(offset, offset + 4).equals(FRAME_MAGIC)) return { kind: 'bad' };
  const boxLength = buf.readUInt32BE(offset + 4);
  if (boxLength < SECRETBOX.overheadLength + BODY_PREFIX || boxLength > MAX_BOX_BYTES) return { kind: 'bad' };
  const end = offset + FRAME_PREFIX + boxLength;
  if (end > buf.length) return { kind: 'torn' };
  const nonce = buf.subarray(offset + 8, offset + FRAME_PREFIX);
  const b = secretboxOpen(buf.subarray(offset + FRAME_PREFIX, end), nonce, key.box);
  if (!b) return { kind: 'bad' };
  if (!b.subarray(0, HEADER_BYTES).equals(header)) return { kind: 'foreign' };
  const seq = b.readBigUInt64BE(HEADER_BYTES);
  if (seq > BigInt(Number.MAX_SAFE_INTEGER)) return { kind: 'bad' };
  return { kind: 'ok', seq: Number(seq), payload: b.subarray(BODY_PREFIX), end };
}

export interface SealedFile {
  header: Buffer;
  /** Payloads in sequence order, starting at sequence 0. */
  payloads: Buffer[];
  /** Offset just past the last good frame. */
  validEnd: number;
  /** Set when a torn or corrupt tail was found (and tolerated): what would be cut. */
  tail?: { offset: number; bytes: number };
}

export interface ReadOptions {
  /** A log's last file may end in a torn or corrupt tail, which is reported for cutting. */
  allowTail: boolean;
  /**
   * The most bytes the writer can have put in this file: authentic frames past it are
   * refused, and a damaged tail is not read past it (a host that streams gigabytes of junk
   * after the last frame costs the reader nothing more). Unbounded when absent.
   */
  maxBytes?: number;
  /** Also keep the last good frame's bytes and offset (SealedLogRead.last), for a later read to continue after it (`after`). */
  keepLast?: boolean;
  /**
   * Continues an earlier read of this file (a shard read ahead, then opened) from its last good
   * frame instead of from the start: the chunks given begin at `last.offset`, where that frame
   * must be found again byte for byte (its random nonce makes it that write and no other), ending
   * at `bytes`; the frames after it are read as usual under `header`, numbered on from `frames`.
   * Other bytes there, or fewer, throw PreparedStateStale before any payload is handed out.
   */
  after?: { bytes: number; frames: number; header: Buffer; last: LastFrame };
}

/** A file's last good frame as read: where it starts, and its bytes. */
export interface LastFrame {
  offset: number;
  bytes: Buffer;
}

/** What readSealedLog found, besides the payloads it handed out. */
export interface SealedLogRead {
  header: Buffer;
  frames: number;
  validEnd: number;
  tail?: { offset: number; bytes: number };
  /** With `keepLast` or `after`: the last good frame (the header's 32 bytes are not one: undefined when no frame is good). */
  last?: LastFrame;
}

/** Reads and authenticates a whole sealed file held in memory (see readSealedLog). */
export async function readSealedFile(buf: Buffer, kind: FileKind, key: StorageKey, name: string, options: ReadOptions): Promise<SealedFile> {
  const payloads: Buffer[] = [];
  const read = await readSealedLog(oneChunk(buf), kind, key, name, options, (payload) => { payloads.push(payload); });
  return { header: read.header, payloads, validEnd: read.validEnd, ...(read.tail ? { tail: read.tail } : {}) };
}

async function* oneChunk(buf: Buffer): AsyncIterable<Buffer> {
  yield buf;
}

/**
 * Reads a sealed file as its bytes arrive, handing each payload to `each` in order, so
 * memory stays bounded by one frame whatever the file's size. Refuses (CorruptStoreError)
 * anything that is not exactly a run of this file's frames in order, except, when allowed,
 * a damaged tail: bytes after the last good frame that hold no further authentic frame of
 * this file. Finding that out means scanning the tail, within `maxBytes`.
 */
export async function readSealedLog(
  chunks: AsyncIterable<Buffer>, kind: FileKind, key: StorageKey, name: string, options: ReadOptions,
  each: (payload: Buffer, seq: number) => void,
): Promise<SealedLogRead> {
  const maxBytes = options.maxBytes ?? Infinity;
  let header: Buffer | undefined;
  let buf: Buffer = Buffer.alloc(0);
  /** File offset of buf[0]. */
  let base = 0;
  let frames = 0;
  let validEnd = 0;
  /** The last good frame, kept (without a copy until the end) with `keepLast` or `after`. */
  const keep = options.keepLast === true || options.after !== undefined;
  let last: { offset: number; bytes: Buffer } | undefined;
  const source = options.after ? afterLastFrame(chunks, options.after, name) : chunks;
  if (options.after) {
    header = options.after.header;
    base = options.after.bytes;
    validEnd = options.after.bytes;
    frames = options.after.frames;
    last = options.after.last;
  }
  /** Where the damage starts, once found: from then on the rest is only scanned. */
  let damage: { offset: number; what: string } | undefined;
  let capped = false;

  /** Looks for authentic frames after the damage; `final`: no more bytes come, so an incomplete one is not one. */
  const scan = (final: boolean) => {
    // Every frame magic after the damage is tried; one left incomplete waits for more bytes.
    let at = buf.indexOf(FRAME_MAGIC, Math.max(0, damage!.offset + 1 - base));
    for (; at !== -1; at = buf.indexOf(FRAME_MAGIC, at + 1)) {
      const frame = openFrame(key, header!, buf, at);
      if (frame.kind === 'ok' || frame.kind === 'foreign') {
        throw new CorruptStoreError(`${name}: ${damage!.what} at byte ${damage!.offset} is followed by valid frames (the file was altered or damaged in the middle)`);
      }
      if (frame.kind === 'torn' && !final) break;
    }
    // Keep only what an undecided frame may still need.
    const keepFrom = at === -1 ? Math.max(0, buf.length - (FRAME_MAGIC.length - 1)) : at;
    base += keepFrom;
    buf = buf.subarray(keepFrom);
  };

  const parse = () => {
    let at = 0;
    for (;;) {
      const frame = openFrame(key, header!, buf, at);
      if (frame.kind === 'torn') break; // the rest of the frame is in a later chunk, or the file ends here
      if (frame.kind === 'foreign') throw new CorruptStoreError(`${name}: the frame at byte ${base + at} belongs to another file`);
      if (frame.kind === 'bad') {
        damage = { offset: base + at, what: 'a frame that does not authenticate' };
        break;
      }
      if (frame.seq !== frames) {
        throw new CorruptStoreError(`${name}: frame ${frame.seq} found where frame ${frames} belongs (frames were removed, reordered or repeated)`);
      }
      if (base + frame.end > maxBytes) {
        // The writer never goes past maxBytes, so whatever lies there is not its.
        damage = { offset: base + at, what: `bytes past ${maxBytes}, the largest size this file can have` };
        capped = true;
        break;
      }
      if (keep) last = { offset: base + at, bytes: buf.subarray(at, frame.end) };
      each(frame.payload, frames);
      frames++;
      at = frame.end;
      validEnd = base + at;
    }
    base += at;
    buf = buf.subarray(at);
  };

  for await (const chunk of source) {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    if (!header) {
      if (buf.length < HEADER_BYTES) continue;
      header = checkHeader(buf, kind, key, name);
      base = HEADER_BYTES;
      validEnd = HEADER_BYTES;
      buf = buf.subarray(HEADER_BYTES);
    }
    if (!damage) parse();
    if (capped) break;
    if (damage) scan(false);
    if (base + buf.length > maxBytes) {
      // Past what the writer can have written: nothing more is read.
      if (!damage) damage = { offset: validEnd, what: `bytes past ${maxBytes}, the largest size this file can have` };
      capped = true;
      break;
    }
  }
  if (!header) throw new CorruptStoreError(`${name} is too short to be a sealed ${kind} file`);
  // A copy: the frame's bytes are a view of a chunk that would otherwise be kept whole.
  const kept = keep && last ? { last: { offset: last.offset, bytes: Buffer.from(last.bytes) } } : {};
  if (!damage && base + buf.length === validEnd) return { header, frames, validEnd, ...kept };

  if (!damage) {
    // The bytes end inside a frame: torn, unless an authentic frame hides in what is left.
    damage = { offset: validEnd, what: 'an incomplete frame' };
    scan(true);
  } else if (!capped) {
    scan(true);
  }
  if (!options.allowTail) throw new CorruptStoreError(`${name}: ${damage.what} at byte ${damage.offset}`);
  // A capped read does not know the file's true end: at least one byte more is cut.
  const end = Math.max(base + buf.length, validEnd + 1);
  return { header, frames, validEnd, tail: { offset: validEnd, bytes: end - validEnd }, ...kept };
}

/**
 * The chunks after the frame an earlier read ended at (`after.last`), once the chunks, which
 * start where that frame started, are found to begin with it byte for byte and to reach
 * `after.bytes`; PreparedStateStale otherwise. Those bytes are compared, not opened: they were
 * authenticated by the read that kept them. The host says where the chunks start; that they hold
 * that very frame is the proof that the file still runs, at that point, through what was read.
 */
async function* afterLastFrame(chunks: AsyncIterable<Buffer>, after: { bytes: number; last: LastFrame }, name: string): AsyncIterable<Buffer> {
  const expected = after.last.bytes;
  if (after.last.offset + expected.length !== after.bytes) throw new PreparedStateStale(`${name}: the frame read last does not end where the read ended`);
  let seen = 0;
  for await (const chunk of chunks) {
    if (seen >= expected.length) {
      yield chunk;
      continue;
    }
    const take = Math.min(chunk.length, expected.length - seen);
    if (!chunk.subarray(0, take).equals(expected.subarray(seen, seen + take))) {
      throw new PreparedStateStale(`${name}: the frame at byte ${after.last.offset} is no longer the one read there before (the file was rewritten, forked or swapped, or the host sent other bytes)`);
    }
    seen += take;
    if (take < chunk.length) yield chunk.subarray(take);
  }
  if (seen < expected.length) throw new PreparedStateStale(`${name} ends (or the host sent no more) before byte ${after.bytes}, where it was read to before`);
}

/** The file's header, once its magic and key id are checked. */
function checkHeader(buf: Buffer, kind: FileKind, key: StorageKey, name: string): Buffer {
  if (buf.length < HEADER_BYTES) throw new CorruptStoreError(`${name} is too short to be a sealed ${kind} file`);
  const header = Buffer.from(buf.subarray(0, HEADER_BYTES));
  if (!header.subarray(0, 8).equals(MAGIC[kind])) throw new CorruptStoreError(`${name} is not a sealed ${kind} file`);
  const keyId = header.subarray(24, 32);
  if (!keyId.equals(key.id)) {
    throw new CorruptStoreError(`${name} was sealed with a different key (key id ${keyId.toString('hex')}, this enclave's is ${key.id.toString('hex')})`);
  }
  return header;
}

/**
 * Reads a sealed file as its bytes arrive, yielding each payload in order, so a snapshot of
 * any size is restored without holding the file in memory. Unlike readSealedFile, nothing
 * short of complete is accepted: a snapshot is written whole or not at all.
 */
export async function* readSealedStream(chunks: AsyncIterable<Buffer>, kind: FileKind, key: StorageKey, name: string): AsyncGenerator<Buffer> {
  let header: Buffer | undefined;
  let buf: Buffer = Buffer.alloc(0);
  let consumed = 0;
  let seq = 0;
  for await (const chunk of chunks) {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    if (!header) {
      if (buf.length < HEADER_BYTES) continue;
      header = checkHeader(buf, kind, key, name);
      buf = buf.subarray(HEADER_BYTES);
      consumed = HEADER_BYTES;
    }
    let at = 0;
    for (;;) {
      const frame = openFrame(key, header, buf, at);
      if (frame.kind === 'torn') break; // the rest of the frame is in a later chunk
      if (frame.kind === 'foreign') throw new CorruptStoreError(`${name}: the frame at byte ${consumed + at} belongs to another file`);
      if (frame.kind === 'bad') throw new CorruptStoreError(`${name}: a frame that does not authenticate at byte ${consumed + at}`);
      if (frame.seq !== seq) throw new CorruptStoreError(`${name}: frame ${frame.seq} found where frame ${seq} belongs (frames were removed, reordered or repeated)`);
      seq++;
      yield frame.payload;
      at = frame.end;
    }
    buf = buf.subarray(at);
    consumed += at;
  }
  if (!header) throw new CorruptStoreError(`${name} is too short to be a sealed ${kind} file`);
  if (buf.length > 0) throw new CorruptStoreError(`${name}: an incomplete frame at byte ${consumed} (the file was cut short)`);
}
