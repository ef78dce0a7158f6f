import { basename, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// This file runs from common/ (vitest) or dist/common/ (built); walk up to the folder
// holding package.json so both agree on where models/ and data/ live.
const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, basename(resolve(here, '..')) === 'dist' ? '../..' : '..');

/** Where install-time model builds land (git-ignored). */
export const modelsDir = resolve(repoRoot, 'models');
