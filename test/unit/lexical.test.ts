import { describe, expect, it } from 'vitest';
import { Bm25Index, MAX_QUERY_TERMS } from '../../enclave/lexical/bm25.js';
import type { SearchCost } from '../../enclave/lexical/lexical-index.js';
import { SmallBm25 } from '../../enclave/lexical/small-bm25.js';
import { TieredLexical } from '../../enclave/lexical/tiered-lexical.js';
import { TermDictionary } from '../../enclave/lexical/term-dictionary.js';
import { asciiTerms, foldText, lexicalTerms, MAX_TERM_CHARS, stem, unicodeTerms } from '../../enclave/lexical/lexical-terms.js';
import { memoryText, questionText } from '../../bench/corpus.js';
import { mulberry32 } from '../../scripts/lib/mulberry32.js';

describe('lexicalTerms', () => {
  it('keeps codes whole and also as their parts', () => {
    expect(lexicalTerms('Ticket ZX-4471')).toEqual(['ticket', 'zx-4471', 'zx', '4471']);
    expect(lexicalTerms('db-prod-01 runs 15.4')).toEqual(['db-prod-01', 'db', 'prod', '01', 'run', '15.4', '15', '4']);
    expect(lexicalTerms('api.example.com orders_daily')).toEqual(['api.example.com', 'api', 'exampl', 'com', 'orders_daily', 'order', 'daili']);
  });

  it('drops stop words and clitics, folds case and accents', () => {
    expect(lexicalTerms("What's Maria's dentist's phone? It doesn't matter.")).toEqual(['maria', 'dentist', 'phone', 'matter']);
    expect(lexicalTerms('Café LUCÍA')).toEqual(['cafe', 'lucia']);
  });

  it('drops thousands separators so "1,450" matches "1450"', () => {
    expect(foldText('1,450 and 31,400,000 but 3,5')).toBe('1450 and 31400000 but 3,5');
    expect(lexicalTerms('rent of 1,450 euros')).toEqual([stem('rent'), '1450', 'euro']);
  });

  it('gives every form of a word one term: inflections, irregular forms, derived nouns', () => {
    const same = [
      ['went', 'go', 'going', 'goes'], ['bought', 'buy', 'buying'], ['ran', 'run', 'running', 'runs'], ['saw', 'see', 'seeing'],
      ['adopted', 'adopt', 'adoption'], ['invoices', 'invoice'], ['batteries', 'battery'], ['children', 'child'],
      ['hiked', 'hiking', 'hike'], ['promoted', 'promotion'], ['left', 'leave', 'leaving'], ['rent', 'rents', 'renting'],
    ];
    for (const forms of same) expect(forms.map(stem), forms.join(' / ')).toEqual(forms.map(() => stem(forms[0])));
  });

  it('keeps apart words that only look alike, and leaves numbers and codes whole', () => {
    expect(stem('class')).not.toBe(stem('clash'));
    expect(stem('bus')).not.toBe(stem('busy'));
    expect(stem('news')).not.toBe(stem('new'));
    expect(['4471', '15.4', 'zx-4471', 'p99'].map(stem)).toEqual(['4471', '15.4', 'zx-4471', 'p99']);
  });

  it('cuts a term longer than MAX_TERM_CHARS to its first MAX_TERM_CHARS, on a character boundary, so it still matches itself', () => {
    const long = `k${'7'.repeat(99)}`;
    expect(lexicalTerms(`token ${long}`)).toEqual(['token', long.slice(0, MAX_TERM_CHARS)]);
    expect(lexicalTerms(`${'a'.repeat(40)}-${'b'.repeat(40)}`)).toEqual([`${'a'.repeat(40)}-${'b'.repeat(23)}`, 'a'.repeat(40), 'b'.repeat(40)]);
    const astral = `${'x'.repeat(MAX_TERM_CHARS - 1)}\u{20000}yz`; // a 2-unit letter straddling the cut
    expect(lexicalTerms(astral)).toEqual(['x'.repeat(MAX_TERM_CHARS - 1)]);
    const bm25 = new Bm25Index();
    bm25.add('a', `see ${long}`);
    expect(bm25.search(long, 1).map((h) => h.id)).toEqual(['a']);
  });

  it('leaves a word longer than MAX_TERM_CHARS unstemmed (Porter2 costs the square of its length), and still finds it', () => {
    const long = `${'z'.repeat(MAX_TERM_CHARS)}ing`;
    expect(stem(long)).toBe(long);
    expect(stem('running')).toBe('run');
    const huge = 'q'.repeat(30_000);
    expect(lexicalTerms(`a ${huge} word`)).toEqual([huge.slice(0, MAX_TERM_CHARS), 'word']);
    const bm25 = new Bm25Index();
    bm25.add('h', `see ${huge}`);
    expect(bm25.search(huge, 1).map((h) => h.id)).toEqual(['h']);
  });

  it('gives nothing for text of only stop words or punctuation', () => {
    expect(lexicalTerms('what is the? -- !!')).toEqual([]);
  });
});

