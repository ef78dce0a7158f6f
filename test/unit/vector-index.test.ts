import { describe, expect, it } from 'vitest';
import { FlatIndex } from '../../enclave/vectors/flat-index.js';
import { DEFAULT_HNSW, HnswIndex } from '../../enclave/vectors/hnsw-index.js';
import { PROMOTE_AT_ONCE, PROMOTE_PER_ADD, TieredIndex } from '../../enclave/vectors/tiered-index.js';
import { dot, dot3, type VectorIndex } from '../../enclave/vectors/vector-index.js';
import { centredCosine } from '../../enclave/retrieval/tenant-centre.js';
import { mulberry32 } from '../../scripts/lib/mulberry32.js';

const unit = (...v: number[]) => {
  const n = Math.hypot(...v);
  return Float32Array.from(v.map((x) => x / n));
};

/** Deterministic pseudo-random unit vectors, so failures reproduce. */
function randomUnits(count: number, dimension: number, seed: number): Float32Array[] {
  const uniform = mulberry32(seed);
  const next = () => uniform() - 0.5;
  return Array.from({ length: count }, () => unit(...Array.from({ length: dimension }, next)));
}

const implementations: Array<[string, (dimension: number) => VectorIndex]> = [
  ['FlatIndex', (d) => new FlatIndex(d, 2)],
  ['HnswIndex', (d) => new HnswIndex(d, DEFAULT_HNSW, 2)],
  // Promoted after 8 vectors, so the contract runs across the move from flat to HNSW.
  ['TieredIndex', (d) => new TieredIndex(d, { promoteAbove: 8, hnsw: DEFAULT_HNSW })],
];

