import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { DEFAULT_HNSW } from '../../enclave/vectors/hnsw-index.js';

describe('MemoryService.addMany and hybrid query (real embedder)', () => {
  let embedder: Embedder;
  let calls: string[][];
  let counting: Embedder;

  beforeAll(async () => {
    embedder = await loadEmbedder({ name: 'static', modelsDir });
    counting = {
      id: embedder.id,
      dimension: embedder.dimension,
      sha256: embedder.sha256,
      embed: (texts) => {
        calls.push(texts);
        return embedder.embed(texts);
      },
      close: () => embedder.close(),
    };
  });
  afterAll(async () => {
    await embedder?.close();
  });

  it('embeds a whole batch in one embedder call and stores it in order', async () => {
    calls = [];
    const memory = new MemoryService(counting);
    const contents = Array.from({ length: 100 }, (_, i) => `Memory ${i}: ticket QA-${1000 + i} about the printer`);
    const records = await memory.addMany(contents.map((content) => ({ content, tenant_id: 't' })));
    expect(calls).toEqual([contents]);
    expect(records.map((r) => r.content)).toEqual(contents);
    expect(new Set(records.map((r) => r.id)).size).toBe(100);
    const [hit] = await memory.query({ query: 'QA-1057', tenant_id: 't', top_k: 1 });
    expect(hit.record.content).toBe(contents[57]);
  });

  it('stores nothing when the embedding fails', async () => {
    const failing: Embedder = { ...counting, embed: async () => { throw new Error('onnx failed'); } };
    const memory = new MemoryService(failing);
    await expect(memory.addMany([{ content: 'a', tenant_id: 'x' }, { content: 'b', tenant_id: 'x' }])).rejects.toThrow('onnx failed');
    expect([...memory.entries()]).toEqual([]);
  });

  it('finds a memory of only unknown words by lexical match, with cosine 0 when it has no vector', async () => {
    const memory = new MemoryService(embedder);
    const [codes] = await memory.addMany([
      { content: '4471-88 / 99-12', tenant_id: 'c' },
      { content: 'The garden needs water', tenant_id: 'c' },
    ]);
    const [hit] = await memory.query({ query: 'what about 4471-88', tenant_id: 'c', top_k: 2 });
    expect(hit.record.id).toBe(codes.id);
    expect(hit.scores.vector).toBe(0);
    expect(hit.scores.lexical).toBeGreaterThan(0);
  });

  it('the same text added again updates the memory where it stands (flat and HNSW tenants): still found, then changed and deleted as any', async () => {
    for (const promoteAbove of [4096, 8]) {
      const memory = new MemoryService(embedder, { vectorIndex: { promoteAbove, hnsw: DEFAULT_HNSW } });
      const texts = Array.from({ length: 20 }, (_, i) => `Ticket QA-${1000 + i} is about the printer on floor ${i}`);
      const added = await memory.remember(texts.map((content) => ({ content, tenant_id: 't', dedupe: true })));
      expect(added.every((o) => o.event === 'ADD')).toBe(true);
      const id = added[3].record.id;
      const again = await memory.remember([
        { content: texts[3], tenant_id: 't', dedupe: true, metadata: { n: 1 } },
        { content: texts[3], tenant_id: 't', dedupe: true },
      ]);
      expect(again.map((o) => [o.event, o.record.id])).toEqual([['UPDATE', id], ['UPDATE', id]]);
      expect(memory.usage.memories).toBe(20);
      const [hit] = await memory.query({ query: 'QA-1003 printer', tenant_id: 't', top_k: 1 });
      expect(hit.record).toMatchObject({ id, content: texts[3], metadata: { n: 1 } });
      expect(hit.scores.vector).toBeGreaterThan(0);
      await memory.update('t', id, { content: 'The boiler needs a service in March' });
      const [boiler] = await memory.query({ query: 'boiler service', tenant_id: 't', top_k: 1 });
      expect(boiler.record.id).toBe(id);
      expect((await memory.query({ query: 'QA-1003', tenant_id: 't', top_k: 20 })).some((h) => h.record.content === texts[3])).toBe(false);
      await memory.delete('t', id);
      expect((await memory.query({ query: 'boiler service', tenant_id: 't', top_k: 20 })).some((h) => h.record.id === id)).toBe(false);
      expect(memory.usage.memories).toBe(19);
    }
  });

  it('saves with a snapshot the graph of a tenant whose promotion is under way (finished first)', async () => {
    // Past promoteAbove by PROMOTE_AT_ONCE + 1: the graph is not whole until more writes, or a snapshot.
    const memory = new MemoryService(embedder, { vectorIndex: { promoteAbove: 300, hnsw: DEFAULT_HNSW } });
    await memory.addMany(Array.from({ length: 301 }, (_, i) => ({ content: `Note ${i} about parcel ${i * 7}`, tenant_id: 'grown' })));
    const graphs = [...memory.graphs()];
    expect(graphs.map(([tenant]) => tenant)).toEqual(['grown']);
    const saved = await graphs[0][1]();
    expect(saved.ids.filter((id) => id !== '')).toHaveLength(301);
  });
});