const A = 'Ticket ZX-4471: payment webhook retries duplicate charges.';

describe('lexicalTerms on ASCII text: one scan, the same terms as the expressions', () => {
  const agree = (text: string) => {
    const folded = foldText(text);
    expect(asciiTerms(folded), JSON.stringify(text)).toEqual(unicodeTerms(folded));
  };

  it('on the benchmark corpus', () => {
    for (let i = 0; i < 3_000; i++) {
      agree(memoryText(i));
      agree(questionText(i));
    }
  });

  it('on random ASCII made of word characters, joiners, punctuation, clitics and digit groups', () => {
    const random = mulberry32(4471);
    const pieces = ['a', 'Zx', '4471', '15', '0', "'s", "n't", "'re", ',', ',000', '1,450', '-', '--', '_', '.', '..', '/', ':', '@', '+', '#', ' ', '  ', '\t', '\n', '!', '?', '(', ')', '"', 'the', 'and', 'running', 'went', 'ZX-4471', 'db-prod-01', '5.12.0', 'user@example.com', 'C++', '__init__'];
    for (let i = 0; i < 5_000; i++) {
      const length = 1 + Math.floor(random() * 24);
      agree(Array.from({ length }, () => pieces[Math.floor(random() * pieces.length)]).join(''));
    }
  });

  it('leaves text with any other character to the expressions', () => {
    expect(asciiTerms(foldText('Straße in Tōkyō 東京'))).toBeUndefined();
    expect(asciiTerms('plain words then ü')).toBeUndefined();
    expect(lexicalTerms('Café ZÜRICH naïve')).toEqual(lexicalTerms('cafe zurich naive'));
    expect(asciiTerms('')).toEqual([]);
  });
});

describe('Bm25Index', () => {
  const index = () => {
    const bm25 = new Bm25Index();
    bm25.add('a', A);
    bm25.add('b', 'Ticket ZX-4417: dark mode toggle does not persist.');
    bm25.add('c', 'Invoice 88213 from Hetzner was settled on 15 August.');
    bm25.add('d', 'Invoice 88231 from Cloudflare is still unpaid.');
    bm25.add('e', 'The team meets on Tuesdays.');
    return bm25;
  };

  it('ranks the memory with the rare token first', () => {
    expect(index().search('ZX-4471', 5).map((h) => h.id)).toEqual(['a', 'b']);
    expect(index().search('was invoice 88213 settled', 5).map((h) => h.id)).toEqual(['c', 'd']);
    expect(index().search('4471', 5).map((h) => h.id)).toEqual(['a']);
  });

  it('reports the query\'s ideal score, the sum of its terms\' IDF (df 0 for absent terms), alike in both tiers', () => {
    const small = new SmallBm25();
    for (const [id, text] of [['a', A], ['b', 'Ticket ZX-4417: dark mode toggle does not persist.'], ['c', 'Invoice 88213 from Hetzner was settled on 15 August.'],
      ['d', 'Invoice 88231 from Cloudflare is still unpaid.'], ['e', 'The team meets on Tuesdays.']]) small.add(id, text);
    const idf = (df: number) => Math.log(1 + (5 - df + 0.5) / (df + 0.5));
    // "invoice" in 2 of 5 memories, "88213" in 1, "zebra" in none (and unknown to the dictionary).
    const expected = idf(2) + idf(1) + idf(0);
    for (const lexical of [index(), small]) {
      const cost: SearchCost = { terms: 0, postingsRead: 0, postingsHeld: 0 };
      lexical.search('was the invoice 88213 a zebra', 5, cost);
      expect(cost.idealScore).toBeCloseTo(expected, 12);
      const none: SearchCost = { terms: 0, postingsRead: 0, postingsHeld: 0 };
      expect(lexical.search('zebra', 5, none)).toEqual([]);
      expect(none.idealScore).toBeCloseTo(idf(0), 12);
    }
  });

  it('scores by BM25: rarer terms weigh more, and scores are positive', () => {
    const [first, second] = index().search('invoice 88213', 5);
    expect(first.id).toBe('c');
    expect(first.score).toBeGreaterThan(2 * second.score); // "88213" is in one memory, "invoice" in two
    expect(second.score).toBeGreaterThan(0);
  });

  it('computes the textbook BM25 value', () => {
    const bm25 = new Bm25Index();
    bm25.add('x', 'apple banana'); // 2 terms
    bm25.add('y', 'cherry cherry date fig'); // 4 terms; average length 3
    const [hit] = bm25.search('apple', 1);
    const idf = Math.log(1 + (2 - 1 + 0.5) / (1 + 0.5));
    const expected = (idf * 1 * 2.2) / (1 + 1.2 * (1 - 0.3 + (0.3 * 2) / 3));
    expect(hit.score).toBeCloseTo(expected, 10);
  });

  it('forgets a removed memory at once, and a re-added one matches again', () => {
    const bm25 = index();
    bm25.remove('a', A);
    expect(bm25.search('ZX-4471', 5).map((h) => h.id)).toEqual(['b']);
    expect(bm25.size).toBe(4);
    bm25.remove('a', A); // removing twice is harmless
    bm25.add('a', 'Ticket ZX-4471 reopened');
    expect(bm25.search('ZX-4471', 5)[0].id).toBe('a');
  });

  it('returns nothing for an empty index, k = 0, or a query with no known term', () => {
    expect(new Bm25Index().search('anything', 5)).toEqual([]);
    expect(index().search('ZX-4471', 0)).toEqual([]);
    expect(index().search('the what', 5)).toEqual([]);
    expect(index().search('zebra', 5)).toEqual([]);
  });

  it('breaks ties by insertion order and honours k', () => {
    const bm25 = new Bm25Index();
    for (const id of ['z', 'y', 'x']) bm25.add(id, 'same words here');
    expect(bm25.search('words', 2).map((h) => h.id)).toEqual(['z', 'y']);
  });
});


