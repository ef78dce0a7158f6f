import { ApiError } from '../../common/errors.js';
import { limits } from '../../common/limits.js';

/**
 * The model's answers to extraction, read as untrusted input: anything but the exact shape
 * asked for is refused whole (502 model_bad_extraction), so a malformed or hostile answer
 * changes nothing. What a valid answer can do is bounded too: it names memories only by the
 * short ids of those it was shown (the tenant's, in scope), each at most once, and changes
 * (updates and deletes) at most one memory per fact, so a conversation of one fact can touch
 * at most one held memory whatever a memory's text told the model.
 */

/** Facts kept from one conversation. */
export const MAX_FACTS = 20;
/** Longest answer text read from the model in either pass. */
export const MAX_ANSWER_CHARS = 64 * 1024;

export type Decision =
  | { event: 'ADD'; text: string }
  | { event: 'UPDATE'; id: string; text: string }
  | { event: 'DELETE'; id: string }
  | { event: 'NONE'; id: string };

const refuse = (message: string) => new ApiError('model_bad_extraction', `the model's extraction answer was refused, and nothing was changed: ${message}`);

/** The JSON object an answer holds: the whole text, or one ```json fenced block of it (as many models wrap JSON). */
function objectOf(text: string | null | undefined): Record<string, unknown> {
  if (typeof text !== 'string') throw refuse('it has no text');
  if (text.length > MAX_ANSWER_CHARS) throw refuse(`it is longer than ${MAX_ANSWER_CHARS} characters`);
  const fenced = /^\s*```(?:json)?\s*\n([\s\S]*)\n\s*```\s*$/.exec(text);
  let value: unknown;
  try {
    value = JSON.parse(fenced ? fenced[1] : text);
  } catch {
    throw refuse('it is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw refuse('it is not a JSON object');
  return value as Record<string, unknown>;
}

const isText = (value: unknown): value is string => typeof value === 'string' && /\S/.test(value) && value.length <= limits.maxContentChars;

/** The first pass's facts: `{"facts": [text, ...]}`, each a non-blank text a memory may hold, at most MAX_FACTS. */
export function readFacts(text: string | null | undefined): string[] {
  const { facts } = objectOf(text);
  if (!Array.isArray(facts)) throw refuse('"facts" is not a list');
  if (facts.length > MAX_FACTS) throw refuse(`it lists ${facts.length} facts, more than ${MAX_FACTS}`);
  if (!facts.every(isText)) throw refuse(`each fact must be a text of 1 to ${limits.maxContentChars} characters`);
  return facts.map((fact) => fact.trim());
}

/**
 * The second pass's decisions: `{"actions": [...]}`, each ADD with a text, UPDATE with a
 * shown id and a text, DELETE or NONE with a shown id; no id twice; at most one ADD per fact
 * and one UPDATE or DELETE per fact.
 */
export function readDecisions(text: string | null | undefined, shownIds: ReadonlySet<string>, factCount: number): Decision[] {
  const { actions } = objectOf(text);
  if (!Array.isArray(actions)) throw refuse('"actions" is not a list');
  const used = new Set<string>();
  const decisions = actions.map((action: unknown, i): Decision => {
    if (typeof action !== 'object' || action === null || Array.isArray(action)) throw refuse(`actions.${i} is not an object`);
    const { event, id, text: said } = action as Record<string, unknown>;
    if (event === 'ADD') {
      if (!isText(said)) throw refuse(`actions.${i}: an ADD needs a text of 1 to ${limits.maxContentChars} characters`);
      return { event, text: said.trim() };
    }
    if (event !== 'UPDATE' && event !== 'DELETE' && event !== 'NONE') throw refuse(`actions.${i}: event ${JSON.stringify(event)?.slice(0, 40)} is none of ADD, UPDATE, DELETE, NONE`);
    // Only ids it was shown: another tenant's or scope's memory, or one made up, is never one of them.
    if (typeof id !== 'string' || !shownIds.has(id)) throw refuse(`actions.${i}: id ${JSON.stringify(id)?.slice(0, 60)} is not one of the memories it was shown`);
    if (used.has(id)) throw refuse(`actions.${i}: id ${id} is named twice`);
    used.add(id);
    if (event !== 'UPDATE') return { event, id };
    if (!isText(said)) throw refuse(`actions.${i}: an UPDATE needs a text of 1 to ${limits.maxContentChars} characters`);
    return { event, id, text: said.trim() };
  });
  const count = (events: string[]) => decisions.filter((d) => events.includes(d.event)).length;
  if (count(['ADD']) > factCount) throw refuse(`it adds ${count(['ADD'])} memories from ${factCount} facts`);
  if (count(['UPDATE', 'DELETE']) > factCount) throw refuse(`it changes ${count(['UPDATE', 'DELETE'])} memories from ${factCount} facts (at most one per fact)`);
  return decisions;
}
