import { describe, expect, it } from 'vitest';
import { Bm25Index } from '../../enclave/retrieval/bm25.js';
import { foldText, lexicalTerms, stem } from '../../enclave/retrieval/lexical-terms.js';

describe('lexicalTerms', () => {
  it('keeps codes whole and also as their parts', () => {
    expect(lexicalTerms('Ticket ZX-4471')).toEqual(['ticket', 'zx-4471', 'zx', '4471']);
    expect(lexicalTerms('db-prod-01 runs 15.4')).toEqual(['db-prod-01', 'db', 'prod', '01', 'run', '15.4', '15', '4']);
    expect(lexicalTerms('api.example.com orders_daily')).toEqual(['api.example.com', 'api', 'example', 'com', 'orders_daily', 'order', 'daily']);
  });

  it('drops stop words and clitics, folds case and accents', () => {
    expect(lexicalTerms("What's Maria's dentist's phone? It doesn't matter.")).toEqual(['maria', 'dentist', 'phone', 'matter']);
    expect(lexicalTerms('Café LUCÍA')).toEqual(['cafe', 'lucia']);
  });

  it('drops thousands separators so "1,450" matches "1450"', () => {
    expect(foldText('1,450 and 31,400,000 but 3,5')).toBe('1450 and 31400000 but 3,5');
    expect(lexicalTerms('rent of 1,450 euros')).toEqual(['rent', '1450', 'euro']);
  });

  it('strips plural endings (S-stemmer) but not other final s', () => {
    expect(['invoices', 'batteries', 'lessons', 'class', 'bus', 'analysis', 'its', 'was'].map(stem)).toEqual([
      'invoice', 'battery', 'lesson', 'class', 'bus', 'analysis', 'its', 'was',
    ]);
  });

  it('gives nothing for text of only stop words or punctuation', () => {
    expect(lexicalTerms('what is the? -- !!')).toEqual([]);
  });
});

describe('Bm25Index', () => {
  const index = () => {
    const bm25 = new Bm25Index();
    bm25.add('a', 'Ticket ZX-4471: payment webhook retries duplicate charges.');
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
    const expected = (idf * 1 * 2.2) / (1 + 1.2 * (1 - 0.75 + (0.75 * 2) / 3));
    expect(hit.score).toBeCloseTo(expected, 10);
  });

  it('forgets a removed memory at once, and a re-added one matches again', () => {
    const bm25 = index();
    bm25.remove('a');
    expect(bm25.search('ZX-4471', 5).map((h) => h.id)).toEqual(['b']);
    expect(bm25.size).toBe(4);
    bm25.remove('a'); // removing twice is harmless
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
