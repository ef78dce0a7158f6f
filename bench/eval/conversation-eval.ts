/**
 * The long-conversation benchmark (bench/eval/conversations.json, see conversations/generate.ts):
 * every turn of a conversation is stored as a memory of one tenant, in order (its session as
 * run_id, its time as occurred_at), and each
 * question is asked of that tenant. Scores recall@5, recall@10 and MRR per kind of question
 * for each ranking, separately for the tuning half and the held-back half.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Embedder } from '../../enclave/embedding/types.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { FUSION_DEPTH } from '../../enclave/retrieval/hybrid.js';
import type { ConversationSet } from './conversations/generate.js';
import { EVAL_DIR } from './datasets.js';
import { recallAt, reciprocalRank } from './metrics.js';
import { RANKERS, type RankerName } from './rankers.js';

/** `hybrid` is the API's ranking, neighbour lending included (enclave/retrieval/neighbour-lending.ts); the others, comparisons. */
export type ConversationMode = RankerName;
export const CONVERSATION_MODES: ConversationMode[] = ['vector', 'lexical', 'hybrid', 'hybrid-max'];

export interface ConversationScores {
  questions: number;
  recall5: number;
  recall10: number;
  mrr: number;
}

/** Per half, per mode: all questions and each kind. */
export type ConversationReport = Record<'tune' | 'test', Record<string, Record<string, ConversationScores>>>;

export async function loadConversations(file = join(EVAL_DIR, 'conversations.json')): Promise<ConversationSet> {
  return JSON.parse(await readFile(file, 'utf8')) as ConversationSet;
}

/** The conversations, each stored in a MemoryService as the tenant named by its id. */
export interface StoredConversations {
  set: ConversationSet;
  memory: MemoryService;
  /** Memory id -> turn id, over all conversations. */
  turnId: Map<string, string>;
  /** Memory id -> the turn's place in its conversation. */
  turnIndex: Map<string, number>;
}

export async function storeConversations(embedder: Embedder, set?: ConversationSet): Promise<StoredConversations> {
  set ??= await loadConversations();
  const memory = new MemoryService(embedder);
  const turnId = new Map<string, string>();
  const turnIndex = new Map<string, number>();
  for (const conversation of set.conversations) {
    const records = await memory.addMany(conversation.turns.map((turn) => ({
      content: turn.memory, tenant_id: conversation.id, occurred_at: turn.occurred_at ?? new Date(`${turn.date} UTC`).toISOString(),
      // Each session as the run it is, as an agent storing its conversations would: the API
      // then knows which memories are a hit's neighbouring turns (retrieval/neighbour-lending.ts).
      run_id: `session-${turn.session}`,
    })));
    records.forEach((record, i) => {
      turnId.set(record.id, conversation.turns[i].id);
      turnIndex.set(record.id, i);
    });
  }
  return { set, memory, turnId, turnIndex };
}

export async function evaluateConversations({ set, memory, turnId }: StoredConversations, modes = CONVERSATION_MODES): Promise<ConversationReport> {
  const rows: { half: 'tune' | 'test'; mode: string; kind: string; r5: number; r10: number; rr: number }[] = [];
  for (const conversation of set.conversations) {
    const tenant = conversation.id;
    for (const question of conversation.questions) {
      for (const mode of modes) {
        const hits = await memory.query({ query: question.query, tenant_id: tenant, top_k: FUSION_DEPTH }, RANKERS[mode]);
        const ranking = hits.map((hit) => turnId.get(hit.record.id)!);
        rows.push({
          half: conversation.half, mode, kind: question.kind,
          r5: recallAt(ranking, question.evidence, 5),
          r10: recallAt(ranking, question.evidence, 10),
          rr: reciprocalRank(ranking, question.evidence),
        });
      }
    }
  }
  const summarise = (selected: typeof rows): ConversationScores => ({
    questions: selected.length,
    recall5: mean(selected.map((r) => r.r5)),
    recall10: mean(selected.map((r) => r.r10)),
    mrr: mean(selected.map((r) => r.rr)),
  });
  const kinds = ['all', ...[...new Set(rows.map((r) => r.kind))].sort()];
  const report = {} as ConversationReport;
  for (const half of ['tune', 'test'] as const) {
    report[half] = {};
    for (const mode of modes) {
      const inMode = rows.filter((r) => r.half === half && r.mode === mode);
      report[half][mode] = Object.fromEntries(kinds.map((kind) => [kind, summarise(kind === 'all' ? inMode : inMode.filter((r) => r.kind === kind))]));
    }
  }
  return report;
}

function mean(values: number[]): number {
  return values.length === 0 ? 0 : values.reduce((s, v) => s + v, 0) / values.length;
}

const f3 = (x: number) => x.toFixed(3);

export const SYNTHETIC_HALVES = { tune: 'conversations 0-5', test: 'conversations 6-11' };

/** `halves` names each half's conversations, e.g. { test: 'conversations 6-11', tune: 'conversations 0-5' }. */
export function formatConversationReport(report: ConversationReport, name = 'long conversations', halves = SYNTHETIC_HALVES): string {
  const lines: string[] = [];
  for (const half of ['test', 'tune'] as const) {
    const modes = Object.keys(report[half]);
    const kinds = Object.keys(report[half][modes[0]]);
    lines.push(`${name}, ${half === 'test' ? 'HELD-BACK' : 'tuning'} half (${halves[half]}): recall@5 / recall@10 / MRR`);
    lines.push(`| method     | ${kinds.map((k) => `${k} (${report[half][modes[0]][k].questions})`).join(' | ')} |`);
    lines.push(`|------------|${kinds.map(() => '---').join('|')}|`);
    for (const mode of modes) {
      lines.push(`| ${mode.padEnd(10)} | ${kinds.map((k) => { const s = report[half][mode][k]; return `${f3(s.recall5)} / ${f3(s.recall10)} / ${f3(s.mrr)}`; }).join(' | ')} |`);
    }
    lines.push('');
  }
  return lines.join('\n');
}
