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
