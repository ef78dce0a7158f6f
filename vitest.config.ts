import { defineConfig } from 'vitest/config';
import LongestFirst from './test/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Integration tests start real processes and load the ONNX model.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
    // Longest files first, from test/durations.json: a fresh clone has no duration cache.
    sequence: { sequencer: LongestFirst },
    // Ends what a test that timed out left running (test/helpers/children.ts).
    setupFiles: ['test/helpers/cleanup.ts'],
  },
});