describe('Bm25Index.searchKeyed (the search worker names memories by their labels)', () => {
  it('gives searchWith\'s hits and scores to the bit, through churn that reuses keys and compactions', () => {
    const random = mulberry32(11);
    const bm25 = new Bm25Index();
    const texts = new Map<string, string>();
    const keyOf = new Map<string, number>();
    const idOf = new Map<number, string>();
    const freeKeys: number[] = [];
    let nextKey = 0;
    let added = 0;
    const add = () => {
      const id = `m${added}`;
      const text = memoryText(added++);
      // Every seventh memory has no key (a zero vector: no label in the graph).
      const key = added % 7 === 0 ? -1 : freeKeys.pop() ?? nextKey++;
      bm25.add(id, text, key);
      texts.set(id, text);
      if (key >= 0) {
        keyOf.set(id, key);
        idOf.set(key, id);
      }
    };
    const remove = (id: string) => {
      bm25.remove(id, texts.get(id)!);
      texts.delete(id);
      const key = keyOf.get(id);
      if (key === undefined) return;
      keyOf.delete(id);
      idOf.delete(key);
      freeKeys.push(key);
    };
    const check = (round: string) => {
      const live = [...idOf.keys()];
      for (let q = 0; q < 20; q++) {
        const query = questionText(q * 13 + round.length);
        // Keys of live memories, a freed key and one never given.
        const keys = [...Array.from({ length: 30 }, () => live[Math.floor(random() * live.length)]), ...freeKeys.slice(0, 1), nextKey + 5];
        const ids = keys.map((key) => idOf.get(key) ?? 'none');
        const keyed = bm25.searchKeyed(query, 30, keys);
        const plain = bm25.searchWith(query, 30, ids);
        expect(keyed.hits.map(({ id, score }) => ({ id, score })), `${round}: ${query}`).toEqual(plain.hits);
        expect(keyed.hits.map((h) => h.key)).toEqual(plain.hits.map((h) => keyOf.get(h.id) ?? -1));
        expect([...keyed.askedScores]).toEqual([...plain.askedScores]);
      }
    };
    for (let i = 0; i < 3000; i++) add();
    check('added');
    // More removals than live memories past 1,024: compactions renumber the documents.
    for (const id of [...texts.keys()]) if (random() < 0.8) remove(id);
    for (let i = 0; i < 800; i++) add();
    check('after churn');
    for (const id of [...texts.keys()].slice(0, 1500)) remove(id);
    check('after compaction');
  });
});