describe.each(implementations)('VectorIndex contract: %s', (_name, make) => {
  it('finds the nearest vectors with cosine scores, best first', () => {
    const index = make(3);
    index.add('x', unit(1, 0, 0));
    index.add('y', unit(0, 1, 0));
    index.add('xy', unit(1, 1, 0));
    const hits = index.search(unit(1, 0.1, 0), 3);
    expect(hits.map((h) => h.id)).toEqual(['x', 'xy', 'y']);
    expect(hits[0].score).toBeCloseTo(0.995, 2);
    expect(index.similarity('y', unit(0, 1, 0))).toBeCloseTo(1, 5);
    expect(index.similarity('nope', unit(0, 1, 0))).toBeUndefined();
  });

  it('measures similarity from an origin where the vector is stored: the centred cosine, 0 for a zero vector', () => {
    const index = make(4);
    const vectors = randomUnits(20, 4, 7);
    vectors.forEach((v, i) => index.add(`m${i}`, v));
    index.add('zero', new Float32Array(4));
    const origin = Float32Array.from([0.1, -0.2, 0.05, 0.3]);
    const query = randomUnits(1, 4, 99)[0];
    for (const i of [0, 5, 19]) expect(index.similarity(`m${i}`, query, origin)).toBeCloseTo(centredCosine(query, vectors[i], origin), 5);
    expect(index.similarity('zero', query, origin)).toBe(0);
    expect(index.similarity('nope', query, origin)).toBeUndefined();
  });

  it('scores many ids against one query as similarity() does, while vectors come and go under the same origin', () => {
    const index = make(6);
    const vectors = randomUnits(40, 6, 3);
    vectors.slice(0, 30).forEach((v, i) => index.add(`m${i}`, v));
    const origin = Float32Array.from([0.05, 0.1, -0.1, 0.2, 0, -0.05]);
    const query = randomUnits(1, 6, 5)[0];
    const check = (held: number[]) => {
      const score = index.scorer(query, origin);
      for (const i of held) expect(score(`m${i}`)).toBeCloseTo(centredCosine(query, vectors[i], origin), 5);
      expect(index.scorer(query)(`m${held[0]}`)).toBeCloseTo(index.similarity(`m${held[0]}`, query)!, 6);
    };
    check([0, 7, 29]);
    // Rows move and are reused: what was worked out for a row must not follow it.
    for (const i of [0, 7, 12]) index.remove(`m${i}`);
    for (let i = 30; i < 40; i++) index.add(`m${i}`, vectors[i]);
    check([1, 29, 30, 35, 39]);
    expect(index.scorer(query, origin)('m0')).toBeUndefined();
    expect(index.scorer(new Float32Array(6), origin)('m1')).toBe(0);
  });

  it('grows past its initial capacity and keeps every vector as given', () => {
    const index = make(4);
    const vectors = randomUnits(50, 4, 1);
    vectors.forEach((v, i) => index.add(`m${i}`, v));
    index.add('m3', vectors[7]); // an id already held is left as it is
    expect(index.size).toBe(50);
    expect(index.search(vectors[49], 1)[0].id).toBe('m49');
    for (const i of [0, 3, 49]) expect([...index.vector(`m${i}`)!].map((x) => x.toFixed(5))).toEqual([...vectors[i]].map((x) => x.toFixed(5)));
  });

  it('copies out every id with its vector, zero ones and the survivors of removals included', () => {
    const index = make(4);
    const vectors = randomUnits(20, 4, 2);
    vectors.forEach((v, i) => index.add(`m${i}`, v));
    index.add('zero', new Float32Array(4));
    for (const i of [0, 7, 19]) index.remove(`m${i}`);
    const rows = index.copyRows();
    expect(rows.vectors.length).toBe(rows.ids.length * 4);
    const listed = new Map(rows.ids.map((id, row) => [id, [...rows.vectors.subarray(row * 4, row * 4 + 4)]]));
    expect(listed.size).toBe(index.size);
    expect(listed.get('zero')).toEqual([0, 0, 0, 0]);
    for (const i of [0, 7, 19]) expect(listed.has(`m${i}`)).toBe(false);
    for (const [id, v] of listed) expect(v).toEqual([...index.vector(id)!]);
  });

  it('drops removed vectors from results at once', () => {
    const index = make(2);
    index.add('a', unit(1, 0));
    index.add('b', unit(0.9, 0.1));
    index.remove('a');
    expect(index.search(unit(1, 0), 5).map((h) => h.id)).toEqual(['b']);
    expect(index.vector('a')).toBeUndefined();
    index.remove('b');
    index.remove('b');
    expect(index.search(unit(1, 0), 5)).toEqual([]);
    expect(index.size).toBe(0);
  });

  it('keeps zero vectors (text with no known word) but never returns them, and answers a zero query with nothing', () => {
    const index = make(2);
    index.add('zero', new Float32Array(2));
    index.add('a', unit(1, 0));
    expect(index.size).toBe(2);
    expect(index.search(unit(1, 0), 100).map((h) => h.id)).toEqual(['a']);
    expect(index.search(new Float32Array(2), 5)).toEqual([]);
    expect([...index.vector('zero')!]).toEqual([0, 0]);
  });

  it('applies a filter inside the search: k results when k match', () => {
    const index = make(8);
    const vectors = randomUnits(200, 8, 2);
    vectors.forEach((v, i) => index.add(`m${i}`, v));
    const even = (id: string) => Number(id.slice(1)) % 2 === 0;
    const hits = index.search(vectors[1], 10, even);
    expect(hits).toHaveLength(10);
    expect(hits.every((h) => even(h.id))).toBe(true);
  });

  it('searchAbove gives search()\'s hits from a minimum score on, to the bit, near copies and a zero vector among them', () => {
    const index = make(24);
    const base = randomUnits(300, 24, 11);
    base.forEach((v, i) => index.add(`m${i}`, v));
    // Close copies of the first vectors, from a cosine of about 0.999 down to 0.9.
    const jitter = randomUnits(40, 24, 12);
    for (let i = 0; i < 40; i++) index.add(`near${i}`, unit(...base[i % 5].map((x, d) => x + (0.01 + i * 0.012) * jitter[i][d])));
    index.add('zero', new Float32Array(24));
    for (const q of [0, 1, 4, 77]) {
      for (const [k, minScore] of [[16, 0.96], [3, 0.9], [16, 0.999], [5, -1]] as const) {
        expect(index.searchAbove(base[q], k, minScore)).toEqual(index.search(base[q], k).filter((h) => h.score >= minScore));
      }
    }
    expect(index.searchAbove(base[0], 16, 0.96).length).toBeGreaterThan(1);
    expect(index.searchAbove(new Float32Array(24), 16, -1)).toEqual([]);
  });

  it('refuses vectors of the wrong dimension', () => {
    expect(() => make(3).add('a', unit(1, 0))).toThrow(/dimensions/);
  });

  it('has recall@10 of at least 0.97 against exact search on 3,000 random 32-d vectors', () => {
    const dimension = 32;
    const vectors = randomUnits(3000, dimension, 3);
    const index = make(dimension);
    const exact = new FlatIndex(dimension);
    vectors.forEach((v, i) => {
      index.add(`m${i}`, v);
      exact.add(`m${i}`, v);
    });
    const queries = randomUnits(100, dimension, 4);
    let found = 0;
    for (const q of queries) {
      const truth = new Set(exact.search(q, 10).map((h) => h.id));
      found += index.search(q, 10).filter((h) => truth.has(h.id)).length;
    }
    expect(found / (queries.length * 10)).toBeGreaterThanOrEqual(0.97);
  });
});

