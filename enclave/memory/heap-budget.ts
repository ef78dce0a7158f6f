import { getHeapStatistics } from 'node:v8';
import type { Capacity } from './admission.js';

/**
 * The V8 heap the enclave's event loop needs to hold what its capacity settings admit, from
 * measured costs (docs/configuration.md, "Words and heap"): about 730 bytes of records and
 * indexes a memory besides its content (bench/heap-per-memory.ts, 100k corpus memories with
 * content of 68 characters: 732 in one tenant, 472-541 in tenants of 1,000 or 100; the largest
 * is what a full enclave of large tenants needs), about a byte of heap a byte of content, and
 * 514 bytes a distinct word of a tenant in an inverted index (97 in a small tenant's scan).
 * Vectors live outside the heap (about 1 KB a memory of RSS more), and the search worker has a
 * heap of its own.
 */
const BASE = 96 * 1024 ** 2;
const PER_MEMORY = 730;
const PER_STORED_BYTE = 1;
const PER_TERM = 514;

export function heapNeeded(capacity: Capacity): number {
  return BASE + capacity.maxMemories * PER_MEMORY + capacity.maxStoredBytes * PER_STORED_BYTE + capacity.maxTerms * PER_TERM;
}

/**
 * When V8's heap limit (by default a quarter of the machine's memory, at most about 4 GiB)
 * is below heapNeeded: the capacity settings no longer protect the enclave, since it would
 * die of heap exhaustion before refusing an add (and again at every replay). Undefined when it fits.
 */
export function heapShortfall(capacity: Capacity, limit = getHeapStatistics().heap_size_limit): { heapLimitMiB: number; neededMiB: number } | undefined {
  const needed = heapNeeded(capacity);
  if (limit >= needed) return undefined;
  return { heapLimitMiB: Math.floor(limit / 1024 ** 2), neededMiB: Math.ceil(needed / 1024 ** 2) };
}
