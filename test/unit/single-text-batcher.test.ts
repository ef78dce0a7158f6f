import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { SingleTextBatcher } from '../../enclave/embedding/single-text-batcher.js';

let model: Embedder;
beforeAll(async () => {
  model = await loadEmbedder({ name: 'static', modelsDir });
});
afterAll(async () => {
  await model?.close();
});

/** The real model, with each call's texts recorded and, for a text in `refuse`, the whole call failing. */
function watched(refuse = new Set<string>()): { embedder: Embedder; calls: string[][] } {
  const calls: string[][] = [];
  const embedder: Embedder = {
    id: model.id, dimension: model.dimension, sha256: model.sha256, close: () => Promise.resolve(),
    embed: (texts) => {
      calls.push(texts);
      return texts.some((t) => refuse.has(t)) ? Promise.reject(new Error(`cannot embed ${texts.join(' | ')}`)) : model.embed(texts);
    },
  };
  return { embedder, calls };
}

const TEXTS = ['Maya is allergic to peanuts', 'Tom moved to Lisbon in March', 'the invoice 88213 is paid'];

describe('SingleTextBatcher', () => {
  it('embeds the texts asked for at once in one run, each caller getting its own text\'s vector', async () => {
    const { embedder, calls } = watched();
    const batcher = new SingleTextBatcher(() => embedder);
    const vectors = await Promise.all(TEXTS.map((t) => batcher.embed(t)));
    expect(calls).toEqual([TEXTS]);
    const alone = await model.embed(TEXTS);
    // Batching may change the last bit of a sum (embedding.test.ts), never which text a vector is of.
    vectors.forEach((v, i) => v.forEach((x, k) => expect(Math.abs(x - alone[i][k])).toBeLessThan(1e-6)));
  });

  it('starts a new run for texts asked for after a run has started', async () => {
    const { embedder, calls } = watched();
    const batcher = new SingleTextBatcher(() => embedder);
    await batcher.embed(TEXTS[0]);
    await Promise.all([batcher.embed(TEXTS[1]), batcher.embed(TEXTS[2])]);
    expect(calls).toEqual([[TEXTS[0]], [TEXTS[1], TEXTS[2]]]);
  });

  it('a run that fails is retried text by text: only the text that cannot be embedded is refused', async () => {
    const { embedder, calls } = watched(new Set([TEXTS[1]]));
    const batcher = new SingleTextBatcher(() => embedder);
    const outcomes = await Promise.allSettled(TEXTS.map((t) => batcher.embed(t)));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason.message).toBe(`cannot embed ${TEXTS[1]}`);
    expect(calls).toEqual([TEXTS, [TEXTS[0]], [TEXTS[1]], [TEXTS[2]]]);
  });

  it('uses the embedder current at each run (a model swapped in by reembed)', async () => {
    const first = watched();
    const second = watched();
    let current = first.embedder;
    const batcher = new SingleTextBatcher(() => current);
    await batcher.embed(TEXTS[0]);
    current = second.embedder;
    await batcher.embed(TEXTS[1]);
    expect([first.calls, second.calls]).toEqual([[[TEXTS[0]]], [[TEXTS[1]]]]);
  });
});
