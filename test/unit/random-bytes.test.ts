import { describe, expect, it } from 'vitest';
import { pooledRandomBytes } from '../../enclave/random-bytes.js';

describe('pooledRandomBytes', () => {
  it('gives fresh, distinct bytes across many refills of its pool', () => {
    // 10,000 draws of 24 bytes: about 60 refills of the 4 KiB pool, draws straddling none.
    const seen = new Set<string>();
    const counts = new Array(256).fill(0);
    for (let i = 0; i < 10_000; i++) {
      const bytes = pooledRandomBytes(i % 2 ? 24 : 16);
      expect(bytes.length).toBe(i % 2 ? 24 : 16);
      seen.add(bytes.toString('hex'));
      for (const b of bytes) counts[b]++;
    }
    // A repeat (a pool handed out twice) or zeros (drawn bytes cleared before copying) would show here.
    expect(seen.size).toBe(10_000);
    // 200,000 bytes: each value expected ~781 times; a broken source is far outside 600-970.
    expect(Math.min(...counts)).toBeGreaterThan(600);
    expect(Math.max(...counts)).toBeLessThan(970);
  });

  it('returns buffers of their own: changing one changes no other draw', () => {
    const a = pooledRandomBytes(32);
    const copy = Buffer.from(a);
    const b = pooledRandomBytes(32);
    b.fill(0);
    expect(a.equals(copy)).toBe(true);
  });

  it('refuses sizes it does not serve', () => {
    expect(() => pooledRandomBytes(257)).toThrow(RangeError);
    expect(() => pooledRandomBytes(-1)).toThrow(RangeError);
    expect(() => pooledRandomBytes(1.5)).toThrow(RangeError);
    expect(pooledRandomBytes(0).length).toBe(0);
  });
});
