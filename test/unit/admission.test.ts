import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../common/errors.js';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';

/**
 * The enclave's capacity (finding 1: a caller filled the enclave's memory with new tenants
 * until it was OOM-killed, and again at every restart): refused with 503 before any work.
 */
let model: Embedder;
let embedCalls = 0;
const counting = (): Embedder => new Proxy(model, {
  get: (target, prop, receiver) => (prop === 'embed'
    ? (texts: string[]) => { embedCalls++; return target.embed(texts); }
    : Reflect.get(target, prop, receiver)),
});

beforeAll(async () => {
  model = await loadEmbedder({ name: 'static', modelsDir });
});
afterAll(async () => {
  await model?.close();
});

async function refusal(work: Promise<unknown>): Promise<ApiError> {
  const error = await work.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(ApiError);
  return error as ApiError;
}

describe('enclave capacity', () => {
  it('refuses a tenant past MAX_TENANTS, before embedding anything, and frees the place when a tenant is emptied', async () => {
    const memory = new MemoryService(counting(), { capacity: { maxTenants: 2, maxMemories: 1000, maxStoredBytes: 1e6 } });
    await memory.add({ tenant_id: 'a', content: 'one' });
    const b = await memory.add({ tenant_id: 'b', content: 'two' });
    await memory.add({ tenant_id: 'a', content: 'an existing tenant still takes more' });
    const before = embedCalls;
    const error = await refusal(memory.add({ tenant_id: 'c', content: 'three' }));
    expect([error.status, error.code]).toEqual([503, 'enclave_capacity_reached']);
    expect(error.message).toMatch(/2 tenants/);
    expect(embedCalls).toBe(before);
    await memory.delete('b', b.id);
    await memory.add({ tenant_id: 'c', content: 'three' });
    expect(memory.usage.tenants).toBe(2);
  });

  it('counts adds in flight, so concurrent requests cannot pass the limits together', async () => {
    const memory = new MemoryService(model, { capacity: { maxTenants: 1000, maxMemories: 5, maxStoredBytes: 1e6 } });
    const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => memory.add({ tenant_id: `t${i}`, content: `memory ${i}` })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
    expect(memory.usage.memories).toBe(5);
    const error = await refusal(memory.addMany([{ tenant_id: 'x', content: 'a' }]));
    expect(error.message).toMatch(/5 memories/);
  });

  it('refuses content past MAX_STORED_BYTES (a key holder filling memory with large memories)', async () => {
    const memory = new MemoryService(model, { capacity: { maxTenants: 10, maxMemories: 1000, maxStoredBytes: 10_000 } });
    await memory.add({ tenant_id: 't', content: 'x'.repeat(6000) });
    const error = await refusal(memory.add({ tenant_id: 't', content: 'y'.repeat(6000) }));
    expect([error.status, error.code]).toEqual([503, 'enclave_capacity_reached']);
    expect(error.message).toMatch(/bytes of memories/);
    expect(memory.usage.storedBytes).toBeGreaterThanOrEqual(6000);
    expect(memory.usage.storedBytes).toBeLessThan(10_000);
  });

  it('refuses an update that would grow past MAX_STORED_BYTES, before embedding, and keeps the memory as it was', async () => {
    const memory = new MemoryService(counting(), { capacity: { maxTenants: 10, maxMemories: 1000, maxStoredBytes: 10_000 } });
    const small = await memory.add({ tenant_id: 't', content: 'small' });
    await memory.add({ tenant_id: 't', content: 'x'.repeat(6000) });
    const before = embedCalls;
    const error = await refusal(memory.update('t', small.id, { content: 'y'.repeat(5000) }));
    expect([error.status, error.code]).toEqual([503, 'enclave_capacity_reached']);
    expect(error.message).toMatch(/bytes of memories/);
    expect(embedCalls).toBe(before);
    expect(memory.get('t', small.id)!.content).toBe('small');
    // Shrinking, or growing within the capacity, still works; concurrent growth is counted together.
    const grown = await Promise.allSettled([1, 2].map(() => memory.update('t', small.id, { content: 'z'.repeat(3000) })));
    expect(grown.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect((await memory.update('t', small.id, { content: 'tiny' }))!.content).toBe('tiny');
    expect(memory.usage.storedBytes).toBeLessThan(10_000);
  });
});

/** Words no other memory holds: what the random-words tenant of issue 31 (item 2) added. */
let wordSeed = 0;
const uniqueWords = (n: number) => Array.from({ length: n }, () => `w${(wordSeed++).toString(36)}x`).join(' ');

describe('lexical terms (issue 31, item 2: a tenant of random words exhausted the enclave)', () => {
  it('refuses a memory with more than MAX_TERMS_PER_MEMORY distinct words with 400, before embedding', async () => {
    const memory = new MemoryService(counting(), { termLimits: { maxTermsPerMemory: 50 } });
    const fifty = uniqueWords(50);
    await memory.add({ tenant_id: 't', content: `${fifty} and the ${fifty}` });
    const before = embedCalls;
    const error = await refusal(memory.add({ tenant_id: 't', content: uniqueWords(51) }));
    expect([error.status, error.code, error.param]).toEqual([400, 'too_many_terms', 'content']);
    const batch = await refusal(memory.addMany([{ tenant_id: 't', content: 'fine' }, { tenant_id: 't', content: uniqueWords(60) }]));
    expect([batch.status, batch.param]).toEqual([400, 'memories[1].content']);
    expect(embedCalls).toBe(before);
    // Repeats are no new words: a long memory of few words is fine.
    await memory.add({ tenant_id: 't', content: 'garden '.repeat(3000) });
  });

  it('refuses new words past MAX_TERMS_PER_TENANT with 409 before any work, counts adds in flight, and frees the words of deleted memories', async () => {
    const memory = new MemoryService(counting(), { termLimits: { maxTermsPerTenant: 100 } });
    const first = await memory.add({ tenant_id: 't', content: uniqueWords(60) });
    // Words the tenant already holds cost nothing.
    await memory.add({ tenant_id: 't', content: first.content });
    const before = embedCalls;
    const error = await refusal(memory.add({ tenant_id: 't', content: uniqueWords(41) }));
    expect([error.status, error.code, error.param]).toEqual([409, 'term_limit_reached', 'tenant_id']);
    expect(error.message).toMatch(/60 distinct words/);
    expect(embedCalls).toBe(before);
    // Another tenant has its own words.
    await memory.add({ tenant_id: 'other', content: uniqueWords(90) });
    const together = await Promise.allSettled([1, 2].map(() => memory.add({ tenant_id: 't', content: uniqueWords(30) })));
    expect(together.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(memory.usage.terms).toBe(90 + 90);
    for (const { id } of memory.list('t', 100)!.data) await memory.delete('t', id);
    expect(memory.usage.terms).toBe(90);
    await memory.add({ tenant_id: 't', content: uniqueWords(100) });
    // An update's new words count too.
    const [kept] = memory.list('t', 1)!.data;
    const update = await refusal(memory.update('t', kept.id, { content: `${kept.content} ${uniqueWords(1)}` }));
    expect(update.code).toBe('term_limit_reached');
    expect(memory.get('t', kept.id)!.content).toBe(kept.content);
  });

  it('refuses new words past MAX_TERMS (all tenants) with 503 enclave_capacity_reached', async () => {
    const memory = new MemoryService(model, { capacity: { maxTerms: 150 } });
    await memory.add({ tenant_id: 'a', content: uniqueWords(100) });
    const error = await refusal(memory.add({ tenant_id: 'b', content: uniqueWords(51) }));
    expect([error.status, error.code]).toEqual([503, 'enclave_capacity_reached']);
    expect(error.message).toMatch(/distinct words/);
    await memory.add({ tenant_id: 'b', content: uniqueWords(50) });
    expect(memory.usage.terms).toBe(150);
  });
});

describe('heap budget', () => {
  it('is what the capacity settings admit, and a lower heap limit is named with the flag that fits', async () => {
    const { heapNeeded, heapShortfall } = await import('../../enclave/memory/heap-budget.js');
    const { DEFAULT_CAPACITY } = await import('../../enclave/memory/admission.js');
    // docs/configuration.md states the defaults' figure.
    expect(Math.ceil(heapNeeded(DEFAULT_CAPACITY) / 1024 ** 2)).toBe(3493);
    expect(heapNeeded({ ...DEFAULT_CAPACITY, maxTerms: DEFAULT_CAPACITY.maxTerms * 2 })).toBeGreaterThan(heapNeeded(DEFAULT_CAPACITY));
    expect(heapShortfall(DEFAULT_CAPACITY, 1536 * 1024 ** 2)).toEqual({ heapLimitMiB: 1536, neededMiB: 3493 });
    expect(heapShortfall(DEFAULT_CAPACITY, 4144 * 1024 ** 2)).toBeUndefined();
  });
});
