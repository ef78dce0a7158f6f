import { describe, expect, it } from 'vitest';
import { Bm25Index, MAX_QUERY_TERMS } from '../../enclave/lexical/bm25.js';
import type { LexicalIndex } from '../../enclave/lexical/lexical-index.js';
import { lexicalTerms } from '../../enclave/lexical/lexical-terms.js';
import { SmallBm25 } from '../../enclave/lexical/small-bm25.js';
import { TieredLexical } from '../../enclave/lexical/tiered-lexical.js';

// Every form of a tenant's lexical index meets the same contract, and each gives exactly the
// scores of BM25 by definition (as test/unit/vector-index.test.ts does for the vector indexes).

/** BM25 by definition: every matching memory scored, all sorted (what the pruned search must equal). */
function exhaustive(docs: Map<string, string>, query: string, k: number): Array<{ id: string; score: number }> {
  const terms = new Map([...docs].map(([id, text]) => [id, lexicalTerms(text)]));
  const n = docs.size;
  const average = [...terms.values()].reduce((sum, t) => sum + t.length, 0) / n;
  const scores = new Map<string, number>();
  for (const term of new Set(lexicalTerms(query))) {
    const holding = [...terms].filter(([, t]) => t.includes(term));
    if (holding.length === 0) continue;
    const idf = Math.log(1 + (n - holding.length + 0.5) / (holding.length + 0.5));
    for (const [id, t] of holding) {
      const tf = t.filter((x) => x === term).length;
      scores.set(id, (scores.get(id) ?? 0) + (idf * tf * 2.2) / (tf + 1.2 * (1 - 0.3 + (0.3 * t.length) / average)));
    }
  }
  const order = [...docs.keys()];
  return [...scores].map(([id, score]) => ({ id, score }))
    .sort((x, y) => y.score - x.score || order.indexOf(x.id) - order.indexOf(y.id)).slice(0, k);
}

const implementations: Array<[string, () => LexicalIndex]> = [
  ['Bm25Index (inverted, MaxScore)', () => new Bm25Index()],
  ['SmallBm25 (scan of term numbers)', () => new SmallBm25()],
  ['TieredLexical (moves to the inverted index past 300)', () => new TieredLexical({ promoteAbove: 300 })],
];

describe.each(implementations)('LexicalIndex contract: %s', (_name, make) => {
  it('counts memories and distinct terms, knows which terms it holds, and forgets them with the last memory holding them', () => {
    const index = make();
    index.add('a', 'The river garden');
    index.addTerms('b', lexicalTerms('garden piano'));
    expect([index.size, index.distinctTerms]).toEqual([2, 3]);
    expect([index.holds('river'), index.holds('garden'), index.holds('piano'), index.holds('the'), index.holds('lisbon')]).toEqual([true, true, true, false, false]);
    index.remove('a', 'The river garden');
    index.remove('a', 'The river garden'); // removing twice, or one never added, does nothing
    index.remove('never', 'river');
    expect([index.size, index.distinctTerms, index.holds('river'), index.holds('garden')]).toEqual([1, 2, false, true]);
    expect(index.search('garden', 5).map((h) => h.id)).toEqual(['b']);
    index.dispose();
  });

  it('ranks only what `accept` accepts, and scores the memories asked about whether accepted or not', () => {
    const index = make();
    ['invoice river', 'invoice garden', 'invoice piano', 'train'].forEach((text, i) => index.add(`m${i}`, text));
    const { hits, askedScores } = index.searchWith('invoice', 5, ['m0', 'm3', 'never'], undefined, (id) => id !== 'm0');
    expect(hits.map((h) => h.id).sort()).toEqual(['m1', 'm2']);
    expect(askedScores[0]).toBeGreaterThan(0);
    expect([askedScores[1], askedScores[2]]).toEqual([0, 0]);
  });
});

