import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { AddOrder } from '../../enclave/memory/add-order.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { TenantMemories } from '../../enclave/memory/tenant-memories.js';
import type { MemoryRecord } from '../../enclave/memory/types.js';
import { TermDictionary } from '../../enclave/lexical/term-dictionary.js';
import { DEFAULT_TIERS } from '../../enclave/vectors/tiered-index.js';
import { FAR_NEIGHBOUR_WEIGHT, NEIGHBOUR_LENDERS, NEIGHBOUR_WEIGHT, lendToNeighbours, type NeighbourSource } from '../../enclave/retrieval/neighbour-lending.js';
import type { RankedHit } from '../../enclave/retrieval/tenant-search.js';

describe('AddOrder', () => {
  it('gives each memory the ones added just before and after it that are still held', () => {
    const order = new AddOrder();
    for (const id of ['a', 'b', 'c', 'd']) order.append(id);
    expect(order.beside('a')).toEqual(['b']);
    expect(order.beside('b')).toEqual(['a', 'c']);
    order.remove('c');
    expect(order.beside('b')).toEqual(['a', 'd']);
    expect(order.beside('d')).toEqual(['b']);
    order.remove('d');
    order.append('e');
    expect(order.beside('b')).toEqual(['a', 'e']);
    order.remove('a');
    expect(order.beside('b')).toEqual(['e']);
    expect(order.beside('a')).toEqual([]);
  });
});

const hit = (id: string, fused: number): RankedHit => ({ id, fused, vector: fused, lexical: undefined });

describe('lendToNeighbours', () => {
  const source = (sides: Record<string, string[]>, unlisted: Record<string, number> = {}, far: Record<string, string[]> = {}): NeighbourSource => ({
    beside: (id) => ({ near: sides[id] ?? [], far: far[id] ?? [] }),
    unlisted: (ids) => ids.map((id) => hit(id, unlisted[id] ?? 0)),
  });

  it('raises a hit\'s neighbours by a share of its score, never above it, and lists one it did not', () => {
    const ranked = [hit('asks', 0.6), hit('other', 0.25), hit('reply', 0.1)];
    const lent = lendToNeighbours(ranked, source({ asks: ['before', 'reply'] }, { before: 0.05 }));
    expect(lent.map((h) => h.id)).toEqual(['asks', 'reply', 'other', 'before']);
    expect(lent[1].fused).toBeCloseTo(0.1 + NEIGHBOUR_WEIGHT * 0.6, 12);
    expect(lent[3].fused).toBeCloseTo(0.05 + NEIGHBOUR_WEIGHT * 0.6, 12);
    // Two turns away: a smaller share.
    const two = lendToNeighbours([hit('asks', 0.6), hit('other', 0.15)], source({}, {}, { asks: ['answer'] }));
    expect(two.map((h) => [h.id, h.fused])).toEqual([['asks', 0.6], ['other', 0.15], ['answer', FAR_NEIGHBOUR_WEIGHT * 0.6]]);
    // Close to the lender already: it stays just under it.
    const close = lendToNeighbours([hit('asks', 0.6), hit('reply', 0.55)], source({ asks: ['reply'] }));
    expect(close[1].fused).toBeLessThan(0.6);
    expect(close[1].fused).toBeGreaterThan(0.59);
  });

  it('never lowers a score, lends only from the first hits and only what is positive', () => {
    const strong = lendToNeighbours([hit('a', 0.5), hit('b', 0.45)], source({ a: ['b'], b: ['a'] }));
    expect(strong.map((h) => [h.id, h.fused])).toEqual([['a', 0.5], ['b', 0.5 * 0.999]]);
    const ranked = Array.from({ length: NEIGHBOUR_LENDERS + 1 }, (_, i) => hit(`h${i}`, 1 - i * 0.01));
    const late = lendToNeighbours(ranked, source({ [`h${NEIGHBOUR_LENDERS}`]: ['far'] }));
    expect(late.map((h) => h.id)).not.toContain('far');
    expect(lendToNeighbours([hit('a', -0.1)], source({ a: ['b'] })).map((h) => h.id)).toEqual(['a']);
  });
});

