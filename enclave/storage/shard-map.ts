import { hkdfSync, randomBytes } from 'node:crypto';
import { readWhole, type BlobStore } from '../../common/blob-store.js';
import { MAX_SHARDS } from '../../protocol/shards.js';
import { CorruptStoreError } from './errors.js';
import { SECRETBOX, secretbox, secretboxOpen } from './secretbox.js';
import { MEMORY_PREFIX } from './store.js';

/** The sealed record of the service's shards: how many, and which store each one is. */
export const SHARD_MAP_NAME = `${MEMORY_PREFIX}shards.sealed`;

/** Where shard `index` keeps its blobs when the service was made with shards (one folder each). */
export const shardPrefix = (index: number): string => `shard-${String(index).padStart(2, '0')}/`;

/** What every shard blob's name starts with (a blob store name has one folder at most). */
export const SHARD_FOLDER = 'shard-';

export interface ShardMap {
  /** Fixed when the service's data is first made: a tenant's shard depends on it (protocol/shards.ts). */
  count: number;
  /** Per shard: the blob prefix of its store, and its store id (the id every one of its files records). */
  shards: Array<{ prefix: string; storeId: string }>;
}

const STORE_ID = /^[0-9a-f]{32}$/;
const MAP_INFO = 'private-agent-service/shard-map/v1';

/** Its own key, derived from the sealing key, so a memory file can never be passed off as the map or the other way round. */
const mapKey = (sealingKey: Uint8Array) => new Uint8Array(hkdfSync('sha256', sealingKey, Buffer.alloc(0), MAP_INFO, SECRETBOX.keyLength));

/** A new map: `count` shards, each in its own folder with a new store id; one shard keeps today's layout, in memory/. */
export function newShardMap(count: number): ShardMap {
  const prefix = (i: number) => (count === 1 ? MEMORY_PREFIX : shardPrefix(i));
  return { count, shards: Array.from({ length: count }, (_, i) => ({ prefix: prefix(i), storeId: randomBytes(16).toString('hex') })) };
}

/**
 * Reads the map, or undefined when there is none. A map that does not open under the sealing
 * key, or does not describe a valid set of shards, is refused: the host can delete it, never
 * change it (it is written once, if absent, and never replaced).
 */
export async function readShardMap(blobs: BlobStore, sealingKey: Uint8Array): Promise<ShardMap | undefined> {
  const bytes = await readWhole(blobs, SHARD_MAP_NAME);
  if (!bytes) return undefined;
  const nonce = bytes.subarray(0, SECRETBOX.nonceLength);
  const opened = bytes.length > SECRETBOX.nonceLength ? secretboxOpen(bytes.subarray(SECRETBOX.nonceLength), nonce, mapKey(sealingKey)) : undefined;
  if (!opened) throw new CorruptStoreError(`${SHARD_MAP_NAME} does not open: it was sealed with a different key (another service's, or a sealing key that was replaced), or altered`);
  let map: ShardMap | undefined;
  try {
    map = parseMap(JSON.parse(opened.toString('utf8')));
  } catch {
    map = undefined;
  }
  if (!map) throw new CorruptStoreError(`${SHARD_MAP_NAME} does not describe a set of shards`);
  return map;
}

/** Writes the map once: refused (BlobConflictError) if one exists already. */
export async function writeShardMap(blobs: BlobStore, sealingKey: Uint8Array, map: ShardMap): Promise<void> {
  const nonce = randomBytes(SECRETBOX.nonceLength);
  const json = Buffer.from(JSON.stringify({ v: 1, count: map.count, shards: map.shards.map((s) => ({ prefix: s.prefix, store_id: s.storeId })) }), 'utf8');
  await blobs.put(SHARD_MAP_NAME, Buffer.concat([nonce, secretbox(json, nonce, mapKey(sealingKey))]), { ifAbsent: true });
}

function parseMap(value: unknown): ShardMap | undefined {
  const { v, count, shards } = (value ?? {}) as { v?: unknown; count?: unknown; shards?: unknown };
  if (v !== 1 || !Number.isSafeInteger(count) || (count as number) < 1 || (count as number) > MAX_SHARDS) return undefined;
  if (!Array.isArray(shards) || shards.length !== count) return undefined;
  const parsed = shards.map((s: { prefix?: unknown; store_id?: unknown }, i) => {
    const ok = typeof s?.store_id === 'string' && STORE_ID.test(s.store_id) && (s.prefix === shardPrefix(i) || (count === 1 && s.prefix === MEMORY_PREFIX));
    return ok ? { prefix: s.prefix as string, storeId: s.store_id as string } : undefined;
  });
  if (parsed.some((s) => s === undefined) || new Set(parsed.map((s) => s!.storeId)).size !== parsed.length) return undefined;
  return { count: count as number, shards: parsed as ShardMap['shards'] };
}
