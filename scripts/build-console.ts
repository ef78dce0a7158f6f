/**
 * Bundles the sdk's attestation verifier for the web console (`npm run build`): one
 * verifier, tested once, instead of a second copy of CBOR/DER/COSE code in the page (issue
 * 35 item 2). The bundle is built from the TypeScript source, not from tsc's output, and
 * written under dist/, where proxy/console-routes.ts serves it as /console/verifier.js.
 * Not minified: whoever wants to read what their browser runs can.
 */
import { join } from 'node:path';
import { build, type BuildOptions } from 'esbuild';
import { repoRoot } from '../common/paths.js';
import { invokedDirectly } from '../sdk/bin/invoked-directly.js';

export const CONSOLE_BUNDLE = join(repoRoot, 'dist', 'console', 'verifier.js');

/** Shared with test/unit/console-verifier.test.ts, which builds the same bundle in memory and compares. */
export const consoleBundleOptions = {
  absWorkingDir: repoRoot,
  entryPoints: ['sdk/attestation/browser.ts'],
  outfile: CONSOLE_BUNDLE,
  bundle: true,
  format: 'esm',
  // The browser field of dependencies applies: tweetnacl then leaves out its require('crypto').
  platform: 'browser',
  target: 'es2022',
  legalComments: 'inline',
  logLevel: 'warning',
} satisfies BuildOptions;

if (invokedDirectly(import.meta.url)) await build(consoleBundleOptions);
