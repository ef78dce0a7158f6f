import { describe, expect, it } from 'vitest';
import { encode, tokenize, vocabularyFromList } from '../../enclave/embedding/tokenizer.js';

describe('tokenize', () => {
  it('expands contractions into words the vocabulary has', () => {
    expect(tokenize("Don't")).toEqual(['do', 'not']);
    expect(tokenize("can't won't shan't ain't")).toEqual(['can', 'not', 'will', 'not', 'shall', 'not', 'is', 'not']);
    expect(tokenize("we're I'll they've I'm she'd")).toEqual(['we', 'are', 'i', 'will', 'they', 'have', 'i', 'am', 'she', 'would']);
    expect(tokenize("let's")).toEqual(['let', 'us']);
  });

  it("reads 's as 'is' after pronouns and as a possessive otherwise", () => {
    expect(tokenize("it's what's")).toEqual(['it', 'is', 'what', 'is']);
    expect(tokenize("What is my pet's name?")).toEqual(['what', 'is', 'my', 'pet', 'name', '?']);
  });

  it('accepts typographic apostrophes', () => {
    expect(tokenize('It’s my mother’s')).toEqual(['it', 'is', 'my', 'mother']);
  });

  it('leaves apostrophes that are not clitics as punctuation', () => {
    expect(tokenize("o'neil 'quoted'")).toEqual(['o', "'", 'neil', "'", 'quoted', "'"]);
  });

  it('splits punctuation into single characters', () => {
    expect(tokenize('Hello, world! (yes) "no"...')).toEqual([
      'hello', ',', 'world', '!', '(', 'yes', ')', '"', 'no', '"', '.', '.', '.',
    ]);
    expect(tokenize('bob@example.com')).toEqual(['bob', '@', 'example', '.', 'com']);
  });

  it('keeps hyphenated compounds whole', () => {
    expect(tokenize('a well-known e-mail, dash - here')).toEqual(['a', 'well-known', 'e-mail', ',', 'dash', '-', 'here']);
  });

  it('keeps numbers whole, but not a sentence-final period', () => {
    expect(tokenize('1,000 people paid 3.5 in 2024.')).toEqual(['1,000', 'people', 'paid', '3.5', 'in', '2024', '.']);
    expect(tokenize('$3.50 at 3:30 on 9/11 in the 1990s')).toEqual(['$', '3.50', 'at', '3:30', 'on', '9/11', 'in', 'the', '1990s']);
  });

  it('lowercases', () => {
    expect(tokenize('HELLO World')).toEqual(['hello', 'world']);
  });

  it('folds Unicode onto the ASCII vocabulary but keeps other scripts intact', () => {
    expect(tokenize('Café naïve ＦＵＬＬ ﬁne İstanbul')).toEqual(['cafe', 'naive', 'full', 'fine', 'istanbul']);
    expect(tokenize('“quoted”')).toEqual(['"', 'quoted', '"']);
    expect(tokenize('北京 हिन्दी')).toEqual(['北京', 'हिन्दी']);
  });

  it('gives nothing for empty or blank text', () => {
    expect(tokenize('')).toEqual([]);
    expect(tokenize(' \n\t ')).toEqual([]);
  });
});

describe('encode', () => {
  const vocab = vocabularyFromList(['<pad>', 'my', 'dog', 'well-known', 'friendly', 'not', 'do']);

  it('maps known tokens to ids and skips unknown ones', () => {
    expect(encode("My dog don't bark!", vocab, 10)).toEqual([1, 2, 6, 5]);
    expect(encode('zzz qqq 42', vocab, 10)).toEqual([]);
  });

  it('never yields the padding id', () => {
    expect(encode('<pad> pad', vocab, 10)).toEqual([]);
  });

  it('splits an unknown compound into its parts, but not a known one', () => {
    expect(encode('dog-friendly well-known', vocab, 10)).toEqual([2, 4, 3]);
  });

  it('stops at maxTokens known tokens', () => {
    expect(encode('my unknown dog my dog', vocab, 3)).toEqual([1, 2, 1]);
    expect(encode('dog-friendly', vocab, 1)).toEqual([2]);
    expect(encode('my dog', vocab, 0)).toEqual([]);
  });
});
