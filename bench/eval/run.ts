/**
 * `npm run eval`: retrieval quality (recall@1, recall@5, MRR) of vector, lexical and hybrid
 * retrieval over bench/eval/retrieval-set.json, and semantic-similarity quality (Spearman's
 * rho) of the embedding model on bench/eval/similarity-{dev,test}.tsv. It runs the enclave's
 * own modules (embedder, MemoryService with its HNSW and BM25 indexes), not a copy of them.
 *
 *   npm run eval                      # the configured model (EMBEDDING_MODEL, default static)
 *   EMBEDDING_MODEL=<name> npm run eval
 *   node dist/bench/eval/run.js --json
 */
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { FUSION_DEPTH } from '../../enclave/retrieval/hybrid.js';
import { calibrateChatRelevance, formatRelevanceReport, type RelevanceReport } from './chat-relevance.js';
import { evaluateConversations, formatConversationReport, storeConversations, type ConversationReport } from './conversation-eval.js';
import { LOCOMO_FILE, loadLocomo } from './locomo.js';
import { loadRetrievalSet, loadSimilarityPairs, type QuestionKind } from './datasets.js';
import { recallAt, reciprocalRank, spearman } from './metrics.js';
import { RANKERS, type RankerName } from './rankers.js';

const MODES: RankerName[] = ['vector', 'lexical', 'hybrid', 'hybrid-max', 'hybrid-rrf'];

export interface Scores {
  questions: number;
  recall1: number;
  recall5: number;
  mrr: number;
}

export interface EvalReport {
  model: string;
  retrieval: Record<RankerName, Scores & { byKind: Record<string, Scores> }>;
  similarity: { dev: number; test: number; devPairs: number; testPairs: number };
  conversations: ConversationReport;
  /** The same on the LoCoMo development set; absent when its file is not on this machine. */
  locomo?: ConversationReport;
  locomoHalves?: { tune: string; test: string };
  chatRelevance: RelevanceReport;
}

export async function evaluate(embedder: Embedder): Promise<EvalReport> {
  const set = await loadRetrievalSet();
  const memory = new MemoryService(embedder);
  const results: { mode: RankerName; kind: QuestionKind; r1: number; r5: number; rr: number }[] = [];
  for (const tenant of set.tenants) {
    const records = await memory.addMany(tenant.memories.map(({ content }) => ({ content, tenant_id: tenant.tenant_id })));
    const datasetId = new Map(records.map((record, i) => [record.id, tenant.memories[i].id]));
    for (const question of tenant.questions) {
      for (const mode of MODES) {
        const hits = await memory.query({ query: question.query, tenant_id: tenant.tenant_id, top_k: FUSION_DEPTH }, RANKERS[mode]);
        const ranking = hits.map((hit) => datasetId.get(hit.record.id)!);
        results.push({
          mode,
          kind: question.kind,
          r1: recallAt(ranking, question.relevant, 1),
          r5: recallAt(ranking, question.relevant, 5),
          rr: reciprocalRank(ranking, question.relevant),
        });
      }
    }
  }
  const summarise = (rows: typeof results): Scores => ({
    questions: rows.length,
    recall1: mean(rows.map((r) => r.r1)),
    recall5: mean(rows.map((r) => r.r5)),
    mrr: mean(rows.map((r) => r.rr)),
  });
  const kinds = [...new Set(results.map((r) => r.kind))].sort();
  const retrieval = Object.fromEntries(
    MODES.map((mode) => {
      const rows = results.filter((r) => r.mode === mode);
      const byKind = Object.fromEntries(kinds.map((kind) => [kind, summarise(rows.filter((r) => r.kind === kind))]));
      return [mode, { ...summarise(rows), byKind }];
    }),
  ) as EvalReport['retrieval'];

  const [dev, test] = await Promise.all([loadSimilarityPairs('dev'), loadSimilarityPairs('test')]);
  const conversations = await storeConversations(embedder);
  const locomoSet = await loadLocomo();
  const locomo = locomoSet && (await storeConversations(embedder, locomoSet));
  return {
    model: embedder.id,
    retrieval,
    similarity: {
      dev: await similarityRho(embedder, dev),
      test: await similarityRho(embedder, test),
      devPairs: dev.length,
      testPairs: test.length,
    },
    conversations: await evaluateConversations(conversations),
    locomo: locomo && (await evaluateConversations(locomo)),
    locomoHalves: locomoSet && {
      tune: locomoSet.conversations.filter((c) => c.half === 'tune').map((c) => c.id).join(', '),
      test: locomoSet.conversations.filter((c) => c.half === 'test').map((c) => c.id).join(', '),
    },
    chatRelevance: await calibrateChatRelevance([{ name: 'synthetic', stored: conversations }, ...(locomo ? [{ name: 'LoCoMo', stored: locomo }] : [])]),
  };
}

