import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { OTHER_SPEAKER_SHARE, favourNamedSpeakers, speakerOf } from '../../enclave/retrieval/speaker-match.js';
import type { RankedHit } from '../../enclave/retrieval/tenant-search.js';

describe('speakerOf', () => {
  it('reads the speaker a transcript line opens with, and nothing from other texts', () => {
    expect(speakerOf('[8 May 2023] Melanie: We went camping.')).toEqual(['melani']);
    expect(speakerOf('Ana: Hi!')).toEqual(['ana']);
    expect(speakerOf('[10:02] John Smith: running late')).toEqual(['john', 'smith']);
    expect(speakerOf('Invoice 88213 from Hetzner was settled on 15 August.')).toEqual([]);
    expect(speakerOf('Ticket ZX-4471: payment webhook retries')).toEqual([]);
    expect(speakerOf('Note that: the server restarts at 2')).toEqual([]);
    expect(speakerOf('We met Ana: she was late.')).toEqual([]);
  });
});

const hit = (id: string, fused: number): RankedHit => ({ id, fused, vector: fused, lexical: undefined });

describe('favourNamedSpeakers', () => {
  const texts: Record<string, string> = {
    reply: 'Ben: Ana, your paintings are lovely!',
    own: 'Ana: I painted a lake.',
    fact: 'Ana paints on Sundays.',
    other: 'Cleo: I paint too.',
  };
  const contentOf = (id: string) => texts[id];

  it("lowers the turns of speakers the query does not name when it names one of its hits' speakers", () => {
    const ranked = [hit('reply', 0.5), hit('fact', 0.45), hit('own', 0.4), hit('other', 0.35)];
    const favoured = favourNamedSpeakers(ranked, "What does Ana's painting show?", contentOf);
    expect(favoured.map((h) => [h.id, h.fused])).toEqual([['fact', 0.45], ['own', 0.4], ['reply', 0.5 * OTHER_SPEAKER_SHARE], ['other', 0.35 * OTHER_SPEAKER_SHARE]]);
    // Both named: only the third speaker is lowered.
    expect(favourNamedSpeakers(ranked, 'Do Ana and Ben paint?', contentOf).map((h) => [h.id, h.fused]))
      .toEqual([['reply', 0.5], ['fact', 0.45], ['own', 0.4], ['other', 0.35 * OTHER_SPEAKER_SHARE]]);
  });

  it('changes nothing when the query names no speaker of its hits', () => {
    const ranked = [hit('reply', 0.5), hit('own', 0.4)];
    expect(favourNamedSpeakers(ranked, 'Who painted a lake?', contentOf)).toEqual(ranked);
    expect(favourNamedSpeakers(ranked, 'What does Dana paint?', contentOf)).toEqual(ranked);
    expect(favourNamedSpeakers([hit('fact', 0.5)], 'What does Ana paint?', contentOf)).toEqual([hit('fact', 0.5)]);
  });
});

describe('a query naming a speaker of a stored conversation', () => {
  let model: Embedder;
  let memory: MemoryService;
  const tenant_id = 'chat';
  // Ben's reply repeats the question's words; Ana's own turn holds the answer in fewer of them.
  const turns = [
    'Ana: I finished a painting of the lake at sunrise.',
    'Ben: Ana, your lake paintings are the best paintings, what will you paint next?',
    'Ana: Maybe the old mill by the river.',
    'Ben: I only paint fences.',
  ];
  beforeAll(async () => {
    model = await loadEmbedder({ name: 'static', modelsDir });
    memory = new MemoryService(model);
    await memory.addMany(turns.map((content) => ({ content, tenant_id, run_id: 's1' })));
  });
  afterAll(() => model.close());

  it("ranks the named speaker's own turns above the other's reply that names them, whatever top_k", async () => {
    const found = async (query: string, top_k: number) => (await memory.query({ tenant_id, query, top_k })).map((m) => m.record.content);
    expect((await found('What did Ana paint?', 2))[0]).toBe(turns[0]);
    expect((await found('What did Ana paint?', 10)).slice(0, 2)).toEqual(await found('What did Ana paint?', 2));
    // Naming Ben puts his turns first.
    expect((await found('What does Ben paint?', 1))[0]).toMatch(/^Ben: /);
  });
});
