import { describe, expect, it } from 'vitest';
import { TenantIndex } from '../../enclave/memory/tenant-index.js';

const unit = (...v: number[]) => {
  const n = Math.hypot(...v);
  return Float32Array.from(v.map((x) => x / n));
};

describe('TenantIndex (hnswlib, cosine)', () => {
  it('finds the nearest vectors with cosine scores, best first', () => {
    const index = new TenantIndex(3);
    index.add('x', unit(1, 0, 0));
    index.add('y', unit(0, 1, 0));
    index.add('xy', unit(1, 1, 0));
    const hits = index.search(unit(1, 0.1, 0), 3);
    expect(hits.map((h) => h.id)).toEqual(['x', 'xy', 'y']);
    expect(hits[0].score).toBeCloseTo(0.995, 2);
  });

  it('grows past its initial capacity', () => {
    const index = new TenantIndex(4, 2);
    for (let i = 0; i < 50; i++) index.add(`m${i}`, unit(1, i, i % 3, 1));
    expect(index.size).toBe(50);
    expect(index.search(unit(1, 49, 1, 1), 1)[0].id).toBe('m49');
  });

  it('drops deleted vectors from results at once', () => {
    const index = new TenantIndex(2);
    index.add('a', unit(1, 0));
    index.add('b', unit(0.9, 0.1));
    index.remove('a');
    expect(index.search(unit(1, 0), 5).map((h) => h.id)).toEqual(['b']);
    index.remove('b');
    expect(index.search(unit(1, 0), 5)).toEqual([]);
  });

  it('reuses the space of deleted vectors instead of growing', () => {
    const index = new TenantIndex(3, 4);
    const live: string[] = [];
    for (let i = 0; i < 200; i++) {
      index.add(`m${i}`, unit(1, i % 7, i % 5));
      live.push(`m${i}`);
      if (live.length > 3) index.remove(live.shift()!);
    }
    expect(index.size).toBe(3);
    expect(index.allocated).toBe(4);
    const found = index.search(unit(1, 199 % 7, 199 % 5), 3).map((h) => h.id);
    expect(found.sort()).toEqual(['m197', 'm198', 'm199']);
  });

  it('asks for no more results than it holds and skips zero vectors', () => {
    const index = new TenantIndex(2);
    index.add('zero', new Float32Array(2));
    expect(index.size).toBe(0);
    index.add('a', unit(1, 0));
    expect(index.search(unit(1, 0), 100)).toHaveLength(1);
    expect(index.search(new Float32Array(2), 5)).toEqual([]);
  });

  it('refuses vectors of the wrong dimension', () => {
    expect(() => new TenantIndex(3).add('a', unit(1, 0))).toThrow(/dimensions/);
  });
});
