import { describe, expect, it } from 'vitest';
import { subwordBuckets } from '../../enclave/embedding/subwords.js';
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

  const ids = (text: string, max: number) => encode(text, vocab, max).ids;

  it('maps known tokens to ids, with scale 1, and skips unknown ones', () => {
    expect(encode("My dog don't bark!", vocab, 10)).toEqual({ ids: [1, 2, 6, 5], scales: [1, 1, 1, 1] });
    expect(ids('zzz qqq 42', 10)).toEqual([]);
  });

  it('never yields the padding id', () => {
    expect(ids('<pad> pad', 10)).toEqual([]);
  });

  it('splits an unknown compound into its parts, but not a known one', () => {
    expect(ids('dog-friendly well-known', 10)).toEqual([2, 4, 3]);
  });

  it('stops at maxTokens known tokens', () => {
    expect(ids('my unknown dog my dog', 3)).toEqual([1, 2, 1]);
    expect(ids('dog-friendly', 1)).toEqual([2]);
    expect(ids('my dog', 0)).toEqual([]);
  });

  describe('with subword buckets', () => {
    const subwords = { offset: 7, buckets: 1000, minN: 3, maxN: 5 };

    it('turns an unknown word into its bucket ids, sharing one weight between them', () => {
      const buckets = subwordBuckets('dogsitter', subwords);
      const { ids: got, scales } = encode('my dogsitter', vocab, 100, subwords);
      expect(got).toEqual([1, ...buckets.map((b) => 7 + b)]);
      expect(scales[0]).toBe(1);
      expect(scales.slice(1)).toEqual(buckets.map(() => 1 / buckets.length));
      expect(scales.slice(1).reduce((sum, x) => sum + x, 0)).toBeCloseTo(1, 10);
    });

    it('gives unknown parts of a compound their own buckets, and none to numbers, codes or punctuation', () => {
      const { ids: got } = encode('dog-walker 88213 ZX-4471 p99 ?!', vocab, 100, subwords);
      expect(got).toEqual([2, ...subwordBuckets('walker', subwords).map((b) => 7 + b)]);
    });

    it('never splits a word across the maxTokens cap', () => {
      const n = subwordBuckets('dogsitter', subwords).length;
      expect(encode('my dogsitter', vocab, n, subwords).ids).toEqual([1]);
      expect(encode('my dogsitter', vocab, n + 1, subwords).ids).toHaveLength(n + 1);
    });
  });
});

describe('ordinals', () => {
  it('spells out day-of-month ordinals as the vocabulary writes them', () => {
    expect(tokenize('the 1st, 2nd, 3rd, 12th, 21st, 25th, 30th and 31st')).toEqual([
      'the', 'first', ',', 'second', ',', 'third', ',', 'twelfth', ',', 'twenty-first', ',',
      'twenty-fifth', ',', 'thirtieth', 'and', 'thirty-first',
    ]);
  });

  it('leaves other numbers with suffixes alone', () => {
    expect(tokenize('40th 0th 100k 5g')).toEqual(['40th', '0th', '100k', '5g']);
  });
});
