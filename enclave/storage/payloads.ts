/**
 * What a frame's payload holds: a file header, a memory event, or a snapshot's end mark.
 *
 *   0x01 header  JSON
 *   0x02 add     u32 BE JSON length | JSON of the record | vector as float32 little-endian
 *   0x03 delete  JSON {tenant_id, id, change?}
 *   0x04 end     JSON {count, deleted?, sealed?}: memories, deleted memories' histories, tenant-sealed entries
 *   0x05 update  as add: the memory's new version
 *   0x06 heads   u64 BE seq of the first | 8 bytes per head: its hash's first 8 bytes, in order (snapshots, format 4)
 *   0x07 fence   JSON {writer, generation?}: a writer took the log over here (an enclave that opened the store,
 *                as owner `generation`, its fencing token); no change. Any writer that had appended before it
 *                now finds the log's end moved, and stops; a later opener with a lower generation is refused.
 *                An enclave from before fences refuses such a log (unknown payload type 7).
 *   0x08 add with its change    u32 BE JSON length | JSON of the record | change | vector
 *   0x09 update with its change as 0x08
 *     change: u8 flags (1 extracted, 2 a key id of 32 hex digits, 4 another key id, 8 past versions)
 *             | u32 BE at | the key id: 16 bytes (2), or u8 length and UTF-8 (4) | u32 BE length and JSON of the past versions (8)
 *   0x0a tombstone  JSON {tenant_id, id, versions}: a deleted memory's history, without content (snapshots)
 *   0x0b tenant-sealed  u8 tenant id length | tenant id UTF-8 | 8 bytes naming the embedding model | 24-byte nonce
 *                | secretbox of another payload (0x03, 0x08, 0x09, 0x0a) under the tenant's key (tenant-keys.ts):
 *                a change of a tenant whose memories are sealed under a key the client holds. With the sealing key
 *                alone, only the tenant id and the model (which every file's header names anyway) are readable.
 *   0x0c with its sealed request  replay mark | another payload (0x03, 0x08, 0x09, 0x0a, 0x0b): the first change
 *                of a batch a sealed request made, with that request's replay id (logs only). Under the sealing key
 *                only, not the tenant's, so that a shard opens with its ids while a keyed tenant is locked.
 *   0x0d replay ids  one or more replay marks: those still in their window when a snapshot was written (snapshots,
 *                after the heads, before the memories).
 *     replay mark: u8 id length | id UTF-8 | u64 BE when its window ends (epoch ms)
 *   An enclave from before replay ids refuses a store holding them (unknown payload type 12 or 13).
 *
 * 0x08 and 0x09 carry who made the change and when (ChangeInfo) and, in a snapshot, the
 * memory's past versions (memory/history.ts), apart from the record, in binary: a recovery
 * decodes every record, and a second JSON parse each cost it about a microsecond more. Entries
 * written before history was kept are 0x02 and 0x05, and read as before.
 *
 * Vectors are stored, so recovery rebuilds the indexes without running the model again.
 */
import { endianness } from 'node:os';
import type { ChangeInfo, MemoryEvent, MemoryRecord, MemoryVersion, ReplayMark } from '../memory/types.js';
import { CorruptStoreError } from './errors.js';
import { unreachable } from '../unreachable.js';
import type { StateHead } from './state-head.js';

/**
 * 4 keeps the chain of heads (their hashes' first 8 bytes) in every snapshot, right after
 * its header, so the enclave can tell whether a head a client saw is on its chain after a
 * restart (head-chain.ts); a format 3 snapshot has none, and the chain then starts at its head.
 * 3 chains the files: each records the store's id and the state head it starts from.
 * 2 recorded the embedding model's hash; 1 did not. Formats 1 and 2 are still read, and a
 * store holding them is rewritten as format 3 at open.
 */
export const FORMAT_VERSION = 4;
export const READABLE_FORMATS: readonly number[] = [1, 2, 3, 4];

export interface FileMeta {
  format: number;
  kind: 'log' | 'snapshot';
  /** Snapshot g holds every change of logs 1..g-1; log g holds the changes after it. */
  generation: number;
  /** The model the file's vectors come from (EmbeddingModelId). */
  embedding_model: string;
  dimension: number;
  /** Absent in format 1. */
  embedding_sha256?: string;
  created_at: number;
  /** Format 3: the random id of the store the file belongs to. */
  store_id?: string;
  /** Format 3: the state head before the file's first change (a snapshot: the head its log starts from). */
  head?: StateHead;
  /**
   * A log segment: the most bytes its writer will ever put in it (it refuses writes past
   * it), so a reader reads no further. Absent in segments written before it was recorded.
   */
  max_bytes?: number;
  /**
   * The generation (fencing token) of the owner that wrote the file: a store is refused to an
   * opener with a lower one. Kept in every file, so a compaction that deletes the segments
   * holding fence entries keeps the highest generation. Absent in files from before generations.
   */
  owner_generation?: number;
}

