/**
 * The LoCoMo development set (real long conversations; Maharana et al., ACL 2024), read from
 * ../shared/eval/locomo-dev.json beside the repository or LOCOMO_FILE. Its licence forbids
 * copying it into the repository, so it is never committed and the eval says when it is absent.
 *
 * Each turn becomes a memory the way the synthetic set stores one ("[8 May 2023] Caroline: ...",
 * a shared photo's caption appended), with its session's time as `occurred_at` and the session as `run_id`, each question with evidence asks the conversation's
 * tenant. Category 5 (adversarial, no answer) is left out. Conversations alternate between the
 * tuning and the held-back half, so a cut calibrated on one half is checked on the other; the
 * other half of LoCoMo, kept outside this machine, judges the result.
 */
import { access, readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { repoRoot } from '../../common/paths.js';
import type { ConversationSet } from './conversations/generate.js';
import type { ConversationQuestionKind } from './conversations/facts.js';

export const LOCOMO_FILE = process.env.LOCOMO_FILE ?? resolve(repoRoot, '..', 'shared', 'eval', 'locomo-dev.json');

const KINDS: Record<number, ConversationQuestionKind> = { 1: 'multi-hop', 2: 'temporal', 3: 'open-domain', 4: 'single-hop' };

interface LocomoTurn {
  speaker: string;
  dia_id: string;
  text: string;
  blip_caption?: string;
}

interface LocomoSample {
  sample_id: string;
  conversation: Record<string, unknown> & { speaker_a: string; speaker_b: string };
  qa: { question: string; evidence: string[]; category: number }[];
}

/** The set, or undefined when the file is not there. */
export async function loadLocomo(file = LOCOMO_FILE): Promise<ConversationSet | undefined> {
  try {
    await access(file);
  } catch {
    return undefined;
  }
  const samples = JSON.parse(await readFile(file, 'utf8')) as LocomoSample[];
  return {
    description: `LoCoMo development set (${file})`,
    conversations: samples.map((sample, index) => {
      const { conversation } = sample;
      const turns: ConversationSet['conversations'][number]['turns'] = [];
      for (let session = 1; Array.isArray(conversation[`session_${session}`]); session++) {
        const when = String(conversation[`session_${session}_date_time`] ?? '');
        const date = sessionDate(when);
        const occurred_at = sessionTime(when);
        for (const turn of conversation[`session_${session}`] as LocomoTurn[]) {
          const photo = turn.blip_caption ? ` [shares ${turn.blip_caption}]` : '';
          turns.push({ id: turn.dia_id, session, date, speaker: turn.speaker, text: turn.text, memory: `[${date}] ${turn.speaker}: ${turn.text}${photo}`, occurred_at });
        }
      }
      const known = new Set(turns.map((t) => t.id));
      const questions = sample.qa
        .filter((q) => KINDS[q.category] !== undefined)
        .map((q) => ({ query: q.question, kind: KINDS[q.category], evidence: q.evidence.filter((id) => known.has(id)) }))
        .filter((q) => q.evidence.length > 0);
      return {
        id: sample.sample_id,
        half: index % 2 === 0 ? ('tune' as const) : ('test' as const),
        speakers: [conversation.speaker_a, conversation.speaker_b] as [string, string],
        turns,
        questions,
      };
    }),
  };
}

/** "1:56 pm on 8 May, 2023" -> "2023-05-08T13:56:00.000Z" (the session's time, as UTC: LoCoMo gives no zone); undefined if it does not read. */
function sessionTime(text: string): string | undefined {
  const parts = /^(\d{1,2}):(\d{2}) ([ap])m on (\d{1,2} \w+),? (\d{4})$/i.exec(text.trim());
  if (!parts) return undefined;
  const [, hour, minute, half, day, year] = parts;
  const at = new Date(`${day} ${year} UTC`);
  if (Number.isNaN(at.getTime())) return undefined;
  at.setUTCHours((Number(hour) % 12) + (half.toLowerCase() === 'p' ? 12 : 0), Number(minute));
  return at.toISOString();
}

/** "1:56 pm on 8 May, 2023" -> "8 May 2023" (the synthetic set's form). */
function sessionDate(text: string): string {
  const day = /on (\d{1,2} \w+),? (\d{4})/.exec(text);
  return day ? `${day[1]} ${day[2]}` : text;
}
