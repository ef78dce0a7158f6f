// Lint: run by `npm test` before the tests; zero warnings allowed (--max-warnings 0).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

export default tseslint.config(
  { ignores: ['eslint.config.js', 'dist/', 'node_modules/', 'models/', 'data/', 'coverage/', 'common/generated/', '.tmp/', '.stryker-tmp*/', 'reports/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { project: './tsconfig.lint.json', tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    settings: { 'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.lint.json' })] },
    rules: {
      // Layers stay layered: a cycle is how a 2,000-line class starts.
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      // Rooms: which folder may import which (type-only imports count too). protocol/ is the
      // wire format both ends share, so it depends on no room; the sdk ships to clients, so it
      // carries no server code; the proxy is untrusted and the enclave trusts none of it.
      'import-x/no-restricted-paths': ['error', {
        zones: [
          { target: './common', from: ['./sdk', './enclave'], message: 'common/ is shared by every process: move what both need to common/ or protocol/.' },
          {
            target: './protocol',
            from: ['./sdk', './enclave', './proxy', './host-store', './gateway', './common', './scripts', './bench', './placement'],
            message: 'protocol/ is the wire format both ends share and imports no other room.',
          },
          { target: './sdk', from: ['./enclave', './proxy', './host-store'], message: 'the sdk is client code: it imports protocol/, never server code.' },
          { target: './proxy', from: ['./enclave'], message: 'the proxy talks to the enclave over gRPC only (protos/enclave.proto).' },
          { target: './placement', from: ['./enclave', './proxy', './sdk', './gateway'], message: 'placement is host code: it talks to enclaves over gRPC and to etcd, nothing else.' },
          { target: './enclave', from: ['./proxy', './sdk', './gateway'], message: 'the enclave imports common/ and protocol/, never the proxy, the sdk or the gateway.' },
        ],
      }],
      // A new union member (journal event, payload kind) must not fall through silently.
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-floating-promises': 'error',
      // onnxruntime-node only through enclave/embedding/onnxruntime.ts, which turns its telemetry
      // off before the library loads (see ort-no-telemetry.ts).
      'no-restricted-imports': ['error', { paths: [{ name: 'onnxruntime-node', message: 'import { ort } from enclave/embedding/onnxruntime.js' }] }],
    },
  },
  {
    // The web console runs in the browser as plain ES modules (its only built file is the
    // sdk's verifier, bundled into dist/): these are the browser globals it uses, listed
    // rather than allowing every global.
    files: ['proxy/console/**/*.js'],
    languageOptions: {
      sourceType: 'module',
      globals: Object.fromEntries(['document', 'localStorage', 'fetch', 'crypto', 'atob', 'btoa', 'CSS', 'TextDecoder', 'TextEncoder', 'TextDecoderStream']
        .map((name) => [name, 'readonly'])),
    },
  },
  {
    files: ['enclave/embedding/onnxruntime.ts'],
    rules: { 'no-restricted-imports': 'off' },
  },
  {
    // Tests read untyped JSON answers; typing every one adds nothing.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
