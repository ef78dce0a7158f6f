import { randomFillSync } from 'node:crypto';

/**
 * Random bytes for nonces and ids, taken from a buffer filled 4 KiB at a time, as Node's
 * randomUUID does: each randomBytes call is a native job and a getpid() system call
 * (docs/performance-log.md#the-load-generator-and-a-longer-warm-up-2026-11-26-morning). The bytes are the same
 * CSPRNG's; only when they are drawn differs. Keys do not come from here.
 */
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let used = 0;

/** `size` fresh random bytes (at most 256), in a Buffer of their own. */
export function pooledRandomBytes(size: number): Buffer {
  if (!Number.isInteger(size) || size < 0 || size > 256) throw new RangeError(`pooledRandomBytes takes 0 to 256 bytes, not ${size}`);
  if (used + size > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafeSlow(POOL_BYTES));
    used = 0;
  }
  const bytes = Buffer.from(pool.subarray(used, used + size));
  // Drawn bytes are not left behind for anything that later reads this memory.
  pool.fill(0, used, used + size);
  used += size;
  return bytes;
}