/** `replay`: the sealed request the change came in (0x0c), if any. */
export type Payload =
  | { type: 'header'; meta: FileMeta }
  | { type: 'event'; event: MemoryEvent; replay?: ReplayMark }
  /** `deleted`: the tombstones before it, `replays`: the replay ids (each absent in snapshots written before them). */
  | { type: 'end'; count: number; deleted?: number; sealed?: number; replays?: number }
  | { type: 'replays'; marks: ReplayMark[] }
  /** Prefixes of the heads from seq `first` on (head-chain.ts). */
  | { type: 'heads'; first: number; prefixes: Buffer }
  /** `generation`: the owner's fencing token (absent in fences from before generations). */
  | { type: 'fence'; writer: string; generation?: number }
  /** A change of `tenant_id` sealed under its tenant key: `payload` is the whole entry, kept as it is while the tenant is locked. */
  | { type: 'sealed'; tenant_id: string; payload: Buffer; replay?: ReplayMark };

const HEADER = 0x01;
const ADD = 0x02;
const DELETE = 0x03;
const END = 0x04;
const UPDATE = 0x05;
const HEADS = 0x06;
const FENCE = 0x07;
const ADD_CHANGE = 0x08;
const UPDATE_CHANGE = 0x09;
const TOMBSTONE = 0x0a;
export const TENANT_SEALED = 0x0b;
const REPLAY_MARKED = 0x0c;
const REPLAY_IDS = 0x0d;

/**
 * Vectors are stored as float32 little-endian: on a little-endian machine (x86, Graviton)
 * their bytes are copied whole rather than written and read one float at a time. A recovery
 * decodes every record (a 100-d memory record: 4.3-4.7 us one float at a time, 2.9-3.3 copied).
 */
const LITTLE_ENDIAN = endianness() === 'LE';

/** An owner generation: a fencing token, a non-negative safe integer. */
export const isGeneration = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;

const tagged = (tag: number, json: unknown) => Buffer.concat([Buffer.of(tag), Buffer.from(JSON.stringify(json))]);

export const encodeHeader = (meta: FileMeta): Buffer => tagged(HEADER, meta);
export const encodeEnd = (count: number, deleted?: number, sealed?: number, replays?: number): Buffer =>
  tagged(END, { count, ...(deleted ? { deleted } : {}), ...(sealed ? { sealed } : {}), ...(replays ? { replays } : {}) });
export const encodeFence = (writer: string, generation?: number): Buffer => tagged(FENCE, generation === undefined ? { writer } : { writer, generation });

export function encodeHeads(first: number, prefixes: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(9 + prefixes.length);
  out[0] = HEADS;
  out.writeBigUInt64BE(BigInt(first), 1);
  out.set(prefixes, 9);
  return out;
}

export function encodeEvent(event: MemoryEvent): Buffer {
  switch (event.type) {
    case 'delete':
      return tagged(DELETE, event.change ? { tenant_id: event.tenant_id, id: event.id, change: event.change } : { tenant_id: event.tenant_id, id: event.id });
    case 'add':
      return encodeVersion(ADD, event.record, event.vector, event.change, event.past);
    case 'update':
      return encodeVersion(UPDATE, event.record, event.vector, event.change);
    case 'tombstone':
      return tagged(TOMBSTONE, { tenant_id: event.tenant_id, id: event.id, versions: event.versions });
    default:
      return unreachable(event, 'memory event');
  }
}

const EXTRACTED = 1;
const HEX_KEY = 2;
const TEXT_KEY = 4;
const PAST = 8;
const HEX32 = /^[0-9a-f]{32}$/;

