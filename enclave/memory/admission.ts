import { ApiError } from '../../common/errors.js';

/**
 * How much the enclave agrees to hold, so that no caller can make it run out of memory (and
 * crash again at every restart, replaying what made it crash): tenants, memories, stored
 * bytes and distinct words, for the whole enclave. The heap they need is heapNeeded()
 * (memory/heap-budget.ts: about 3.1 GiB for the defaults); the enclave warns at start when
 * its heap limit is lower.
 */
export interface Capacity {
  maxTenants: number;
  maxMemories: number;
  /** Memory content and metadata, in UTF-8 bytes. */
  maxStoredBytes: number;
  /** Distinct lexical terms, each tenant's counted apart (memory/term-admission.ts). */
  maxTerms: number;
}

export const DEFAULT_CAPACITY: Capacity = { maxTenants: 100_000, maxMemories: 2_000_000, maxStoredBytes: 1024 ** 3, maxTerms: 2_000_000 };

export interface Usage {
  tenants: number;
  memories: number;
  storedBytes: number;
  /** Distinct terms of each tenant, summed over tenants. */
  terms: number;
}

/** What one memory costs against maxStoredBytes. */
export const storedBytes = (content: string, metadata: unknown): number =>
  Buffer.byteLength(content, 'utf8') + Buffer.byteLength(JSON.stringify(metadata ?? {}), 'utf8');

/**
 * Refuses, before any work is done, an add that would take the enclave past its capacity:
 * 503 `enclave_capacity_reached`, naming which limit. Not retryable by waiting: only deletes
 * (or an operator raising the limits) make room, so no Retry-After.
 */
export function admit(usage: Usage, adding: Usage, capacity: Capacity): void {
  const over = (what: string, held: number, add: number, max: number) => new ApiError('enclave_capacity_reached',
    `the enclave holds ${held.toLocaleString('en')} ${what} and cannot take ${add.toLocaleString('en')} more (its capacity is ${max.toLocaleString('en')}); delete some, or ask the operator to raise it`);
  if (adding.tenants > 0 && usage.tenants + adding.tenants > capacity.maxTenants) throw over('tenants', usage.tenants, adding.tenants, capacity.maxTenants);
  if (usage.memories + adding.memories > capacity.maxMemories) throw over('memories', usage.memories, adding.memories, capacity.maxMemories);
  if (usage.storedBytes + adding.storedBytes > capacity.maxStoredBytes) throw over('bytes of memories', usage.storedBytes, adding.storedBytes, capacity.maxStoredBytes);
  if (adding.terms > 0 && usage.terms + adding.terms > capacity.maxTerms) throw over('distinct words (over all tenants)', usage.terms, adding.terms, capacity.maxTerms);
}

/** The most memories one tenant, and all the tenants of one API key together, may hold. */
export interface MemoryMaxima {
  perTenant: number;
  perKey: number;
}

/**
 * Refuses (409) adding `perTenant` memories to tenants that would pass a maximum: their own, or
 * their key's (`keyTenants`: all of the key's tenants). `holding(t)`: what tenant t holds,
 * adds in flight counted.
 */
export function admitMemories(perTenant: ReadonlyMap<string, number>, holding: (tenantId: string) => number, maxima: MemoryMaxima, keyTenants?: ReadonlySet<string>): void {
  if (keyTenants && maxima.perKey !== Infinity) {
    let keyHolds = 0;
    for (const tenantId of keyTenants) keyHolds += holding(tenantId);
    const adding = [...perTenant.values()].reduce((sum, n) => sum + n, 0);
    if (keyHolds + adding > maxima.perKey) {
      throw new ApiError('key_memory_limit_reached',
        `the tenants of this API key hold ${keyHolds} memories; adding ${adding} would pass the key's maximum of ${maxima.perKey}; delete some before adding more`);
    }
  }
  for (const [tenantId, count] of perTenant) {
    const holds = holding(tenantId);
    if (holds + count > maxima.perTenant) {
      const message = holds >= maxima.perTenant
        ? `tenant '${tenantId}' holds the maximum of ${maxima.perTenant} memories; delete some before adding more`
        : `tenant '${tenantId}' holds ${holds} memories; adding ${count} would pass its maximum of ${maxima.perTenant}`;
      throw new ApiError('memory_limit_reached', message, { param: 'tenant_id' });
    }
  }
}
