/**
 * What a frame's payload holds: a file header, a memory event, or a snapshot's end mark.
 *
 *   0x01 header  JSON
 *   0x02 add     u32 BE JSON length | JSON of the record | vector as float32 little-endian
 *   0x03 delete  JSON {tenant_id, id, change?}
 *   0x04 end     JSON {count, deleted?}
 *   0x05 update  as add: the memory's new version
 *   0x06 heads   u64 BE seq of the first | 8 bytes per head: its hash's first 8 bytes, in order (snapshots, format 4)
 *   0x07 tombstone  JSON {tenant_id, id, versions}: a deleted memory's history, without content (snapshots)
 *
 * Who made a change and when (ChangeInfo) rides in the record's JSON as `$change`, and a
 * snapshot's past versions of a memory as `$past` (memory/history.ts); both are absent in
 * entries written before history was kept, which read as before.
 *
 * Vectors are stored, so recovery rebuilds the indexes without running the model again.
 */
import { endianness } from 'node:os';
import type { ChangeInfo, MemoryEvent, MemoryRecord, MemoryVersion } from '../memory/types.js';
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
}

export type Payload =
  | { type: 'header'; meta: FileMeta }
  | { type: 'event'; event: MemoryEvent }
  /** `deleted`: the tombstones before it (absent in snapshots written before them). */
  | { type: 'end'; count: number; deleted?: number }
  /** Prefixes of the heads from seq `first` on (head-chain.ts). */
  | { type: 'heads'; first: number; prefixes: Buffer };

const HEADER = 0x01;
const ADD = 0x02;
const DELETE = 0x03;
const END = 0x04;
const UPDATE = 0x05;
const HEADS = 0x06;
const TOMBSTONE = 0x07;

/**
 * Vectors are stored as float32 little-endian: on a little-endian machine (x86, Graviton)
 * their bytes are copied whole rather than written and read one float at a time. A recovery
 * decodes every record (a 100-d memory record: 4.3-4.7 us one float at a time, 2.9-3.3 copied).
 */
const LITTLE_ENDIAN = endianness() === 'LE';

const tagged = (tag: number, json: unknown) => Buffer.concat([Buffer.of(tag), Buffer.from(JSON.stringify(json))]);

export const encodeHeader = (meta: FileMeta): Buffer => tagged(HEADER, meta);
export const encodeEnd = (count: number, deleted?: number): Buffer => tagged(END, deleted ? { count, deleted } : { count });

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

/** The record's JSON, with the change and past versions as members of it (read apart by recordOf). */
function recordJson(record: MemoryRecord, change?: ChangeInfo, past?: MemoryVersion[]): string {
  const json = JSON.stringify(record);
  if (!change && !past) return json;
  return `${json.slice(0, -1)}${change ? `,"$change":${JSON.stringify(change)}` : ''}${past ? `,"$past":${JSON.stringify(past)}` : ''}}`;
}

function recordOf(json: string): { record: MemoryRecord; change?: ChangeInfo; past?: MemoryVersion[] } {
  const parsed = JSON.parse(json) as MemoryRecord & { $change?: ChangeInfo; $past?: MemoryVersion[] };
  if (parsed.$change === undefined && parsed.$past === undefined) return { record: parsed };
  const { $change, $past, ...record } = parsed;
  return { record, ...($change ? { change: $change } : {}), ...($past ? { past: $past } : {}) };
}

/** An add or update: the record's JSON, then its vector. */
function encodeVersion(tag: typeof ADD | typeof UPDATE, record: MemoryRecord, vector: Float32Array, change?: ChangeInfo, past?: MemoryVersion[]): Buffer {
  const json = Buffer.from(recordJson(record, change, past));
  const out = Buffer.allocUnsafe(1 + 4 + json.length + vector.length * 4);
  out[0] = tag;
  out.writeUInt32BE(json.length, 1);
  json.copy(out, 5);
  let at = 5 + json.length;
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
      case END: {
        const { count, deleted } = JSON.parse(payload.subarray(1).toString('utf8')) as { count: number; deleted?: number };
        return deleted === undefined ? { type: 'end', count } : { type: 'end', count, deleted };
      }
      case DELETE: {
        const { tenant_id, id, change } = JSON.parse(payload.subarray(1).toString('utf8')) as { tenant_id: string; id: string; change?: ChangeInfo };
        return { type: 'event', event: change ? { type: 'delete', tenant_id, id, change } : { type: 'delete', tenant_id, id } };
      }
      case TOMBSTONE: {
        const { tenant_id, id, versions } = JSON.parse(payload.subarray(1).toString('utf8')) as { tenant_id: string; id: string; versions: MemoryVersion[] };
        if (!Array.isArray(versions)) throw new Error('a tombstone without versions');
        return { type: 'event', event: { type: 'tombstone', tenant_id, id, versions } };
      }
      case ADD:
      case UPDATE: {
        const jsonEnd = 5 + payload.readUInt32BE(1);
        const { record, change, past } = recordOf(payload.subarray(5, jsonEnd).toString('utf8'));
        if ((payload.length - jsonEnd) % 4 !== 0) throw new Error('vector bytes not a multiple of 4');
        const vector = new Float32Array((payload.length - jsonEnd) / 4);
        if (LITTLE_ENDIAN) new Uint8Array(vector.buffer).set(payload.subarray(jsonEnd));
        else for (let i = 0; i < vector.length; i++) vector[i] = payload.readFloatLE(jsonEnd + i * 4);
        if (payload[0] === UPDATE) return { type: 'event', event: change ? { type: 'update', record, vector, change } : { type: 'update', record, vector } };
        const event: MemoryEvent = { type: 'add', record, vector };
        if (change) event.change = change;
        if (past) event.past = past;
        return { type: 'event', event };
      }
      default:
        throw new Error(`unknown payload type ${payload[0]}`);
    }
  } catch (err) {
    throw new CorruptStoreError(`${where}: unreadable entry (${(err as Error).message})`);
  }
}