describe('a query of a conversation stored with its session as run_id', () => {
  let model: Embedder;
  let memory: MemoryService;
  const tenant_id = 'chat';
  const turns = [
    'Ana: How did the fundraiser for the library go?',
    'Ben: We raised enough to replace the leaking roof and buy new shelves.',
    'Ana: That is wonderful to hear.',
  ];
  beforeAll(async () => {
    model = await loadEmbedder({ name: 'static', modelsDir });
    memory = new MemoryService(model);
    // Turns of another session, one nearer the question in meaning than the reply, which shares none of its words.
    await memory.addMany(['Ben: I finished a novel about pirates.', 'Ana: Can I help with the bake sale?', 'Ben: The town hall meeting ran late.'].map((content) => ({ content, tenant_id, run_id: 's1' })));
    await memory.addMany(turns.map((content, i) => ({ content, tenant_id, run_id: 's2', metadata: { turn: i } })));
    await memory.addMany(turns.map((content) => ({ content: content.replace('Ben', 'Bo'), tenant_id: 'facts' })));
  });
  afterAll(() => model.close());
  const found = async (query: Record<string, unknown>) =>
    (await memory.query({ tenant_id, query: 'What came of the library fundraiser?', top_k: 2, ...query })).map((m) => m.record.content);

  it('brings up the reply to the turn that matches the question, whatever top_k', async () => {
    expect(await found({})).toEqual(turns.slice(0, 2));
    expect((await found({ top_k: 1 })).concat((await found({ top_k: 6 })).slice(1, 2))).toEqual(turns.slice(0, 2));
  });

  it('lends to no memory the query may not return, and to none outside the run', async () => {
    // The reply is filtered out: the lending must not bring it back.
    expect(await found({ filters: { turn: 0 } })).toEqual([turns[0]]);
    expect(await found({ run_id: 's1', top_k: 3 })).not.toContain(turns[1]);
    expect(await found({ run_id: 's2', top_k: 2 })).toEqual(turns.slice(0, 2));
    // The same turns stored without a run_id are not a session: no lending.
    const facts = await memory.query({ tenant_id: 'facts', query: 'What came of the library fundraiser?', top_k: 3 });
    expect(facts[1].score).toBeLessThan((NEIGHBOUR_WEIGHT / 2) * facts[0].score);
  });
});

describe("a tenant's add order, built at its first query", () => {
  const record = (id: string, content = `memory ${id}`): MemoryRecord => ({ id, object: 'memory', tenant_id: 't', content, metadata: {}, created_at: 1 });
  const tenant = () => new TenantMemories(4, DEFAULT_TIERS, new TermDictionary());
  const sides = (memories: TenantMemories, ids: string[]) => Object.fromEntries(ids.map((id) => [id, memories.order.beside(id)]));

  it('gives the same neighbours whether it was built before the changes or after them', () => {
    const changes = (memories: TenantMemories) => {
      for (const id of ['a', 'b', 'c', 'd', 'e']) memories.add(record(id), null);
      memories.delete('c');
      memories.update(record('b', 'b said again, in other words'), null); // keeps its place
      memories.add(record('f'), null);
      memories.delete('a');
    };
    const early = tenant();
    void early.order; // a query before any change: the links follow every change from here
    changes(early);
    const late = tenant();
    changes(late); // no query until now: the links are built from the records
    const ids = ['a', 'b', 'c', 'd', 'e', 'f'];
    expect(sides(late, ids)).toEqual(sides(early, ids));
    expect(sides(late, ids)).toEqual({ a: [], b: ['d'], c: [], d: ['b', 'e'], e: ['d', 'f'], f: ['e'] });
    late.add(record('g'), null);
    late.delete('e');
    expect(late.order.beside('d')).toEqual(['b', 'f']);
    expect(late.order.beside('g')).toEqual(['f']);
  });
});
