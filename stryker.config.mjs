/* global process */
// Mutation testing of the trust-critical code (npm run test:mutation; docs/testing.md).
// Slow, so not part of npm test. One module: npm run test:mutation -- --mutate protocol/public-key.ts
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  // related: vitest runs only the tests that import the mutated files, in the dry run too.
  vitest: { configFile: 'vitest.mutation.config.ts', related: true },
  checkers: ['typescript'],
  tsconfigFile: 'tsconfig.json',
  typescriptChecker: { prioritizePerformanceOverAccuracy: true },
  coverageAnalysis: 'perTest',
  mutate: [
    'protocol/attestation/verify.ts',
    'protocol/cose.ts',
    'sdk/attestation/manifest.ts',
    'protocol/sealed.ts',
    'protocol/sealed-stream.ts',
    'protocol/deletion-receipt.ts',
    'protocol/response-signature.ts',
    'protocol/user-data.ts',
    'protocol/public-key.ts',
    'enclave/storage/sealed-file.ts',
    'enclave/storage/state-head.ts',
    'enclave/storage/store.ts',
    'enclave/storage/payloads.ts',
    'enclave/attestation/create-provider.ts',
    'enclave/memory/admission.ts',
    'enclave/memory/term-admission.ts',
    'enclave/auth/authorizer.ts',
    'enclave/auth/caller.ts',
    'enclave/auth/keys-file.ts',
    'enclave/auth/signed-keys.ts',
    'enclave/auth/host-store-keys.ts',
    'enclave/auth/setup.ts',
    'enclave/storage/head-chain.ts',
  ],
  // Two shared cores: one runner and the checker.
  concurrency: 1,
  timeoutMS: 20_000,
  incremental: true,
  incrementalFile: process.env.STRYKER_INCREMENTAL ?? 'reports/stryker-incremental.json',
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: process.env.STRYKER_HTML ?? 'reports/mutation/index.html' },
  jsonReporter: { fileName: process.env.STRYKER_JSON ?? 'reports/mutation/mutation.json' },
  thresholds: { high: 90, low: 80, break: null },
  // dist/ is left out: the unit tests that run the built CLIs skip without it. models/ is kept:
  // without it every test that embeds (the store's, the shards', the tenant keys') was skipped
  // in the sandbox, and Stryker, which counts a skipped test as passing, saw it cover nothing.
  ignorePatterns: ['dist', 'reports', 'test-artifacts', 'data'],
  tempDirName: '.stryker-tmp',
};
