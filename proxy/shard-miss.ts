import { SHARD_MISS_HEADER } from '../protocol/shards.js';

/** The shard an enclave said it does not hold (503 with x-tee-shard-miss), if that is the reply. */
export function missedShard(reply: { status?: number; headers?: Record<string, string> }): number | undefined {
  if (reply.status !== 503) return undefined;
  const text = reply.headers?.[SHARD_MISS_HEADER];
  return text !== undefined && /^\d{1,2}$/.test(text) ? Number(text) : undefined;
}
