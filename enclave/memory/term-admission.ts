import { ApiError } from '../../common/errors.js';
import { lexicalTerms } from '../lexical/lexical-terms.js';

/**
 * What a tenant's words may cost. Each distinct word of a tenant costs the enclave beyond the
 * content (MAX_STORED_BYTES counts only content): a posting in its inverted index and one in
 * the search worker's copy, an entry in the shared dictionary while it is small. One key
 * adding memories of random words took the enclave to heap exhaustion at 7% of
 * MAX_STORED_BYTES, and again at every replay (issue 31, item 2). So an add's distinct new
 * words are counted before any work, like its bytes: per memory, per tenant, and for the
 * whole enclave (MAX_TERMS, memory/admission.ts).
 */
export interface TermLimits {
  /** Distinct terms one memory's content may hold; beyond, 400 too_many_terms. */
  maxTermsPerMemory: number;
  /** Distinct terms one tenant's memories may hold together; beyond, 409 term_limit_reached. */
  maxTermsPerTenant: number;
}

export const DEFAULT_TERM_LIMITS: TermLimits = { maxTermsPerMemory: 4096, maxTermsPerTenant: 200_000 };

/**
 * A content's lexical terms, refused (400 too_many_terms) when it holds more than `max`
 * distinct ones. `which` names the memory in a batch.
 */
export function memoryTerms(content: string, max: number, which?: number): string[] {
  const terms = lexicalTerms(content);
  // A memory holds at most as many distinct terms as terms: most need no set to be sure.
  if (terms.length > max) {
    const distinct = new Set(terms).size;
    if (distinct > max) {
      throw new ApiError('too_many_terms',
        `${which === undefined ? 'the memory\'s content' : `memory ${which}'s content`} holds ${distinct.toLocaleString('en')} distinct words; a memory may hold at most ${max.toLocaleString('en')} (split it into several memories)`,
        { param: which === undefined ? 'content' : `memories[${which}].content` });
    }
  }
  return terms;
}

/** How many distinct terms of `lists` the tenant does not hold yet (`holds`). */
export function newTermCount(lists: Iterable<readonly string[]>, holds: (term: string) => boolean): number {
  const fresh = new Set<string>();
  for (const terms of lists) for (const term of terms) if (!fresh.has(term) && !holds(term)) fresh.add(term);
  return fresh.size;
}

/** Refuses an add or update that would give a tenant more than its distinct terms (409: deleting memories makes room). */
export function checkTenantTerms(tenantId: string, held: number, adding: number, max: number): void {
  if (adding === 0 || held + adding <= max) return;
  throw new ApiError('term_limit_reached',
    `tenant '${tenantId}' holds ${held.toLocaleString('en')} distinct words; this would add ${adding.toLocaleString('en')} new ones, past its maximum of ${max.toLocaleString('en')}; delete some memories before adding more`,
    { param: 'tenant_id' });
}
