import { describe, expect, it } from 'vitest';
import { charNgrams, fnv1a, subwordBuckets, wantsSubwords } from '../../enclave/embedding/subwords.js';
import { buildSubwordVectors } from '../../scripts/lib/subword-fit.js';

describe('fnv1a', () => {
  it('matches the published FNV-1a 32-bit test vectors', () => {
    expect(fnv1a('')).toBe(0x811c9dc5);
    expect(fnv1a('a')).toBe(0xe40c292c);
    expect(fnv1a('foobar')).toBe(0xbf9cf968);
  });
});

describe('charNgrams and subwordBuckets', () => {
  it('takes n-grams of the word wrapped in < and >', () => {
    expect(charNgrams('dog', 3, 4)).toEqual(['<do', 'dog', 'og>', '<dog', 'dog>']);
    expect(charNgrams('naïve', 6, 6)).toEqual(['<naïve', 'naïve>']); // code points, not bytes
  });

  it('gives distinct bucket ids within range, the same for the same word', () => {
    const config = { buckets: 97, minN: 3, maxN: 5 };
    const buckets = subwordBuckets('dogsitter', config);
    expect(new Set(buckets).size).toBe(buckets.length);
    expect(buckets.every((b) => Number.isInteger(b) && b >= 0 && b < 97)).toBe(true);
    expect(subwordBuckets('dogsitter', config)).toEqual(buckets);
  });

  it('wants subwords for words of letters only', () => {
    expect(['dogsitter', 'keybord', 'naïve', "o'neil", 'e-mail'].map(wantsSubwords)).toEqual([true, true, true, true, true]);
    expect(['88213', 'zx-4471', 'p99', 'ab', '?', '1st'].map(wantsSubwords)).toEqual([false, false, false, false, false, false]);
  });
});

describe('buildSubwordVectors', () => {
  // Words sharing "dog" n-grams point one way, words sharing "cat" n-grams the other.
  const words = ['dogs', 'doggy', 'cats', 'catty'];
  const dimension = 2;
  const vectors = Float32Array.from([0, 0, 1, 0, 1, 0.1, 0, 1, 0.1, 1]);
  const config = { buckets: 4099, minN: 3, maxN: 4 };
  const predict = (table: Float32Array, word: string) => {
    const buckets = subwordBuckets(word, config);
    const v = [0, 0];
    for (const b of buckets) for (let d = 0; d < dimension; d++) v[d] += table[b * dimension + d] / buckets.length;
    return v;
  };
  const error = (table: Float32Array) =>
    words.reduce((sum, word, i) => {
      const p = predict(table, word);
      return sum + (p[0] - vectors[(i + 1) * 2]) ** 2 + (p[1] - vectors[(i + 1) * 2 + 1]) ** 2;
    }, 0);

  it('starts each bucket at the mean vector of the words that reach it; unreached buckets stay zero', () => {
    const table = buildSubwordVectors(vectors, words, dimension, config, 0);
    const [dogBucket] = subwordBuckets('dog', { ...config, minN: 3, maxN: 3 }).filter((b) =>
      subwordBuckets('dogs', config).includes(b) && subwordBuckets('doggy', config).includes(b),
    );
    expect(Array.from(table.subarray(dogBucket * 2, dogBucket * 2 + 2))).toEqual([1, Math.fround(0.05)]);
    const reached = new Set(words.flatMap((w) => subwordBuckets(w, config)));
    const unreached = [...Array(config.buckets).keys()].find((b) => !reached.has(b))!;
    expect(Array.from(table.subarray(unreached * 2, unreached * 2 + 2))).toEqual([0, 0]);
  });

  it('fits the words better with least-squares passes, and predicts an unseen word from its n-grams', () => {
    const means = buildSubwordVectors(vectors, words, dimension, config, 0);
    const fitted = buildSubwordVectors(vectors, words, dimension, config, 3);
    expect(error(fitted)).toBeLessThan(error(means));
    const [x, y] = predict(fitted, 'dogsitter');
    expect(x).toBeGreaterThan(Math.abs(y)); // points the "dog" way
  });
});
