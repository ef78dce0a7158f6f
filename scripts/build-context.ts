#!/usr/bin/env node
/**
 * build-context: lists the files `docker build -f deploy/enclave.Dockerfile .` sends to the
 * builder (the repository filtered by deploy/enclave.Dockerfile.dockerignore), each with its
 * SHA-256, so that a release can record every input of the image and two builds can be
 * compared (deploy/README.md, "3. Build a release").
 * Exit status: 0 listed, 1 unreadable, 2 usage error.
 */
import { createHash } from 'node:crypto';
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { included, mayIncludeBelow, parseDockerignore, type IgnoreRule } from './lib/dockerignore.js';
import { invokedDirectly } from '../sdk/bin/invoked-directly.js';

export const USAGE = `Usage: build-context [--root <dir>] [--dockerignore <file>] [--digest | --includes <path>]

  --root <dir>           the build context (default: the current directory)
  --dockerignore <file>  default: <root>/deploy/enclave.Dockerfile.dockerignore
  --digest               print only the SHA-256 of the listing (what the manifest records)
  --includes <path>      exit 0 if a file at <path> (relative to the root) would be in the
                         context, 3 if not
  -h, --help             show this help

Prints one line per file: <sha256>  <path> (symbolic links hash their target).`;

export interface ContextEntry {
  path: string;
  sha256: string;
}

export async function listContext(root: string, dockerignore: string): Promise<ContextEntry[]> {
  const rules = parseDockerignore(await readFile(dockerignore, 'utf8'));
  const entries: ContextEntry[] = [];
  await walk(root, '', rules, entries);
  return entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

async function walk(root: string, dir: string, rules: readonly IgnoreRule[], out: ContextEntry[]): Promise<void> {
  for (const name of await readdir(join(root, dir))) {
    const path = dir === '' ? name : `${dir}/${name}`;
    const info = await lstat(join(root, path));
    if (info.isDirectory()) {
      if (included(rules, path) || mayIncludeBelow(rules, path)) await walk(root, path, rules, out);
    } else if (included(rules, path)) {
      const bytes = info.isSymbolicLink() ? Buffer.from(`symlink:${await readlink(join(root, path))}`) : await readFile(join(root, path));
      out.push({ path, sha256: createHash('sha256').update(bytes).digest('hex') });
    }
  }
}

export function formatListing(entries: readonly ContextEntry[]): string {
  return entries.map((e) => `${e.sha256}  ${e.path}\n`).join('');
}

export async function main(argv: string[], out: (text: string) => void = (t) => process.stdout.write(t)): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: { root: { type: 'string' }, dockerignore: { type: 'string' }, digest: { type: 'boolean', default: false }, includes: { type: 'string' }, help: { type: 'boolean', short: 'h', default: false } },
    }));
  } catch (error) {
    process.stderr.write(`build-context: ${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    out(`${USAGE}\n`);
    return 0;
  }
  const root = resolve(values.root ?? '.');
  const dockerignore = values.dockerignore ?? join(root, 'deploy/enclave.Dockerfile.dockerignore');
  try {
    if (values.includes !== undefined) return included(parseDockerignore(await readFile(dockerignore, 'utf8')), values.includes) ? 0 : 3;
    const listing = formatListing(await listContext(root, dockerignore));
    out(values.digest ? `${createHash('sha256').update(listing).digest('hex')}\n` : listing);
    return 0;
  } catch (error) {
    process.stderr.write(`build-context: ${(error as Error).message}\n`);
    return 1;
  }
}

if (invokedDirectly(import.meta.url)) process.exitCode = await main(process.argv.slice(2));
