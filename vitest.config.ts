import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Integration tests start real processes and load the ONNX model.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
    // Ends what a test that timed out left running (test/helpers/children.ts).
    setupFiles: ['test/helpers/cleanup.ts'],
  },
});
