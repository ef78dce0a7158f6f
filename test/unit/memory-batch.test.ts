import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';

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
});
