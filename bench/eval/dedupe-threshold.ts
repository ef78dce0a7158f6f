/**
 * `node dist/bench/eval/dedupe-threshold.js`: where to set the near-duplicate threshold of
 * adds (enclave/memory/near-duplicates.ts). A real conversation's turns are distinct memories:
 * for each cosine threshold it counts the turns of LoCoMo's development set and of the
 * synthetic conversations that an add would have merged into an earlier turn of the same
 * conversation (false merges; as an add does, only turns stating the same numbers and
 * single letters are compared), stored as the eval stores them ("[date] Speaker: text", so only within a session) and
 * as bare text; beside it, the share of the hand-scored similarity pairs scored 4.5 or more
 * (restatements of one fact) that it would merge.
 */
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { dot } from '../../enclave/vectors/vector-index.js';
import { literalsOf } from '../../enclave/memory/near-duplicates.js';
import { loadConversations } from './conversation-eval.js';
import type { ConversationSet } from './conversations/generate.js';
import { loadSimilarityPairs } from './datasets.js';
import { loadLocomo } from './locomo.js';

const THRESHOLDS = [0.8, 0.85, 0.88, 0.9, 0.92, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99];

/** Each turn's highest cosine with an earlier turn of its conversation. */
async function bestEarlier(embedder: Embedder, set: ConversationSet, text: (turn: ConversationSet['conversations'][number]['turns'][number]) => string): Promise<number[]> {
  const best: number[] = [];
  for (const conversation of set.conversations) {
    const texts = conversation.turns.map(text);
    const numbers = texts.map(literalsOf);
    const vectors = await embedder.embed(texts);
    vectors.forEach((v, i) => {
      let max = -1;
      for (let j = 0; j < i; j++) if (numbers[j] === numbers[i]) max = Math.max(max, dot(v, vectors[j]));
      if (i > 0) best.push(max);
    });
  }
  return best;
}

async function main(): Promise<void> {
  const embedder = await loadEmbedder({ name: process.env.EMBEDDING_MODEL ?? 'static', modelsDir });
  try {
    const sets: [string, ConversationSet][] = [['synthetic', await loadConversations()]];
    const locomo = await loadLocomo();
    if (locomo) sets.unshift(['LoCoMo dev', locomo]);
    const columns: [string, number[]][] = [];
    for (const [name, set] of sets) {
      columns.push([`${name} stored`, await bestEarlier(embedder, set, (t) => t.memory)]);
      columns.push([`${name} text`, await bestEarlier(embedder, set, (t) => t.text)]);
    }
    const pairs = [...(await loadSimilarityPairs('dev')), ...(await loadSimilarityPairs('test'))].filter((p) => p.score >= 4.5);
    const a = await embedder.embed(pairs.map((p) => p.a));
    const b = await embedder.embed(pairs.map((p) => p.b));
    const restatements = pairs.map((p, i) => (literalsOf(p.a) === literalsOf(p.b) ? dot(a[i], b[i]) : -1));
    console.log(`model ${embedder.id}; turns merged into an earlier turn of their conversation (of ${columns.map(([n, c]) => `${c.length} ${n}`).join(', ')}); restatement pairs (similarity score >= 4.5, ${pairs.length}) merged`);
    console.log(`| cosine >= | ${columns.map(([n]) => n).join(' | ')} | restatements |`);
    console.log(`|---|${columns.map(() => '---').join('|')}|---|`);
    for (const t of THRESHOLDS) {
      const merged = columns.map(([, c]) => c.filter((x) => x >= t).length);
      console.log(`| ${t.toFixed(2)} | ${merged.join(' | ')} | ${restatements.filter((x) => x >= t).length} |`);
    }
  } finally {
    await embedder.close();
  }
}

await main();
