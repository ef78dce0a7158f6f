/**
 * Calibration of the chat relevance cut (enclave/chat/relevance.ts) on the long-conversation
 * benchmark: each question's top CHAT_TOP_K memories, plus off-topic messages asked of every
 * conversation, whose memories are all irrelevant. Grid-searches (minimum score, share of the
 * best) for the best F2 on the tuning half, and reports the cut in the code on both halves.
 */
import { relevantMemories, CHAT_RELEVANCE, type RelevanceCut } from '../../enclave/chat/relevance.js';
import type { ScoredMemory } from '../../enclave/memory/types.js';
import type { StoredConversations } from './conversation-eval.js';

/** CHAT_MEMORY_TOP_K's default. */
const CHAT_TOP_K = 5;

/**
 * Messages a user might send that no conversation holds anything about. Written for this
 * project; even ones go with the tuning half, odd ones with the held-back half.
 */
export const OFF_TOPIC = [
  'What is the weather in Paris?', 'How do I reset my wifi router?', 'Who won the football world cup in 2018?',
  'What is the capital of Australia?', 'Convert 50 miles to kilometres', 'Write a haiku about autumn leaves',
  'How many calories are in a banana?', 'Explain how a transistor works', 'What time is it in Tokyo right now?',
  'Recommend a good laptop for programming', 'What is the square root of 144?', 'How do I unclog a kitchen sink?',
  'Translate good morning into French', 'What are the symptoms of the flu?', 'Summarise the plot of Hamlet',
  'How does compound interest work?', 'What is the population of Brazil?', 'Give me a recipe for pancakes',
  'Is it going to snow tomorrow?', 'How far is the moon from the earth?', 'What is the best way to learn chess openings?',
  'How do I change a flat tyre on a bicycle?', 'Who painted the Mona Lisa?', 'What does HTTP 404 mean?',
  'How long should I boil an egg?', 'What is the exchange rate of euros to dollars?', 'Tell me a joke about penguins',
  'How do vaccines train the immune system?', 'What year did the Berlin Wall fall?', 'Which planet has the most moons?',
  'What should I pack for a business trip?', 'How do I write a cover letter?', 'Why is the sky blue?',
  'What is the speed of sound?', 'List three uses of baking soda', 'How do I renew a library card online?',
];

export interface Judged {
  set: string;
  half: 'tune' | 'test';
  hits: ScoredMemory[];
  /** Which hits are evidence; all false for off-topic messages. */
  relevant: boolean[];
  offTopic: boolean;
}

export interface CutScores {
  precision: number;
  recall: number;
  f1: number;
  /** F2: recall weighs twice precision. */
  f2: number;
  /** Share of off-topic messages for which nothing is kept. */
  offTopicEmpty: number;
  /** Share of questions for which at least one evidence memory is kept: the evidence reaches the prompt. */
  answeredKept: number;
}

export interface SetRelevance {
  name: string;
  tune: CutScores;
  test: CutScores;
  /** Keeping every top-5 memory. */
  keepAll: { tune: CutScores; test: CutScores };
}

export interface RelevanceReport {
  inCode: RelevanceCut;
  /** The best cut over the tuning halves of every set together (see OFF_TOPIC_FLOOR). */
  bestOnTune: RelevanceCut & { f2: number; answeredKept: number };
  sets: SetRelevance[];
}

export interface NamedConversations {
  name: string;
  stored: StoredConversations;
}

export async function judgeChatRelevance(sets: NamedConversations[]): Promise<Judged[]> {
  const judged: Judged[] = [];
  for (const { name, stored: { set, memory, turnId } } of sets) {
    for (const conversation of set.conversations) {
      const ask = (query: string) => memory.query({ tenant_id: conversation.id, query, top_k: CHAT_TOP_K });
      const base = { set: name, half: conversation.half };
      for (const question of conversation.questions) {
        const hits = await ask(question.query);
        const evidence = new Set(question.evidence);
        judged.push({ ...base, hits, relevant: hits.map((hit) => evidence.has(turnId.get(hit.record.id)!)), offTopic: false });
      }
      for (const [i, query] of OFF_TOPIC.entries()) {
        if ((i % 2 === 0) !== (conversation.half === 'tune')) continue;
        const hits = await ask(query);
        judged.push({ ...base, hits, relevant: hits.map(() => false), offTopic: true });
      }
    }
  }
  return judged;
}

export function scoreCut(judged: readonly Judged[], cut: RelevanceCut): CutScores {
  let tp = 0;
  let fp = 0;
  let fn = 0;
  let offTopic = 0;
  let offTopicEmpty = 0;
  let answerable = 0;
  let answeredKept = 0;
  for (const { hits, relevant, offTopic: isOffTopic } of judged) {
    const kept = new Set(relevantMemories(hits, cut));
    let keptEvidence = 0;
    hits.forEach((hit, i) => {
      if (!kept.has(hit)) {
        if (relevant[i]) fn++;
      } else if (relevant[i]) {
        tp++;
        keptEvidence++;
      } else {
        fp++;
      }
    });
    if (isOffTopic) {
      offTopic++;
      if (kept.size === 0) offTopicEmpty++;
    } else if (relevant.some(Boolean)) {
      answerable++;
      if (keptEvidence > 0) answeredKept++;
    } else {
      // Evidence outside the top 5: no cut can bring it, but the question still asks for an answer.
      answerable++;
    }
  }
  const precision = tp + fp === 0 ? 1 : tp / (tp + fp);
  const recall = tp + fn === 0 ? 1 : tp / (tp + fn);
  return { precision, recall, f1: fBeta(precision, recall, 1), f2: fBeta(precision, recall, 2), offTopicEmpty: offTopic === 0 ? 1 : offTopicEmpty / offTopic, answeredKept: answerable === 0 ? 0 : answeredKept / answerable };
}

