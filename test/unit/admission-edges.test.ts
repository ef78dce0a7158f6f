/**
 * The limits' exact edges (killed mutants of npm run test:mutation): a limit is reached, not
 * passed, at its maximum; a limit that is already past refuses only adds that bring more.
 */
import { describe, expect, it } from 'vitest';
import { admit, storedBytes, type Capacity, type Usage } from '../../enclave/memory/admission.js';
import { checkTenantTerms, memoryTerms, newTermCount } from '../../enclave/memory/term-admission.js';
import { refusal } from '../helpers/refusal.js';

const capacity: Capacity = { maxTenants: 3, maxMemories: 10, maxStoredBytes: 1000, maxTerms: 50 };
const usage = (over: Partial<Usage> = {}): Usage => ({ tenants: 1, memories: 1, storedBytes: 100, terms: 10, ...over });
const adding = (over: Partial<Usage> = {}): Usage => ({ tenants: 0, memories: 1, storedBytes: 10, terms: 0, ...over });

describe('enclave capacity at its edges', () => {
  it('admits an add that fills a limit exactly, refuses one byte more', () => {
    expect(() => admit(usage({ storedBytes: 990 }), adding({ storedBytes: 10 }), capacity)).not.toThrow();
    expect(refusal(() => admit(usage({ storedBytes: 990 }), adding({ storedBytes: 11 }), capacity)).message).toContain('bytes of memories');
    expect(() => admit(usage({ tenants: 2 }), adding({ tenants: 1 }), capacity)).not.toThrow();
    expect(() => admit(usage({ terms: 40 }), adding({ terms: 10 }), capacity)).not.toThrow();
  });

  it('past a lowered limit, still admits adds that bring no new tenant or word', () => {
    expect(() => admit(usage({ tenants: 5 }), adding({ tenants: 0 }), capacity)).not.toThrow();
    expect(refusal(() => admit(usage({ tenants: 5 }), adding({ tenants: 1 }), capacity)).message).toContain('tenants');
    expect(() => admit(usage({ terms: 80 }), adding({ terms: 0 }), capacity)).not.toThrow();
    expect(refusal(() => admit(usage({ terms: 80 }), adding({ terms: 1 }), capacity)).message).toContain('distinct words');
  });

  it('adds what is held to what comes, for every limit', () => {
    expect(() => admit(usage({ memories: 9 }), adding({ memories: 1 }), capacity)).not.toThrow();
    expect(refusal(() => admit(usage({ memories: 9 }), adding({ memories: 2 }), capacity)).message)
      .toBe('the enclave holds 9 memories and cannot take 2 more (its capacity is 10); delete some, or ask the operator to raise it');
    expect(refusal(() => admit(usage({ tenants: 2 }), adding({ tenants: 2 }), capacity)).message).toContain('holds 2 tenants');
    expect(refusal(() => admit(usage({ terms: 40 }), adding({ terms: 11 }), capacity)).message).toContain('holds 40 distinct words');
  });

  it('counts a memory\'s content and metadata in UTF-8 bytes, no metadata as {}', () => {
    expect(storedBytes('héllo', { a: 1 })).toBe(6 + 7);
    expect(storedBytes('x', undefined)).toBe(1 + 2);
  });

  it('counts the new words of a batch once each, leaving out those the tenant holds', () => {
    expect(newTermCount([['alpha', 'bravo'], ['bravo', 'charlie'], ['alpha']], (t) => t === 'alpha')).toBe(2);
    expect(newTermCount([], () => false)).toBe(0);
  });

  it('a tenant past its words may still add memories of words it holds', () => {
    expect(() => checkTenantTerms('t', 10, 0, 5)).not.toThrow();
    expect(() => checkTenantTerms('t', 3, 2, 5)).not.toThrow();
    const refused = refusal(() => checkTenantTerms('t', 3, 3, 5));
    expect(refused.code).toBe('term_limit_reached');
    expect(refused.param).toBe('tenant_id');
    expect(refused.message).toBe('tenant \'t\' holds 3 distinct words; this would add 3 new ones, past its maximum of 5; delete some memories before adding more');
  });
});

describe('a memory with too many distinct words', () => {
  it('names the memory, alone or in a batch', () => {
    const alone = refusal(() => memoryTerms('alpha bravo charlie', 2));
    expect(alone.message).toBe('the memory\'s content holds 3 distinct words; a memory may hold at most 2 (split it into several memories)');
    expect(alone.param).toBe('content');
    const inBatch = refusal(() => memoryTerms('alpha bravo charlie', 2, 4));
    expect(inBatch.message).toMatch(/^memory 4's content holds 3 distinct words/);
    expect(inBatch.param).toBe('memories[4].content');
    expect(memoryTerms('alpha alpha alpha', 2)).toHaveLength(3);
    // Exactly the maximum of distinct words, in more words than that, is allowed.
    expect(memoryTerms('alpha bravo alpha', 2)).toHaveLength(3);
  });
});
