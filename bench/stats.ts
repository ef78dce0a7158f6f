export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Runs fn `runs` times after a short warm-up; returns latency percentiles in ms. */
export async function timeIt(runs: number, fn: () => Promise<unknown>): Promise<{ p50: number; p99: number; mean: number }> {
  for (let i = 0; i < Math.min(10, runs); i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await fn();
    samples.push(performance.now() - t);
  }
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 50), p99: percentile(samples, 99), mean: samples.reduce((a, b) => a + b, 0) / runs };
}

/** The median of `xs` (not sorted in place). */
export function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * How much `b`'s median exceeds `a`'s, for samples taken in pairs (a request of each way, one
 * after the other, so that what the machine does meanwhile falls on both): the difference of
 * the medians, and a 95% interval from `resamples` bootstrap resamples of the pairs (seeded,
 * so a run's figures can be computed again).
 */
export function medianDifference(a: readonly number[], b: readonly number[], resamples = 2_000, seed = 1): { a: number; b: number; added: number; low: number; high: number } {
  if (a.length !== b.length || a.length === 0) throw new RangeError('medianDifference needs pairs');
  let state = seed >>> 0;
  // mulberry32: a small seeded generator, enough for resampling.
  const random = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const n = a.length;
  const sa = new Array<number>(n);
  const sb = new Array<number>(n);
  const diffs: number[] = [];
  for (let r = 0; r < resamples; r++) {
    for (let i = 0; i < n; i++) {
      const j = Math.floor(random() * n);
      sa[i] = a[j];
      sb[i] = b[j];
    }
    diffs.push(median(sb) - median(sa));
  }
  diffs.sort((x, y) => x - y);
  return { a: median(a), b: median(b), added: median(b) - median(a), low: percentile(diffs, 2.5), high: percentile(diffs, 97.5) };
}