describe.each(implementations)('%s equals exhaustive BM25', (_name, make) => {
  const words = ['river', 'garden', 'invoice', 'meeting', 'coffee', 'the', 'dog', 'walk', 'morning', 'Anna', 'Lisbon', 'piano', 'train', 'window', 'doctor', 'Tuesday'];
  let seed = 7;
  const random = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
  // Common words get picked far more often than rare ones, as in real text.
  const pick = () => words[Math.floor(words.length * random() ** 2)];
  const sentence = (len: number) => Array.from({ length: len }, pick).join(' ');

  it('on 2,000 memories with deletes and many queries, for several k', () => {
    const bm25 = make();
    const docs = new Map<string, string>();
    for (let i = 0; i < 2000; i++) {
      const text = sentence(3 + Math.floor(random() * 12));
      bm25.add(`m${i}`, text);
      docs.set(`m${i}`, text);
      if (i % 5 === 4) {
        const victim = `m${Math.floor(random() * i)}`;
        if (docs.has(victim)) {
          bm25.remove(victim, docs.get(victim)!);
          docs.delete(victim);
        }
      }
    }
    for (let q = 0; q < 60; q++) {
      const query = sentence(1 + Math.floor(random() * 8));
      for (const k of [1, 5, 100]) {
        const got = bm25.search(query, k);
        const want = exhaustive(docs, query, k);
        // Equal scores summed in another order may differ in the last bit: compare ties as ties.
        const tied = (hits: Array<{ id: string; score: number }>) => hits.map((h) => `${h.score.toFixed(9)} ${h.id}`).sort();
        expect(tied(got), `${query} k=${k}`).toEqual(tied(want));
        got.forEach((h, i) => expect(h.score).toBeCloseTo(want[i].score, 9));
      }
    }
  });

  it('scores the memories it is asked about beyond its top k exactly, 0 for those without a term or not held', () => {
    const bm25 = make();
    const docs = new Map<string, string>();
    for (let i = 0; i < 800; i++) {
      const text = sentence(3 + Math.floor(random() * 10));
      bm25.add(`m${i}`, text);
      docs.set(`m${i}`, text);
    }
    for (let i = 0; i < 800; i += 7) {
      bm25.remove(`m${i}`, docs.get(`m${i}`)!);
      docs.delete(`m${i}`);
    }
    bm25.add('none', 'zzz qqq');
    docs.set('none', 'zzz qqq');
    for (let q = 0; q < 20; q++) {
      const query = sentence(1 + Math.floor(random() * 6));
      const all = new Map(exhaustive(docs, query, docs.size).map((h) => [h.id, h.score]));
      const asked = ['m1', 'm7', 'none', 'never-added', ...Array.from({ length: 30 }, () => `m${Math.floor(random() * 800)}`)];
      const { hits, askedScores } = bm25.searchWith(query, 5, asked);
      expect(hits.map((h) => h.id)).toEqual(bm25.search(query, 5).map((h) => h.id));
      asked.forEach((id, j) => expect(askedScores[j], `${query}: ${id}`).toBeCloseTo(all.get(id) ?? 0, 9));
      // k 0: only those scores (the top hits were found elsewhere), the same to the last bit.
      const only = bm25.searchWith(query, 0, asked);
      expect(only.hits).toEqual([]);
      expect([...only.askedScores]).toEqual([...askedScores]);
    }
  });

  it('scores a memory of more terms than a posting entry packs (32,767) exactly', () => {
    const bm25 = make();
    const docs = new Map<string, string>();
    const add = (id: string, text: string) => { bm25.add(id, text); docs.set(id, text); };
    add('long', `${sentence(40_000)} lighthouse`);
    for (let i = 0; i < 400; i++) add(`m${i}`, `${sentence(3 + (i % 10))}${i % 3 === 0 ? ' lighthouse' : ''}`);
    for (const query of ['lighthouse', 'lighthouse river', 'the dog walk']) {
      const want = new Map(exhaustive(docs, query, docs.size).map((h) => [h.id, h.score]));
      expect(want.get('long'), query).toBeGreaterThan(0);
      const { hits, askedScores } = bm25.searchWith(query, docs.size, ['long']);
      expect(askedScores[0], query).toBeCloseTo(want.get('long')!, 9);
      expect(hits.find((h) => h.id === 'long')?.score, query).toBeCloseTo(want.get('long')!, 9);
      for (const hit of hits) expect(hit.score, `${query}: ${hit.id}`).toBeCloseTo(want.get(hit.id)!, 9);
    }
  });

  it('stays exact across compactions (many removals)', () => {
    const bm25 = make();
    const docs = new Map<string, string>();
    for (let i = 0; i < 5000; i++) {
      const text = sentence(4);
      bm25.add(`m${i}`, text);
      docs.set(`m${i}`, text);
    }
    for (let i = 0; i < 4000; i++) {
      bm25.remove(`m${i}`, docs.get(`m${i}`)!);
      docs.delete(`m${i}`);
    }
    expect(bm25.size).toBe(1000);
    for (const query of ['river garden', 'the dog', 'Tuesday doctor window']) {
      expect(bm25.search(query, 10).map((h) => h.id)).toEqual(exhaustive(docs, query, 10).map((h) => h.id));
    }
  });

  it('uses at most MAX_QUERY_TERMS distinct terms, the rarest', () => {
    const bm25 = make();
    bm25.add('rare', 'zanzibar');
    for (let i = 0; i < 50; i++) bm25.add(`c${i}`, Array.from({ length: 40 }, (_, j) => `common${j}`).join(' '));
    const query = [...Array.from({ length: 40 }, (_, j) => `common${j}`), 'zanzibar'].join(' ');
    const [top] = bm25.search(query, 1);
    expect(top.id).toBe('rare');
    expect(MAX_QUERY_TERMS).toBe(32);
  });
});