describe('TieredIndex', () => {
  it('moves a tenant to HNSW past its threshold, keeping every vector', () => {
    const index = new TieredIndex(4, { promoteAbove: 16, hnsw: DEFAULT_HNSW });
    const vectors = randomUnits(17, 4, 5);
    vectors.slice(0, 16).forEach((v, i) => index.add(`m${i}`, v));
    expect(index.kind).toBe('flat');
    index.add('m16', vectors[16]);
    expect(index.kind).toBe('hnsw');
    expect(index.size).toBe(17);
    for (let i = 0; i < 17; i++) expect(index.search(vectors[i], 1)[0].id).toBe(`m${i}`);
  });

  it('builds a large graph over the tenant\'s next adds, answering from the flat array meanwhile, and misses no change made during the build', () => {
    const run = () => {
      const index = new TieredIndex(64, { promoteAbove: 3000, hnsw: DEFAULT_HNSW });
      const vectors = randomUnits(3500, 64, 9);
      vectors.slice(0, 3001).forEach((v, i) => index.add(`m${i}`, v));
      // The 3,001st add moved PROMOTE_AT_ONCE of them, not all 3,001: the flat array still answers.
      expect(index.kind).toBe('flat');
      // Changes while the graph is built: new vectors; removals of vectors the graph holds already
      // (the first step's, one added since) and of one it does not hold yet; a vector replaced.
      for (let i = 3001; i < 3010; i++) index.add(`m${i}`, vectors[i]);
      index.remove('m0');
      index.remove('m3003');
      index.remove('m2999');
      index.remove('m2998');
      index.add('m2998', vectors[5]);
      // Exact answers meanwhile.
      expect(index.search(vectors[3005], 1)[0]).toMatchObject({ id: 'm3005' });
      let next = 3010;
      while (index.kind === 'flat') index.add(`m${next}`, vectors[next++]);
      // PROMOTE_PER_ADD a write: the rest of the 3,001 moved over the next adds, none left behind.
      expect(next).toBe(3010 + Math.ceil((3001 - PROMOTE_AT_ONCE - 10 * PROMOTE_PER_ADD) / PROMOTE_PER_ADD));
      expect(index.size).toBe(next - 3);
      for (const id of ['m0', 'm3003', 'm2999']) expect(index.vector(id)).toBeUndefined();
      expect(index.vector('m2998')).toEqual(vectors[5]);
      for (const i of [1, 1500, 2997, 3001, next - 1]) expect(index.search(vectors[i], 1)[0].id).toBe(`m${i}`);
      for (const i of [0, 3003, 2999]) expect(index.search(vectors[i], 3).map((h) => h.id)).not.toContain(`m${i}`);
      return vectors.slice(3450, 3490).map((q) => index.search(q, 10));
    };
    // What the graph holds depends only on what was written: the same writes, the same answers.
    expect(run()).toEqual(run());
  });

  it('finishes a promotion at once when asked (before a snapshot saves the graph)', () => {
    const index = new TieredIndex(64, { promoteAbove: 3000, hnsw: DEFAULT_HNSW });
    const vectors = randomUnits(3001, 64, 11);
    vectors.forEach((v, i) => index.add(`m${i}`, v));
    expect(index.kind).toBe('flat');
    expect(index.saveGraph()).toBeUndefined();
    index.finishPromotion();
    expect(index.kind).toBe('hnsw');
    expect(index.size).toBe(3001);
    for (const i of [0, 1000, 3000]) expect(index.search(vectors[i], 1)[0].id).toBe(`m${i}`);
  });
});

