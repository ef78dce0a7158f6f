import { dot } from '../vectors/vector-index.js';
import type { TenantMemories } from './tenant-memories.js';
import type { ChangesInFlight } from './in-flight.js';
import { SCOPE_FIELDS, type MemoryRecord, type MemoryScope } from './types.js';

/**
 * The cosine similarity from which an added memory is taken for a restatement of one already
 * held in its tenant and scope, and updates it rather than being stored beside it. Measured by
 * bench/eval/dedupe-threshold.ts (static model): at 0.96, 1 of LoCoMo's 2,755 development
 * turns as bare text would merge into an earlier turn of its conversation (none stored with
 * their dates), against 2 at 0.95 and 19 at 0.90; a distinct fact pair ("dairy-free chocolate
 * raspberry tart" / "dairy-free chocolate cake with raspberries") is at 0.958. Table:
 * docs/retrieval.md#near-duplicates.
 */
export const DEDUPE_THRESHOLD = 0.96;

/** How many of a tenant's nearest memories an add is compared with (other scopes' copies may come first). */
const NEAREST = 16;

/** An add that would update `id` (a held memory, or one added earlier in the same batch). */
export interface DuplicateOf {
  id: string;
  similarity: number;
}

export interface NewMemory {
  /** The id it gets if it is added. */
  id: string;
  content: string;
  tenant_id: string;
  scope: MemoryScope;
  vector: Float32Array;
  /** False: stored as it is, whatever it resembles. */
  dedupe: boolean;
}

const sameScope = (a: MemoryScope, b: MemoryScope): boolean => SCOPE_FIELDS.every((field) => a[field] === b[field]);

const NUMBER_WORDS = new Set(
  'zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million billion first second third fourth fifth sixth seventh eighth ninth tenth'.split(' '),
);

/**
 * What a text states that embeddings barely tell apart, in order: numbers (in digits or
 * words), single letters and names (capitalised words inside a sentence). The static model's
 * cosine of "invoice 88213" and "invoice 88214", of "wipe me one" and "wipe me two", of "gone x"
 * and "gone y" is above 0.99, and it sees words without their order ("Alice owes Bob" is
 * "Bob owes Alice"), so two texts restate each other only if they state the same of these in
 * the same order ("a" and "I" are words, not letters).
 */
export function literalsOf(text: string): string {
  const literals: string[] = [];
  let sentenceStart = true;
  for (const [token] of text.matchAll(/\d+(?:[.,]\d+)*|\p{L}+|[.!?]/gu)) {
    if (token === '.' || token === '!' || token === '?') {
      sentenceStart = true;
      continue;
    }
    const word = token.toLowerCase();
    const name = !sentenceStart && word !== 'i' && token[0] !== word[0];
    if (/\d/.test(word) || (word.length === 1 && word !== 'a' && word !== 'i') || NUMBER_WORDS.has(word) || name) literals.push(word);
    sentenceStart = false;
  }
  return literals.join(' ');
}

/**
 * For each new memory, the memory it restates (cosine >= threshold, same tenant, exactly the
 * same scopes, the same literals), if any: the nearest such among the tenant's memories and
 * the batch's earlier items. An earlier item that is itself an update points on to the memory it updates.
 * With `inFlight`: a memory whose delete is under way is not restated, and an unapplied memory
 * with exactly the item's text is (memory/in-flight.ts says why).
 *
 * The cheap tests go first: a pair's cosine (one dot product) before its scopes and literals,
 * and each text's literals are worked out once, only for a pair already close enough. Taken
 * the other way round, a batch of 100 worked out literals for each of its 4,950 pairs, and for
 * each item whether or not anything was near: a third of a batch ingest's enclave CPU
 * (docs/performance-log.md#dedupe-on-batch-ingest-2026-11-27).
 */
export function findDuplicates(
  items: readonly NewMemory[],
  tenant: (id: string) => TenantMemories | undefined,
  inFlight?: Pick<ChangesInFlight, 'deleting' | 'withContent'>,
  threshold = DEDUPE_THRESHOLD,
): (DuplicateOf | undefined)[] {
  const known = new Map<string, string>();
  const literals = (text: string): string => {
    let found = known.get(text);
    if (found === undefined) known.set(text, found = literalsOf(text));
    return found;
  };
  const found: (DuplicateOf | undefined)[] = [];
  items.forEach((item, i) => {
    if (!item.dedupe) {
      found.push(undefined);
      return;
    }
    let best: DuplicateOf | undefined;
    const restates = (content: string, scope: MemoryScope): boolean => sameScope(scope, item.scope) && literals(content) === literals(item.content);
    const held = tenant(item.tenant_id);
    if (held && held.size > 0) {
      // The nearest few by vector, unfiltered, then the checks on those only: a filter in the
      // search would be tried on most of a large tenant (each a literalsOf), making every add
      // scan it. A restatement that is not among the NEAREST closest is stored beside.
      for (const hit of held.index.searchAbove(item.vector, NEAREST, threshold)) {
        const record: MemoryRecord | undefined = held.records.get(hit.id);
        if (record !== undefined && hit.score > (best?.similarity ?? -1) && !inFlight?.deleting(item.tenant_id, hit.id) && restates(record.content, record)) {
          best = { id: hit.id, similarity: hit.score };
        }
      }
    }
    for (const unapplied of inFlight?.withContent(item.tenant_id, item.content) ?? []) {
      const similarity = dot(item.vector, unapplied.vector);
      if (similarity >= threshold && similarity > (best?.similarity ?? -1) && sameScope(unapplied.record, item.scope)) best = { id: unapplied.record.id, similarity };
    }
    for (let j = 0; j < i; j++) {
      const earlier = items[j];
      if (earlier.tenant_id !== item.tenant_id) continue;
      const similarity = dot(item.vector, earlier.vector);
      if (similarity >= threshold && similarity > (best?.similarity ?? -1) && restates(earlier.content, earlier.scope)) best = { id: found[j]?.id ?? earlier.id, similarity };
    }
    found.push(best);
  });
  return found;
}