export async function calibrateChatRelevance(sets: NamedConversations[]): Promise<RelevanceReport> {
  const judged = await judgeChatRelevance(sets);
  if (process.env.EVAL_DUMP_RELEVANCE) await dumpJudged(process.env.EVAL_DUMP_RELEVANCE, judged);
  const tuning = judged.filter((j) => j.half === 'tune');
  let best: RelevanceCut & { f2: number; answeredKept: number } = { minScore: 0, minShareOfBest: 0, minCosine: Infinity, f2: -1, answeredKept: -1 };
  const firstHits = [undefined, ...[0.1, 0.2, 0.25, 0.3].flatMap((minScore) => [1.3, 1.5, 2].map((minLead) => ({ minScore, minLead })))];
  for (let minScore = 0; minScore <= 0.8 + 1e-9; minScore += 0.02) {
    for (const minShareOfBest of [0, 0.5, 0.6, 0.7, 0.8, 0.9]) {
      for (const minCosine of [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, Infinity]) {
        for (const firstHit of firstHits) {
          const cut = { minScore: Math.round(minScore * 100) / 100, minShareOfBest, minCosine, ...(firstHit && { firstHit }) };
          const scores = scoreCut(tuning, cut);
          if (scores.offTopicEmpty < OFF_TOPIC_FLOOR) continue;
          const better = scores.answeredKept > best.answeredKept + 1e-9 || (scores.answeredKept > best.answeredKept - 1e-9 && scores.f2 > best.f2 + 1e-9);
          if (better) best = { ...cut, f2: scores.f2, answeredKept: scores.answeredKept };
        }
      }
    }
  }
  const keepAll = { minScore: -Infinity, minShareOfBest: 0, minCosine: -Infinity };
  const part = (name: string, half: 'tune' | 'test') => judged.filter((j) => j.set === name && j.half === half);
  return {
    inCode: CHAT_RELEVANCE,
    bestOnTune: best,
    sets: sets.map(({ name }) => ({
      name,
      tune: scoreCut(part(name, 'tune'), CHAT_RELEVANCE),
      test: scoreCut(part(name, 'test'), CHAT_RELEVANCE),
      keepAll: { tune: scoreCut(part(name, 'tune'), keepAll), test: scoreCut(part(name, 'test'), keepAll) },
    })),
  };
}

/** For exploring other cuts outside the eval: each judged message's top 5 as plain numbers. */
async function dumpJudged(file: string, judged: readonly Judged[]): Promise<void> {
  const { writeFile } = await import('node:fs/promises');
  const rows = judged.map(({ set, half, hits, relevant, offTopic }) => ({ set, half, offTopic, hits: hits.map((h, i) => ({ ...h.scores, relevant: relevant[i] })) }));
  await writeFile(file, JSON.stringify(rows));
}

/**
 * The calibration keeps the cut that brings a question's evidence into the prompt most often
 * while leaving at least this share of off-topic messages with no memory at all; F2 breaks ties.
 * Maximising F2 over single memories instead (until issue 33) dropped evidence ranked 2-5 to
 * save tokens: on LoCoMo it brought the evidence for 47% of questions, against 59% for the
 * whole top 5.
 */
const OFF_TOPIC_FLOOR = 0.75;

const f3 = (x: number) => x.toFixed(3);

/** F-beta of precision and recall over single memories; F2 weighs a missed memory twice an extra one. */
function fBeta(precision: number, recall: number, beta: number): number {
  const b2 = beta * beta;
  return precision + recall === 0 ? 0 : ((1 + b2) * precision * recall) / (b2 * precision + recall);
}

export function formatRelevanceReport(report: RelevanceReport): string {
  const row = (name: string, s: CutScores) =>
    `| ${name.padEnd(36)} | ${f3(s.precision)}     | ${f3(s.recall)}  | ${f3(s.f2)} | ${f3(s.answeredKept)}             | ${f3(s.offTopicEmpty)}               |`;
  const { inCode, bestOnTune } = report;
  const lines = [
    `chat relevance cut (top ${CHAT_TOP_K}; ${describeCut(inCode)}; best on the tuning halves together: ${describeCut(bestOnTune)}, evidence kept ${f3(bestOnTune.answeredKept)}, F2 ${f3(bestOnTune.f2)})`,
    '| memories kept                        | precision | recall | F2    | questions with evidence | off-topic with none |',
    '|--------------------------------------|-----------|--------|-------|-------------------------|---------------------|',
  ];
  for (const set of report.sets) {
    lines.push(row(`${set.name}: cut, held-back`, set.test), row(`${set.name}: all top 5, held-back`, set.keepAll.test));
    lines.push(row(`${set.name}: cut, tuning`, set.tune), row(`${set.name}: all top 5, tuning`, set.keepAll.tune));
  }
  return lines.join('\n');
}

function describeCut(cut: RelevanceCut): string {
  const first = cut.firstHit ? `; the first hit when score >= ${cut.firstHit.minScore} and >= ${cut.firstHit.minLead} x the second's` : '';
  return `score >= ${cut.minScore} (or cosine >= ${cut.minCosine}) and >= ${cut.minShareOfBest} x best${first}`;
}
