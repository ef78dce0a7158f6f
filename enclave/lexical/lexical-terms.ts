/**
 * Terms for lexical (BM25) retrieval: what a text is matched on by its words rather than its
 * meaning. Unlike the embedding tokenizer, which must map text onto a fixed vocabulary, this
 * keeps every word, number and code the text contains, because the rare ones ("ZX-4471",
 * "88213", "Okafor") are exactly what word vectors cannot tell apart.
 *
 * - Case, accents and compatibility forms are folded ("Café" and "CAFE" match).
 * - A code or compound with inner separators is kept whole and also split into its parts, so
 *   "ZX-4471" matches a query for "zx-4471", "ZX 4471" or "4471", and the whole term scores a
 *   query that writes it the same way higher.
 * - Thousands separators are dropped ("1,450" = "1450"); decimals and versions stay whole
 *   ("15.4", "5.12.0") and are split into parts like other codes.
 * - English stop words and clitics ("'s", "n't") are dropped: they match everything.
 * - Words are reduced to a common form, so a question meets the turn it asks about whatever
 *   the tense or number: irregular forms to their lemma by WordNet's exception lists ("went"
 *   -> "go", "bought" -> "buy", "children" -> "child"), then the Porter2 (Snowball English)
 *   stemmer ("adopted", "adoption" -> "adopt"; "invoices" -> "invoic"). Only words of letters
 *   are reduced: numbers and codes stay whole. Names are reduced like any word, which is
 *   harmless because query and memory go through the same function ("Okafor" stays "okafor").
 */
import stemPorter2 from 'wink-porter2-stemmer';
import nounExceptions from 'wink-lexicon/src/wn-noun-exceptions.js';
import verbExceptions from 'wink-lexicon/src/wn-verb-exceptions.js';
import { foldCaseAndAccents } from '../fold-text.js';


/** Function words that carry no topic; matching on them only adds noise. */
const STOP_WORDS = new Set(
  (
    'a an and are as at be been being but by can could did do does doing done for from had has have having ' +
    'he her hers herself him himself his how i if in into is it its itself just me my myself no nor not of ' +
    'off on once only or our ours ourselves out over own same she should so some such than that the their ' +
    'theirs them themselves then there these they this those through to too under until up very was we were ' +
    'what when where which while who whom why will with would you your yours yourself yourselves ' +
    'about above after again against all am any because before below between both during each few further ' +
    'here more most other s t d ll m re ve don doesn didn isn wasn weren hasn haven hadn won wouldn shouldn ' +
    'couldn let us also get got please tell give'
  ).split(' '),
);

// Letters, digits and combining marks make up words.
const W = '[\\p{L}\\p{M}\\p{N}]';
/** A word, or a code/compound whose parts are joined by - _ . / : @ + # (not at either end). */
const TERM = new RegExp(`${W}+(?:[-_./:@+#]${W}+)*`, 'gu');
const PART = new RegExp(`${W}+`, 'gu');
const CLITIC = /['\u2019](?:s|re|ll|ve|m|d)\b|n['\u2019]t\b/gu;
const THOUSANDS = /(\p{N}),(?=\p{N}{3}(?!\p{N}))/gu;

/** Folds case, accents and compatibility forms; drops clitics and thousands separators. */
export function foldText(text: string): string {
  return foldCaseAndAccents(text).replace(CLITIC, '').replace(THOUSANDS, '$1');
}

/**
 * The form a word is matched by: its WordNet lemma when it is an irregular verb or noun form
 * (about 2,200 verb and 1,900 noun exceptions, 1.5 MB of heap; Porter2 alone cannot map
 * "went" to "go"), then its Porter2 stem. Verb forms win over noun forms ("saw" -> "see"),
 * as questions about conversations are mostly about what someone did. The lists also map
 * some base words ("rent" -> "rend", as a past tense), so the stem is looked up once more:
 * "renting" and "rents" stem to "rent" and must land where "rent" does.
 */
