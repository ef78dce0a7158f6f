/**
 * Subword vectors for words outside the vocabulary, fastText-style (Bojanowski et al. 2017,
 * "Enriching word vectors with subword information"): a word is the set of its character
 * n-grams, with "<" and ">" marking its ends ("dogsitter" -> "<do", "dog", ..., "er>"), and
 * each n-gram is hashed (FNV-1a, as fastText) into one of a fixed number of buckets.
 *
 * fastText trains bucket vectors with the word vectors; here the word vectors are given, so
 * bucket vectors are fitted to them at build time (scripts/lib/subword-fit.ts): start from the
 * mean vector of the in-vocabulary words whose n-grams fall in the bucket, then a few passes of least squares
 * (each word's vector should equal the mean of its buckets' vectors). An unknown word then
 * gets the mean of its buckets' vectors: "dogsitter" lands near "dog" and "sitter",
 * "webhooks" near "web" and "hooks", a misspelt "keybord" near "keyboard".
 *
 * The bucket vectors are extra rows of the model's table (after the words); the tokenizer
 * emits a word's bucket ids, each scaled by 1 / (number of buckets), so the graph's weighted
 * sum adds the word's mean bucket vector, times the OOV weight, like any other word.
 */

export interface SubwordConfig {
  /** Number of hash buckets (extra table rows). */
  buckets: number;
  /** Shortest and longest n-gram, in characters, counting the "<" and ">" markers. */
  minN: number;
  maxN: number;
}

export const DEFAULT_SUBWORDS: SubwordConfig = { buckets: 100_000, minN: 3, maxN: 5 };

/** FNV-1a (32-bit) of the UTF-8 bytes, the hash fastText uses for n-grams. */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** The character n-grams of `<word>` from minN to maxN code points long. */
export function charNgrams(word: string, minN: number, maxN: number): string[] {
  const chars = [...`<${word}>`];
  const grams: string[] = [];
  for (let n = minN; n <= maxN; n++) {
    for (let i = 0; i + n <= chars.length; i++) grams.push(chars.slice(i, i + n).join(''));
  }
  return grams;
}

/** Distinct buckets (0-based) of a word's n-grams, in first-seen order. */
export function subwordBuckets(word: string, config: SubwordConfig): number[] {
  return [...new Set(charNgrams(word, config.minN, config.maxN).map((gram) => fnv1a(gram) % config.buckets))];
}

/**
 * Whether an unknown token gets a subword vector: words of letters (3+ characters). Numbers
 * and codes ("88213", "ZX-4471", "p99") do not: their n-grams mean nothing, and the lexical
 * ranking finds them exactly.
 */
export function wantsSubwords(token: string): boolean {
  return token.length >= 3 && /^[\p{L}\p{M}'-]+$/u.test(token);
}
