import type { AddMemoryInput, UpdateMemoryInput } from '../../common/schemas.js';
import type { TermDictionary } from '../lexical/term-dictionary.js';
import { admit, admitMemories, storedBytes, type Capacity, type MemoryMaxima, type Usage } from './admission.js';
import { checkTenantTerms, memoryTerms, newTermCount, type TermLimits } from './term-admission.js';
import { Reservations } from './reservations.js';
import type { TenantMemories } from './tenant-memories.js';
import type { MemoryRecord } from './types.js';

export interface ChangeLimits {
  maxima: MemoryMaxima;
  termLimits: TermLimits;
  capacity: Capacity;
}

/** What the memories hold now, which admission adds the reservations to. */
export interface Holdings {
  tenant(tenantId: string): TenantMemories | undefined;
  usage(): Usage;
}

/** An admitted change: what it reserved lasts until `release` (idempotent), when it is applied or fails. */
export interface Admitted<T> {
  /** Each memory's lexical terms, worked out and numbered in the dictionary at admission. */
  terms: T;
  release(): void;
}

/**
 * Admits adds and updates before any work is done (embedding, logging): the per-tenant and
 * per-key maxima, distinct words per memory and per tenant, and the enclave's capacity, each
 * counting what changes in flight have reserved (memory/reservations.ts). An admitted change's
 * words are numbered in the dictionary at once: applying it (now, or at a replay) then adds
 * nothing to the dictionary's map, so it cannot fail there.
 */
export class ChangeAdmission {
  private readonly reservations = new Reservations();

  constructor(private readonly limits: ChangeLimits, private readonly dictionary: TermDictionary, private readonly holdings: Holdings) {}

  /** Admits adding `inputs` (of any tenants); `keyTenants`: every tenant of the caller's key, for its maximum. */
  adds(inputs: readonly AddMemoryInput[], keyTenants?: ReadonlySet<string>): Admitted<string[][]> {
    const { termLimits } = this.limits;
    const perTenant = new Map<string, number>();
    for (const input of inputs) perTenant.set(input.tenant_id, (perTenant.get(input.tenant_id) ?? 0) + 1);
    admitMemories(perTenant, (tenantId) => (this.holdings.tenant(tenantId)?.size ?? 0) + this.reservations.memoriesOf(tenantId), this.limits.maxima, keyTenants);
    // Words: each memory's, then each tenant's new ones (adds in flight counted).
    const termLists = inputs.map((input, i) => memoryTerms(input.content, termLimits.maxTermsPerMemory, inputs.length > 1 ? i : undefined));
    const newTerms = new Map<string, number>();
    for (const tenantId of perTenant.keys()) {
      const lexical = this.holdings.tenant(tenantId)?.lexical;
      const fresh = newTermCount(termLists.filter((_, i) => inputs[i].tenant_id === tenantId), (term) => lexical?.holds(term) ?? false);
      checkTenantTerms(tenantId, (lexical?.distinctTerms ?? 0) + this.reservations.termsOf(tenantId), fresh, termLimits.maxTermsPerTenant);
      newTerms.set(tenantId, fresh);
    }
    const adding: Usage = {
      tenants: [...perTenant.keys()].filter((t) => !this.holdings.tenant(t) && this.reservations.memoriesOf(t) === 0).length,
      memories: inputs.length,
      storedBytes: inputs.reduce((sum, input) => sum + storedBytes(input.content, input.metadata), 0),
      terms: [...newTerms.values()].reduce((sum, n) => sum + n, 0),
    };
    admit(this.reservations.plus(this.holdings.usage()), adding, this.limits.capacity);
    return { terms: termLists, release: this.numberTerms(this.reservations.reserve({ usage: adding, memories: perTenant, terms: newTerms }), termLists) };
  }

  /**
   * Admits changing `before` (of `tenant`): growing a memory counts against the stored bytes
   * like an add, and new words like an add's (the old content's are not subtracted: it may
   * stay). `keepsPast`: the old version stays in the memory's history, so the new one counts
   * whole. `terms`: undefined when the content does not change.
   */
  update(tenant: TenantMemories, before: MemoryRecord, change: UpdateMemoryInput, keepsPast = false): Admitted<string[] | undefined> {
    const content = change.content ?? before.content;
    const after = storedBytes(content, change.metadata ?? before.metadata);
    const growth = keepsPast ? after : Math.max(0, after - storedBytes(before.content, before.metadata));
    const terms = change.content === undefined ? undefined : memoryTerms(content, this.limits.termLimits.maxTermsPerMemory);
    const fresh = terms ? newTermCount([terms], (term) => tenant.lexical.holds(term)) : 0;
    checkTenantTerms(before.tenant_id, tenant.lexical.distinctTerms + this.reservations.termsOf(before.tenant_id), fresh, this.limits.termLimits.maxTermsPerTenant);
    const adding: Usage = { tenants: 0, memories: 0, storedBytes: growth, terms: fresh };
    admit(this.reservations.plus(this.holdings.usage()), adding, this.limits.capacity);
    const reserved = this.reservations.reserve({ usage: adding, terms: new Map([[before.tenant_id, fresh]]) });
    return { terms, release: this.numberTerms(reserved, terms ? [terms] : []) };
  }

  /** Numbers every distinct term of `lists`; the release gives back the reservation and the numbers, once. */
  private numberTerms(release: () => void, lists: ReadonlyArray<readonly string[]>): () => void {
    const distinct = new Set<string>();
    for (const terms of lists) for (const term of terms) distinct.add(term);
    let numbers: number[] | undefined = [...distinct].map((term) => this.dictionary.acquire(term));
    return () => {
      release();
      for (const n of numbers ?? []) this.dictionary.release(n);
      numbers = undefined;
    };
  }
}
