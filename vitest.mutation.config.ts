import { defineConfig } from 'vitest/config';

/**
 * The tests Stryker runs against each mutant (stryker.config.mjs): the unit tests of the
 * trust-critical modules, which import the TypeScript sources Stryker mutates. Integration
 * tests run dist/, which a mutant never reaches, so they are left out.
 */
export default defineConfig({
  test: {
    include: [
      'test/unit/admission.test.ts',
      'test/unit/api-keys.test.ts',
      'test/unit/auth-setup.test.ts',
      'test/unit/attestation-verify.test.ts',
      'test/unit/enclave-identity.test.ts',
      'test/unit/head-chain.test.ts',
      'test/unit/lexical.test.ts',
      'test/unit/memory-limit.test.ts',
      'test/unit/release-manifest.test.ts',
      'test/unit/manifest-shape.test.ts',
      'test/unit/response-signature.test.ts',
      'test/unit/sdk-client.test.ts',
      'test/unit/sealed-requests.test.ts',
      'test/unit/sealed-stream.test.ts',
      'test/unit/deletion-receipt.test.ts',
      'test/unit/sealing-key.test.ts',
      'test/unit/signed-keys.test.ts',
      'test/unit/simulated-nsm.test.ts',
      'test/unit/simulated-shape.test.ts',
      'test/unit/storage-*.test.ts',
      'test/unit/*-edges.test.ts',
      'test/unit/attestation-encodings.test.ts',
      'test/unit/create-provider.test.ts',
      'test/unit/measured-upstream.test.ts',
    ],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