/** Spearman's rho between the gold scores and the cosine similarity of each pair's embeddings. */
export async function similarityRho(embedder: Embedder, pairs: { score: number; a: string; b: string }[]): Promise<number> {
  const a = await embedder.embed(pairs.map((p) => p.a));
  const b = await embedder.embed(pairs.map((p) => p.b));
  const cosines = pairs.map((_, i) => a[i].reduce((sum, x, d) => sum + x * b[i][d], 0));
  return spearman(cosines, pairs.map((p) => p.score));
}

function mean(values: number[]): number {
  return values.reduce((s, v) => s + v, 0) / values.length;
}

const f3 = (x: number) => x.toFixed(3);

export function formatReport(report: EvalReport): string {
  const lines = [`model: ${report.model}`, ''];
  const questions = report.retrieval.hybrid.questions;
  lines.push(`retrieval (${questions} questions, bench/eval/retrieval-set.json)`);
  lines.push('| method     | recall@1 | recall@5 | MRR   |', '|------------|----------|----------|-------|');
  for (const mode of MODES) {
    const s = report.retrieval[mode];
    lines.push(`| ${mode.padEnd(10)} | ${f3(s.recall1)}    | ${f3(s.recall5)}    | ${f3(s.mrr)} |`);
  }
  lines.push('(hybrid: the API\'s fusion, a convex combination of cosine and BM25 / the query\'s ideal BM25; hybrid-max: BM25 / the best hit\'s BM25, as before issue 14; hybrid-rrf: reciprocal rank fusion, k = 60)');
  lines.push('', 'MRR by kind of question');
  const kinds = Object.keys(report.retrieval.hybrid.byKind);
  lines.push(`| method     | ${kinds.map((k) => `${k} (${report.retrieval.hybrid.byKind[k].questions})`).join(' | ')} |`);
  for (const mode of MODES) {
    const byKind = report.retrieval[mode].byKind;
    lines.push(`| ${mode.padEnd(10)} | ${kinds.map((k) => f3(byKind[k].mrr).padEnd(`${k} (${byKind[k].questions})`.length)).join(' | ')} |`);
  }
  const { similarity } = report;
  lines.push('', formatConversationReport(report.conversations));
  lines.push(
    report.locomo
      ? formatConversationReport(report.locomo, 'LoCoMo development set', report.locomoHalves!)
      : `LoCoMo development set: not found at ${LOCOMO_FILE} (set LOCOMO_FILE), skipped\n`,
  );
  lines.push(formatRelevanceReport(report.chatRelevance), '');
  lines.push(`semantic similarity, Spearman's rho: dev ${f3(similarity.dev)} (${similarity.devPairs} pairs), held-out test ${f3(similarity.test)} (${similarity.testPairs} pairs)`);
  return lines.join('\n');
}

async function main(): Promise<void> {
  const embedder = await loadEmbedder({ name: process.env.EMBEDDING_MODEL ?? 'static', modelsDir });
  try {
    const report = await evaluate(embedder);
    console.log(process.argv.includes('--json') ? JSON.stringify(report, null, 2) : formatReport(report));
  } finally {
    await embedder.close();
  }
}

await main();
