import { createHash } from 'node:crypto';

/**
 * Tenants are spread over a fixed number of shards, each its own sealed store with its own
 * chain of state heads (enclave/storage/sharded-store.ts). The mapping is here, in the
 * protocol, because clients use it too: a signed answer for a tenant must name that
 * tenant's shard, or the client refuses it (StateTracker).
 */

/** The most shards a service may have (each is a store, and a client may send a head per shard). */
export const MAX_SHARDS = 64;

/**
 * The shard of a tenant: the first four bytes of SHA-256 of its id (UTF-8), big-endian,
 * modulo the count. Stable across processes, versions and machines.
 */
export function shardOf(tenantId: string, count: number): number {
  if (!Number.isSafeInteger(count) || count < 1 || count > MAX_SHARDS) throw new RangeError(`not a shard count: ${count}`);
  if (count === 1) return 0;
  return createHash('sha256').update(tenantId, 'utf8').digest().readUInt32BE(0) % count;
}

/** The shard an answer must name: its (first) tenant's, or shard 0 for an answer that acted for no tenant. */
export function shardOfAnswer(tenantHeader: string | undefined, count: number): number {
  const first = (tenantHeader ?? '').split(',')[0];
  return first === '' ? 0 : shardOf(first, count);
}

/** `<index>/<count>`: the x-tee-shard header and the statement's shard line. */
export const formatShard = (index: number, count: number): string => `${index}/${count}`;

export function parseShard(text: string | undefined): { index: number; count: number } | undefined {
  const m = /^(\d{1,2})\/(\d{1,2})$/.exec(text ?? '');
  if (!m) return undefined;
  const index = Number(m[1]);
  const count = Number(m[2]);
  return count >= 1 && count <= MAX_SHARDS && index < count ? { index, count } : undefined;
}

/**
 * The header of a refusal for a tenant whose shard this enclave does not hold (503
 * shard_not_owned): the shard's index, so the host can route the request to its owner. On a
 * sealed call too, where the host learns the shard no other way (docs/trust-model.md).
 */
export const SHARD_MISS_HEADER = 'x-tee-shard-miss';
