/**
 * Writes bench/eval/conversations.json: multi-session conversations between two people, each
 * turn stored as a memory the way an agent would store it ("[8 May 2023] Maya: ..."), and
 * questions whose evidence is one or several earlier turns (facts.ts). Deterministic (a
 * seeded PRNG), so the file in the repository is exactly what this writes:
 *
 *   npm run build && node dist/bench/eval/conversations/generate.js
 *
 * Conversations 0-5 are the tuning half, 6-11 the held-back half: each is a different pair
 * of people, with its own draw of facts and values. Most turns are small talk and reactions
 * (some repeat the evidence's keywords, as real replies do), so a question has to find one
 * turn among about 240.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { EVAL_DIR } from '../datasets.js';
import { MULTI_FACTS, OPEN_FACTS, SINGLE_FACTS, type ConversationQuestionKind, type Fact, type FactType } from './facts.js';
import { SMALL_TALK, SMALL_TALK_OPENERS } from './small-talk.js';
import { mulberry32 } from '../../../scripts/lib/mulberry32.js';

export interface ConversationSet {
  description: string;
  conversations: {
    id: string;
    half: 'tune' | 'test';
    speakers: [string, string];
    /** `occurred_at`: when the turn was said (RFC 3339), when the set knows the time of day (LoCoMo); else its date's midnight. */
    turns: { id: string; session: number; date: string; speaker: string; text: string; memory: string; occurred_at?: string }[];
    questions: { query: string; kind: ConversationQuestionKind; evidence: string[] }[];
  }[];
}

const NAMES = [
  ['Maya', 'Jonah'], ['Priya', 'Tomas'], ['Aiko', 'Kwame'], ['Elena', 'Marcus'], ['Sofia', 'Dev'], ['Hana', 'Lucas'],
  ['Amara', 'Felix'], ['Ingrid', 'Rafael'], ['Nadia', 'Owen'], ['Chloe', 'Mateo'], ['Yusuf', 'Grace'], ['Leo', 'Zara'],
] as const;
const SESSIONS = 12;
const TURNS_PER_SESSION = 20;
const SINGLE_PER_SPEAKER = 9;
const MULTI_PER_SPEAKER = 2;
const OPEN_PER_SPEAKER = 2;
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];


function sample<T>(random: () => number, items: readonly T[], n: number): T[] {
  const pool = [...items];
  for (let i = pool.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [pool[i], pool[j]] = [pool[j], pool[i]];
  }
  return pool.slice(0, n);
}

interface Placed {
  fact: Fact;
  owner: 0 | 1;
  sessions: number[];
}

export function generate(): ConversationSet {
  const conversations = NAMES.map((speakers, c) => {
    const random = mulberry32(1000 + c);
    const pick = <T,>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
    const placed: Placed[] = [];
    for (const owner of [0, 1] as const) {
      const draw = (types: FactType[], n: number) => sample(random, types, n).map((type) => type(pick));
      for (const fact of [...draw(SINGLE_FACTS, SINGLE_PER_SPEAKER), ...draw(MULTI_FACTS, MULTI_PER_SPEAKER), ...draw(OPEN_FACTS, OPEN_PER_SPEAKER)]) {
        // Evidence turns go to distinct sessions in order; multi-hop facts are spread apart.
        const sessions = sample(random, [...Array(SESSIONS).keys()], fact.evidence.length).sort((a, b) => a - b);
        placed.push({ fact, owner, sessions });
      }
    }
    const start = Date.UTC(2023, Math.floor(random() * 6), 1 + Math.floor(random() * 25));
    const turns: ConversationSet['conversations'][number]['turns'] = [];
    const evidenceIds = new Map<Placed, string[]>();
    let talk = sample(random, SMALL_TALK, SMALL_TALK.length);
    for (let session = 0; session < SESSIONS; session++) {
      const day = new Date(start + session * (9 + Math.floor(random() * 12)) * 86_400_000);
      const date = `${day.getUTCDate()} ${MONTHS[day.getUTCMonth()]} ${day.getUTCFullYear()}`;
      // Evidence turns (each followed by the other speaker's reaction) at random places among small talk.
      const blocks: { speaker: 0 | 1; text: string; placed?: Placed }[][] = [];
      for (const p of placed) {
        p.sessions.forEach((s, i) => {
          if (s !== session) return;
          blocks.push([{ speaker: p.owner, text: p.fact.evidence[i], placed: p }, { speaker: (1 - p.owner) as 0 | 1, text: p.fact.reactions[i] ?? pick(SMALL_TALK_OPENERS) }]);
        });
      }
      const fillerCount = Math.max(0, TURNS_PER_SESSION - blocks.reduce((n, b) => n + b.length, 0));
      for (let i = 0; i < fillerCount; i++) {
        if (talk.length === 0) talk = sample(random, SMALL_TALK, SMALL_TALK.length);
        const line = talk.pop()!;
        blocks.push([{ speaker: (i % 2) as 0 | 1, text: random() < 0.3 ? `${pick(SMALL_TALK_OPENERS)} ${line}` : line }]);
      }
      for (const block of sample(random, blocks, blocks.length)) {
        for (const turn of block) {
          const id = `c${c}-t${turns.length}`;
          const speaker = speakers[turn.speaker];
          turns.push({ id, session, date, speaker, text: turn.text, memory: `[${date}] ${speaker}: ${turn.text}` });
          if (turn.placed) evidenceIds.set(turn.placed, [...(evidenceIds.get(turn.placed) ?? []), id]);
        }
      }
    }
    const questions = placed.flatMap((p) =>
      p.fact.questions.map((q) => ({
        query: q.text.replaceAll('{N}', speakers[p.owner]),
        kind: q.kind,
        evidence: (q.evidence ?? p.fact.evidence.map((_, i) => i)).map((i) => evidenceIds.get(p)![i]),
      })),
    );
    return { id: `conv-${c}`, half: c < NAMES.length / 2 ? ('tune' as const) : ('test' as const), speakers: [...speakers] as [string, string], turns, questions };
  });
  return {
    description:
      'Generated by bench/eval/conversations/generate.ts (written for this project): multi-session chats between two people, ' +
      'every turn a memory, questions whose evidence is one or several earlier turns. Conversations 0-5 tune, 6-11 are held back.',
    conversations,
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const set = generate();
  await writeFile(join(EVAL_DIR, 'conversations.json'), `${JSON.stringify(set, null, 1)}\n`);
  const turns = set.conversations.reduce((n, c) => n + c.turns.length, 0);
  const questions = set.conversations.reduce((n, c) => n + c.questions.length, 0);
  console.log(`wrote ${set.conversations.length} conversations, ${turns} turns, ${questions} questions`);
}
