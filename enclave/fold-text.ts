/** Any character outside ASCII (a surrogate half included). */
const NON_ASCII = /[\u0080-\uffff]/;

// Accents on Latin letters; marks in other scripts are part of the letter (Devanagari virama).
const LATIN_ACCENTS = /(\p{Script=Latin})\p{Mn}+/gu;

/** True when every character of `text` is ASCII. */
const isAscii = (text: string): boolean => !NON_ASCII.test(text);

/**
 * Compatibility forms (full-width letters, ligatures) to plain ones, lowercase, and accents
 * dropped from Latin letters ("Café" -> "cafe"): the fold both the embedding tokenizer and
 * the lexical terms start from. ASCII has no compatibility forms or marks, so it is only
 * lowercased (most texts are ASCII; NFKD and the accent pass cost a fifth of a tokenization).
 */
export function foldCaseAndAccents(text: string): string {
  return isAscii(text) ? text.toLowerCase() : text.normalize('NFKD').toLowerCase().replace(LATIN_ACCENTS, '$1');
}
