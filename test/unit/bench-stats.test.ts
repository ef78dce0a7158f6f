import { describe, expect, it } from 'vitest';
import { median, medianDifference } from '../../bench/stats.js';

describe('bench statistics: the difference of two medians, from pairs', () => {
  it('is the difference of the medians, inside its interval', () => {
    const a = Array.from({ length: 501 }, (_, i) => 2 + (i % 50) / 100);
    const b = a.map((x) => x + 0.25);
    const d = medianDifference(a, b, 500);
    expect(d.added).toBeCloseTo(0.25, 10);
    expect(d.low).toBeLessThanOrEqual(d.added);
    expect(d.high).toBeGreaterThanOrEqual(d.added);
    expect([d.a, d.b]).toEqual([median(a), median(b)]);
  });

  it('gives a wide interval for noisy samples and a narrow one for quiet samples, the same for the same seed', () => {
    let s = 7;
    const noise = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
    const quietA = Array.from({ length: 400 }, () => 2 + noise() * 0.1);
    const quietB = quietA.map((x) => x + 0.1 + noise() * 0.01);
    const loudA = Array.from({ length: 400 }, () => 2 + noise() * 4);
    const loudB = Array.from({ length: 400 }, () => 2.1 + noise() * 4);
    const quiet = medianDifference(quietA, quietB, 500);
    const loud = medianDifference(loudA, loudB, 500);
    expect(quiet.high - quiet.low).toBeLessThan(0.05);
    expect(loud.high - loud.low).toBeGreaterThan(0.3);
    expect(medianDifference(loudA, loudB, 500)).toEqual(loud);
  });

  it('needs as many samples of each way', () => {
    expect(() => medianDifference([1, 2], [1])).toThrow(RangeError);
    expect(() => medianDifference([], [])).toThrow(RangeError);
  });
});
