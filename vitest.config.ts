import { defineConfig } from 'vitest/config';

// glibc's malloc asks for transparent huge pages for its large blocks, in the test workers and
// every process a test starts (they inherit the environment). Loading the embedding model
// touches a few fresh 121 MB buffers; with 4 KiB pages an enclave start spent about 0.6 s of
// CPU faulting in readFile's buffer alone, and reading it (SHA-256, onnxruntime's copies) was
// slowed by TLB misses: 2.6 s of CPU per model load, 1.2 s with this (the vectors are the same
// bits). Only the page size changes; set GLIBC_TUNABLES yourself to run without it.
process.env.GLIBC_TUNABLES ??= 'glibc.malloc.hugetlb=1';

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
