import { lexicalTerms } from '../lexical/lexical-terms.js';
import type { RankedHit } from './tenant-search.js';

/**
 * A turn of a conversation stored as a transcript line says who spoke it ("[8 May 2023]
 * Melanie: We went camping…"), and a question about a person is answered by what that person
 * said: on LoCoMo's development set 96% of the evidence of the questions naming one of the two
 * speakers is that speaker's own turns. As a term the name barely counts: it opens half the
 * turns and the other speaker writes it in their replies ("Thanks, Melanie!"), so those
 * replies rank among the named speaker's turns. So when a query names the speaker of one of
 * its hits, the hits spoken by someone it does not name keep OTHER_SPEAKER_SHARE of their
 * score. Memories with no speaker, and queries naming none, keep their scores.
 *
 * Chosen on the tuning halves of LoCoMo and of the synthetic conversations (recall@10 LoCoMo /
 * synthetic, 0.750 / 0.824 before): applied after neighbour lending, 0.4 0.767 / 0.824, 0.55
 * 0.768, 0.6 0.769 / 0.824, 0.7 0.769 / 0.824, 0.8 0.761, 0.9 0.755; at 0.6 recall@5 and MRR
 * are higher than at 0.7 (0.679 / 0.591 against 0.676 / 0.589). Applied before lending
 * instead, the lenders are the named speaker's turns and no longer the other's question
 * whose next turn answers it: 0.741 at 0.7.
 */
export const OTHER_SPEAKER_SHARE = 0.6;

/** "[8 May 2023] Melanie: …", "Melanie: …", "[10:02] John Smith: …": one to three capitalised words before a colon at the start. */
const SPEAKER = /^\s*(?:\[[^\]\n]{1,40}\]\s*)?(\p{Lu}[\p{L}\p{M}'’.-]{0,30}(?: \p{Lu}[\p{L}\p{M}'’.-]{0,30}){0,2}):\s/u;

/** The lexical terms of the speaker a memory's text opens with (empty when it names none). */
export function speakerOf(content: string): string[] {
  const name = speakerName(content);
  return name === undefined ? [] : lexicalTerms(name);
}

function speakerName(content: string): string | undefined {
  return SPEAKER.exec(content)?.[1];
}

const NO_TERMS: readonly string[] = [];

/**
 * The ranking with each hit spoken by someone the query does not name at OTHER_SPEAKER_SHARE
 * of its score, when the query names the speaker of at least one hit; best first (stable).
 * `contentOf`: a hit's stored text.
 */
export function favourNamedSpeakers(ranked: readonly RankedHit[], query: string, contentOf: (id: string) => string): RankedHit[] {
  // A ranking holds few speakers: each name's terms are worked out once.
  const termsOf = new Map<string, string[]>();
  const speakers = ranked.map((hit) => {
    const name = speakerName(contentOf(hit.id));
    if (name === undefined) return NO_TERMS;
    let terms = termsOf.get(name);
    if (terms === undefined) termsOf.set(name, (terms = lexicalTerms(name)));
    return terms;
  });
  if (speakers.every((terms) => terms.length === 0)) return [...ranked];
  const asked = new Set(lexicalTerms(query));
  const named = speakers.map((terms) => terms.some((term) => asked.has(term)));
  if (!named.includes(true)) return [...ranked];
  return ranked
    .map((hit, i) => (speakers[i].length === 0 || named[i] ? hit : { ...hit, fused: hit.fused * OTHER_SPEAKER_SHARE }))
    .sort((x, y) => y.fused - x.fused);
}