describe('HnswIndex', () => {
  it('reuses the space of removed vectors instead of growing', () => {
    const index = new HnswIndex(3, DEFAULT_HNSW, 4);
    const live: string[] = [];
    for (let i = 0; i < 200; i++) {
      index.add(`m${i}`, unit(1, i % 7, i % 5));
      live.push(`m${i}`);
      if (live.length > 3) index.remove(live.shift()!);
    }
    expect(index.size).toBe(3);
    expect(index.search(unit(1, 199 % 7, 199 % 5), 3).map((h) => h.id).sort()).toEqual(['m197', 'm198', 'm199']);
    // A removed vector's label goes to the next one added: never more labels than were held at once.
    for (const id of ['m197', 'm198', 'm199']) expect(index.labelOf(id)).toBeLessThan(4);
  });

  it('answers by label as it does by id, to the bit', () => {
    const random = mulberry32(5);
    const vector = () => {
      const v = Float32Array.from({ length: 8 }, () => random() - 0.5);
      const norm = Math.hypot(...v);
      return v.map((x) => x / norm);
    };
    const index = new HnswIndex(8, DEFAULT_HNSW, 16);
    for (let i = 0; i < 300; i++) {
      index.add(`m${i}`, vector());
      if (i % 3 === 2) index.remove(`m${i - 1}`);
    }
    index.add('zero', new Float32Array(8));
    expect(index.labelOf('zero')).toBeUndefined();
    expect(index.labelOf('m1')).toBeUndefined();
    const [query, origin] = [vector(), vector()];
    const byId = index.scorer(query, origin);
    const byLabel = index.labelScorer(query, origin);
    const labels = index.searchLabels(query, 20);
    expect(labels.map((label) => index.idOf(label))).toEqual(index.search(query, 20).map((h) => h.id));
    for (const label of labels) {
      const id = index.idOf(label);
      expect(index.labelOf(id)).toBe(label);
      expect(byLabel(label)).toBe(byId(id));
    }
  });
});

describe('dot3', () => {
  it('gives the three products of dot() to the bit, for any length', () => {
    // Values of very different sizes, so that a sum taken in another order differs in its last bits.
    const uniform = mulberry32(3);
    const rough = (n: number) => Float32Array.from({ length: n }, () => (uniform() - 0.5) * 10 ** Math.floor(uniform() * 7 - 3));
    for (const dimension of [1, 3, 4, 7, 100]) {
      for (let trial = 0; trial < 20; trial++) {
        const [a, c] = [rough(dimension), rough(dimension)];
        // The row sits inside a larger array, as in FlatIndex.
        const rows = rough(3 * dimension);
        const row = rows.subarray(dimension, 2 * dimension);
        const out = new Float64Array(3);
        dot3(a, c, rows, dimension, out);
        expect([...out]).toEqual([dot(a, rows, dimension), dot(c, rows, dimension), dot(row, row)]);
      }
    }
  });
});