/** The change part of 0x08 and 0x09 (see above). */
function encodeChange(change: ChangeInfo | undefined, past: MemoryVersion[] | undefined): Buffer {
  const key = change?.key_id ?? null;
  const hex = key !== null && HEX32.test(key);
  const text = key !== null && !hex ? Buffer.from(key, 'utf8').subarray(0, 255) : undefined;
  const pastJson = past ? Buffer.from(JSON.stringify(past)) : undefined;
  const out = Buffer.alloc(5 + (hex ? 16 : 0) + (text ? 1 + text.length : 0) + (pastJson ? 4 + pastJson.length : 0));
  out[0] = (change?.extracted ? EXTRACTED : 0) | (hex ? HEX_KEY : 0) | (text ? TEXT_KEY : 0) | (pastJson ? PAST : 0);
  out.writeUInt32BE(change?.at ?? 0, 1);
  let at = 5;
  if (hex) at += out.write(key, at, 'hex');
  if (text) {
    out[at] = text.length;
    text.copy(out, at + 1);
    at += 1 + text.length;
  }
  if (pastJson) {
    out.writeUInt32BE(pastJson.length, at);
    pastJson.copy(out, at + 4);
  }
  return out;
}

function decodeChange(payload: Buffer, from: number): { change: ChangeInfo; past?: MemoryVersion[]; end: number } {
  const flags = payload[from];
  const change: ChangeInfo = { at: payload.readUInt32BE(from + 1), key_id: null, extracted: (flags & EXTRACTED) !== 0 };
  let at = from + 5;
  if (flags & HEX_KEY) {
    change.key_id = payload.toString('hex', at, at + 16);
    at += 16;
  } else if (flags & TEXT_KEY) {
    change.key_id = payload.toString('utf8', at + 1, at + 1 + payload[at]);
    at += 1 + payload[at];
  }
  if (!(flags & PAST)) return { change, end: at };
  const end = at + 4 + payload.readUInt32BE(at);
  return { change, past: JSON.parse(payload.toString('utf8', at + 4, end)) as MemoryVersion[], end };
}

function encodeMarks(tag: number, marks: readonly ReplayMark[], rest?: Uint8Array): Buffer {
  const ids = marks.map((mark) => Buffer.from(mark.id, 'utf8'));
  for (const id of ids) if (id.length === 0 || id.length > 255) throw new RangeError('a replay id is 1 to 255 bytes');
  const out = Buffer.allocUnsafe(1 + ids.reduce((n, id) => n + 9 + id.length, 0) + (rest?.length ?? 0));
  out[0] = tag;
  let at = 1;
  marks.forEach((mark, i) => {
    out[at] = ids[i].length;
    at += 1 + ids[i].copy(out, at + 1);
    out.writeBigUInt64BE(BigInt(mark.expires_at), at);
    at += 8;
  });
  if (rest) out.set(rest, at);
  return out;
}

/** A change's entry (encodeEvent, or a tenant-sealed one) with the replay id of the sealed request it came in (0x0c). */
export const encodeReplayMarked = (mark: ReplayMark, entry: Uint8Array): Buffer => encodeMarks(REPLAY_MARKED, [mark], entry);

/** Replay ids still in their window, for a snapshot (0x0d). */
export const encodeReplayIds = (marks: readonly ReplayMark[]): Buffer => encodeMarks(REPLAY_IDS, marks);

/** The replay mark at `from`, and where it ends. */
function decodeMark(payload: Buffer, from: number): { mark: ReplayMark; end: number } {
  const idEnd = from + 1 + payload[from];
  if (payload[from] === 0 || idEnd + 8 > payload.length) throw new Error('a replay mark cut short');
  const expiresAt = Number(payload.readBigUInt64BE(idEnd));
  if (!Number.isSafeInteger(expiresAt)) throw new Error('a replay mark with an invalid expiry');
  return { mark: { id: payload.toString('utf8', from + 1, idEnd), expires_at: expiresAt }, end: idEnd + 8 };
}

/** An add or update: the record's JSON, then (0x08, 0x09) its change and past versions, then its vector. */
function encodeVersion(tag: typeof ADD | typeof UPDATE, record: MemoryRecord, vector: Float32Array, change?: ChangeInfo, past?: MemoryVersion[]): Buffer {
  const json = Buffer.from(JSON.stringify(record));
  const info = change || past ? encodeChange(change, past) : undefined;
  const out = Buffer.allocUnsafe(1 + 4 + json.length + (info?.length ?? 0) + vector.length * 4);
  out[0] = info ? (tag === ADD ? ADD_CHANGE : UPDATE_CHANGE) : tag;
  out.writeUInt32BE(json.length, 1);
  json.copy(out, 5);
  let at = 5 + json.length;
  if (info) at += info.copy(out, at);
  if (LITTLE_ENDIAN) out.set(new Uint8Array(vector.buffer, vector.byteOffset, vector.byteLength), at);
  else for (const x of vector) at = out.writeFloatLE(x, at);
  return out;
}