describe('a hostile query cannot make a search walk the tenant (issue: one query blocks the enclave)', () => {
  it('a 4,096-character question of hundreds of words against 20,000 matching memories reads a small part of the postings', () => {
    const bm25 = new Bm25Index();
    const vocabulary = Array.from({ length: 600 }, (_, i) => `word${i}`);
    // Every memory holds many of the same common words, so nearly every one matches.
    for (let i = 0; i < 20_000; i++) bm25.add(`m${i}`, Array.from({ length: 12 }, (_, j) => vocabulary[(i * 7 + j * 13) % 600]).join(' '));
    const hostile = vocabulary.join(' ').slice(0, 4096);
    const cost = { terms: 0, postingsRead: 0, postingsHeld: 0 };
    const hits = bm25.search(hostile, 100, cost);
    expect(hits).toHaveLength(100);
    expect(new Set(hostile.split(' ')).size).toBeGreaterThan(500);
    expect(cost.terms).toBe(MAX_QUERY_TERMS);
    // Exhaustive BM25 would read every posting of every query term: 240,000 here.
    expect(cost.postingsRead).toBeLessThan(240_000 / 10);
  });

  it('memories tied at the cut: the older ones win, and block bounds skip the rest without reading it', () => {
    const bm25 = new Bm25Index();
    // One template with two common words: every memory scores the same for them (a synthetic
    // corpus, or a bot's repeated messages), the numbers only vary the words nobody asks for.
    for (let i = 0; i < 20_000; i++) bm25.add(`m${i}`, `the budget for the trip is ${1000 + i}`);
    const cost = { terms: 0, postingsRead: 0, postingsHeld: 0 };
    const hits = bm25.search('what is the budget for the trip', 30, cost);
    expect(hits.map((h) => h.id)).toEqual(Array.from({ length: 30 }, (_, i) => `m${i}`));
    expect(new Set(hits.map((h) => h.score)).size).toBe(1);
    expect(cost.postingsHeld).toBe(40_000);
    expect(cost.postingsRead).toBeLessThan(40_000 / 20);
  });

  it('with skewed term frequencies (as in real text), MaxScore reads far fewer postings than the terms hold', () => {
    const bm25 = new Bm25Index();
    for (let i = 0; i < 20_000; i++) bm25.add(`m${i}`, `the meeting notes ${i % 100 === 0 ? 'zanzibar' : 'garden'} ${i % 10 === 0 ? 'invoice' : 'walk'}`);
    const cost = { terms: 0, postingsRead: 0, postingsHeld: 0 };
    const hits = bm25.search('zanzibar invoice meeting notes', 10, cost);
    expect(hits[0].id).toBe('m0');
    expect(cost.postingsRead).toBeLessThan(cost.postingsHeld / 5);
  });
});

describe('TermDictionary: a word no memory holds is forgotten', () => {
  const random = mulberry32(31);
  const uniqueWords = (n: number) => Array.from({ length: n }, () => Array.from({ length: 9 }, () => String.fromCharCode(97 + Math.floor(random() * 26))).join('')).join(' ');

  it('stays bounded over add/delete cycles of unique words, in both tiers, while other memories stay', () => {
    const dictionary = new TermDictionary();
    const small = new TieredLexical({ dictionary });
    const promoted = new TieredLexical({ dictionary, promoteAbove: 3 });
    for (let i = 0; i < 5; i++) small.add(`keep${i}`, `kept memory number ${i} about the garden`);
    const kept = dictionary.size;
    let bound = 0;
    for (let cycle = 0; cycle < 40; cycle++) {
      const texts = Array.from({ length: 5 }, () => uniqueWords(200));
      texts.forEach((text, i) => { small.add(`s${cycle}-${i}`, text); promoted.add(`p${cycle}-${i}`, text); });
      expect(dictionary.size).toBeGreaterThan(kept + 900);
      texts.forEach((text, i) => { small.remove(`s${cycle}-${i}`, text); promoted.remove(`p${cycle}-${i}`, text); });
      expect(dictionary.size, `cycle ${cycle}`).toBe(kept);
      if (cycle === 0) bound = dictionary.bound;
    }
    // Numbers are reused: the table the scan indexes by number does not grow either.
    expect(dictionary.bound).toBeLessThanOrEqual(bound + 1000);
    expect(promoted.kind).toBe('inverted');
    expect(small.search('garden', 5).map((h) => h.id)).toEqual(['keep0', 'keep1', 'keep2', 'keep3', 'keep4']);
  });

  it('a reused number names only the new word', () => {
    const dictionary = new TermDictionary();
    const a = new SmallBm25(dictionary);
    const b = new SmallBm25(dictionary);
    a.add('x', 'zebra keeper');
    a.remove('x', 'zebra keeper');
    a.add('y', 'keeper lantern');
    b.add('z', 'walrus');
    expect(dictionary.size).toBe(3);
    expect(a.search('walrus', 5)).toEqual([]);
    expect(b.search('walrus', 5).map((h) => h.id)).toEqual(['z']);
    expect(a.distinctTerms).toBe(2);
    expect(a.holds('walrus')).toBe(false);
    expect(a.holds('keeper')).toBe(true);
  });
});