export function stem(word: string): string {
  // No word of a language is this long, and Porter2's expressions cost the square of a word's
  // length (one 30,000-letter word held the event loop for 34-83 s): such a word is matched as
  // it is, cut by the caller, and not remembered.
  if (word.length > MAX_TERM_CHARS) return word;
  const known = stems.get(word);
  if (known !== undefined) return known;
  let form = word;
  if (/^\p{L}+$/u.test(word)) {
    const stemmed = stemPorter2(lemma(word));
    const again = lemma(stemmed);
    form = again === stemmed ? stemmed : stemPorter2(again);
  }
  // Words repeat (every memory and query of every tenant goes through here): remember the
  // recent ones. Bounded, so text made of ever-new words cannot grow it without end.
  if (stems.size >= MAX_REMEMBERED_STEMS) stems.clear();
  stems.set(word, form);
  return form;
}

const MAX_REMEMBERED_STEMS = 65_536;
const stems = new Map<string, string>();

function lemma(word: string): string {
  if (Object.hasOwn(verbExceptions, word)) return verbExceptions[word];
  return Object.hasOwn(nounExceptions, word) ? nounExceptions[word] : word;
}

/** The lexical terms of a text, in order, with repeats (BM25 counts them). */
export function lexicalTerms(text: string): string[] {
  const folded = foldText(text);
  return asciiTerms(folded) ?? unicodeTerms(folded);
}

/**
 * Longest term, in UTF-16 code units: a longer one is cut to its first MAX_TERM_CHARS (on a
 * character boundary), on memories and queries alike. Cut rather than dropped, so a long
 * identifier (a token, a long URL or hash) is still found by a query that writes it out,
 * while no one word costs the dictionary and the postings more than about this much. 64 keeps
 * a SHA-256 in hex whole; a word of English is far shorter.
 */
export const MAX_TERM_CHARS = 64;

function bounded(term: string): string {
  if (term.length <= MAX_TERM_CHARS) return term;
  const code = term.charCodeAt(MAX_TERM_CHARS - 1);
  return term.slice(0, code >= 0xd800 && code <= 0xdbff ? MAX_TERM_CHARS - 1 : MAX_TERM_CHARS);
}

/** A term (TERM) and its parts (PART runs): what the terms of a text are made from. */
function pushTerm(terms: string[], term: string, parts: readonly string[]): void {
  if (parts.length === 1) {
    if (!STOP_WORDS.has(term)) terms.push(bounded(stem(term)));
    return;
  }
  terms.push(bounded(term));
  for (const part of parts) if (!STOP_WORDS.has(part)) terms.push(bounded(stem(part)));
}

/** The terms of folded text by the TERM and PART expressions: any script. */
export function unicodeTerms(folded: string): string[] {
  const terms: string[] = [];
  for (const [term] of folded.matchAll(TERM)) pushTerm(terms, term, term.match(PART)!);
  return terms;
}

/** 1 at the char code of each joiner of TERM (- _ . / : @ + #). */
const JOINER = new Uint8Array(128);
for (const c of '-_./:@+#') JOINER[c.charCodeAt(0)] = 1;
/** ASCII letters and digits: the word characters of TERM within ASCII. */
const isWordChar = (c: number) => (c >= 48 && c <= 57) || (c >= 97 && c <= 122) || (c >= 65 && c <= 90);

/**
 * unicodeTerms for folded text that is all ASCII, by one scan instead of regular expressions
 * (most memories are ASCII; a recovery computes the terms of every memory again, and the
 * expressions were a fifth of it). Undefined at the first character outside ASCII: then the
 * expressions decide. test/unit/lexical.test.ts checks the two agree.
 */
export function asciiTerms(folded: string): string[] | undefined {
  const terms: string[] = [];
  const parts: string[] = [];
  const n = folded.length;
  let i = 0;
  while (i < n) {
    const c = folded.charCodeAt(i);
    if (c > 127) return undefined;
    if (!isWordChar(c)) {
      i++;
      continue;
    }
    // A term: a run of word characters, then as long as a joiner is followed by one, another run.
    const start = i;
    parts.length = 0;
    for (;;) {
      const from = i;
      while (i < n && isWordChar(folded.charCodeAt(i))) i++;
      parts.push(folded.slice(from, i));
      if (i + 1 < n && JOINER[folded.charCodeAt(i)] === 1 && isWordChar(folded.charCodeAt(i + 1))) {
        i++;
        continue;
      }
      break;
    }
    pushTerm(terms, parts.length === 1 ? parts[0] : folded.slice(start, i), parts);
  }
  return terms;
}