/** Decodes a payload that authenticated; a malformed one means a bug or a foreign writer. */
export function decodePayload(payload: Buffer, where: string): Payload {
  try {
    switch (payload[0]) {
      case HEADER:
        return { type: 'header', meta: JSON.parse(payload.subarray(1).toString('utf8')) as FileMeta };
      case HEADS: {
        const first = Number(payload.readBigUInt64BE(1));
        if (!Number.isSafeInteger(first) || (payload.length - 9) % 8 !== 0) throw new Error('malformed heads');
        return { type: 'heads', first, prefixes: payload.subarray(9) };
      }
      case FENCE: {
        const { writer, generation } = JSON.parse(payload.subarray(1).toString('utf8')) as { writer: unknown; generation?: unknown };
        if (generation !== undefined && !isGeneration(generation)) throw new Error('a fence with an invalid generation');
        return { type: 'fence', writer: String(writer), ...(generation === undefined ? {} : { generation }) };
      }
      case END: {
        const { count, deleted, sealed, replays } = JSON.parse(payload.subarray(1).toString('utf8')) as { count: number; deleted?: number; sealed?: number; replays?: number };
        return {
          type: 'end', count, ...(deleted === undefined ? {} : { deleted }), ...(sealed === undefined ? {} : { sealed }), ...(replays === undefined ? {} : { replays }),
        };
      }
      case REPLAY_MARKED: {
        const { mark, end } = decodeMark(payload, 1);
        if (payload[end] === REPLAY_MARKED || payload[end] === REPLAY_IDS) throw new Error('a replay mark on a replay mark');
        const inner = decodePayload(payload.subarray(end), where);
        if (inner.type !== 'event' && inner.type !== 'sealed') throw new Error('a replay mark on an entry that is not a change');
        return { ...inner, replay: mark };
      }
      case REPLAY_IDS: {
        const marks: ReplayMark[] = [];
        for (let at = 1; at < payload.length;) {
          const { mark, end } = decodeMark(payload, at);
          marks.push(mark);
          at = end;
        }
        if (marks.length === 0) throw new Error('replay ids without any');
        return { type: 'replays', marks };
      }
      case DELETE: {
        const { tenant_id, id, change } = JSON.parse(payload.subarray(1).toString('utf8')) as { tenant_id: string; id: string; change?: ChangeInfo };
        return { type: 'event', event: change ? { type: 'delete', tenant_id, id, change } : { type: 'delete', tenant_id, id } };
      }
      case TENANT_SEALED: {
        const end = 2 + payload[1];
        if (payload.length < 2 || payload[1] === 0 || end > payload.length) throw new Error('a tenant-sealed entry without its tenant');
        return { type: 'sealed', tenant_id: payload.toString('utf8', 2, end), payload };
      }
      case TOMBSTONE: {
        const { tenant_id, id, versions } = JSON.parse(payload.subarray(1).toString('utf8')) as { tenant_id: string; id: string; versions: MemoryVersion[] };
        if (!Array.isArray(versions)) throw new Error('a tombstone without versions');
        return { type: 'event', event: { type: 'tombstone', tenant_id, id, versions } };
      }
      case ADD:
      case UPDATE:
      case ADD_CHANGE:
      case UPDATE_CHANGE: {
        const jsonEnd = 5 + payload.readUInt32BE(1);
        const record = JSON.parse(payload.subarray(5, jsonEnd).toString('utf8')) as MemoryRecord;
        const info = payload[0] === ADD_CHANGE || payload[0] === UPDATE_CHANGE ? decodeChange(payload, jsonEnd) : undefined;
        const vectorStart = info?.end ?? jsonEnd;
        if (vectorStart > payload.length || (payload.length - vectorStart) % 4 !== 0) throw new Error('vector bytes not a multiple of 4');
        const vector = new Float32Array((payload.length - vectorStart) / 4);
        if (LITTLE_ENDIAN) new Uint8Array(vector.buffer).set(payload.subarray(vectorStart));
        else for (let i = 0; i < vector.length; i++) vector[i] = payload.readFloatLE(vectorStart + i * 4);
        const event: MemoryEvent = payload[0] === UPDATE || payload[0] === UPDATE_CHANGE ? { type: 'update', record, vector } : { type: 'add', record, vector };
        if (info?.change) event.change = info.change;
        if (info?.past && event.type === 'add') event.past = info.past;
        return { type: 'event', event };
      }
      default:
        throw new Error(`unknown payload type ${payload[0]}`);
    }
  } catch (err) {
    throw new CorruptStoreError(`${where}: unreadable entry (${(err as Error).message})`);
  }
}
