import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../common/paths.js';
import { errorCatalogue } from '../../common/errors.js';
import { limits } from '../../common/limits.js';
import { enclaveSettings } from '../../enclave/config.js';
import { hostStoreSettings } from '../../host-store/config.js';
import { hostLogSettings } from '../../host-log/config.js';
import { placementSettings } from '../../placement/config.js';
import { proxySettings } from '../../proxy/config.js';

// The README is the front door; the reference lives in docs/ (each page a few ## sections).
const doc = (file: string) => readFileSync(join(repoRoot, file), 'utf8');
const section = (file: string, heading: string) => {
  const text = doc(file);
  const start = text.indexOf(`\n## ${heading}\n`);
  expect(start, `${file} has no "## ${heading}"`).toBeGreaterThan(0);
  const end = text.indexOf('\n## ', start + 1);
  return text.slice(start, end === -1 ? undefined : end);
};

describe('the docs stay true to the code', () => {
  it('lists every setting of every process, with its default', () => {
    const table = section('docs/configuration.md', 'Configuration');
    for (const setting of [...Object.values(enclaveSettings), ...Object.values(proxySettings), ...Object.values(hostStoreSettings), ...Object.values(hostLogSettings), ...Object.values(placementSettings)]) {
      const row = table.split('\n').find((line) => line.startsWith(`| \`${setting.name}\` |`));
      expect(row, `${setting.name} is missing from the configuration table (docs/configuration.md)`).toBeDefined();
      if (setting.defaultText !== undefined) expect(row).toContain(`\`${setting.defaultText.replace(/\|/g, '\\|')}\``);
    }
  });

  it('names no setting the code does not have', () => {
    const known = new Set([...Object.values(enclaveSettings), ...Object.values(proxySettings), ...Object.values(hostStoreSettings), ...Object.values(hostLogSettings), ...Object.values(placementSettings)].map((s) => s.name));
    const named = [...section('docs/configuration.md', 'Configuration').matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]);
    expect(named.filter((name) => !known.has(name))).toEqual([]);
  });

  it('lists every error code with its status and type, and no code the service does not send', () => {
    const rows = [...section('docs/api.md', 'API').matchAll(/^\| `([a-z_0-9]+)` \| (\d{3}) \| `([a-z_]+)` \|/gm)];
    const documented = new Map(rows.map(([, code, status, type]) => [code, { status: Number(status), type }]));
    for (const [code, spec] of Object.entries(errorCatalogue)) {
      expect(documented.get(code), `${code} is missing from the error table (docs/api.md)`).toEqual({ status: spec.status, type: spec.type });
    }
    expect([...documented.keys()].filter((code) => !(code in errorCatalogue))).toEqual([]);
  });

  it('states the limits the code enforces', () => {
    const table = section('docs/api.md', 'Limits');
    expect(table).toContain(`${(limits.maxContentChars).toLocaleString('en')} characters`);
    expect(table).toContain(`1–${limits.maxTopK}, default ${limits.defaultTopK}`);
    expect(table).toContain(`1–${limits.maxBatchMemories} memories`);
    expect(table).toContain(`${limits.maxBodyBytes / 1024 / 1024} MiB`);
    expect(table).toContain(`${limits.maxJsonDepth} levels`);
  });
});

describe('links between the docs', () => {
  // GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens.
  const anchors = (file: string) => new Set([...doc(file).matchAll(/^#{1,6} (.+)$/gm)]
    .map(([, heading]) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, '').replace(/ /g, '-')));
  const pages = ['README.md', 'CONTRIBUTING.md', 'deploy/README.md', ...readdirSync(join(repoRoot, 'docs')).map((f) => `docs/${f}`)];

  it.each(pages)('every relative link in %s leads to a file and a heading that exist', (page) => {
    const broken: string[] = [];
    for (const [, target] of doc(page).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue;
      const [path, anchor] = target.split('#');
      const file = path === '' ? page : normalize(join(dirname(page), path));
      if (!existsSync(join(repoRoot, file))) broken.push(target);
      else if (anchor && file.endsWith('.md') && !anchors(file).has(anchor)) broken.push(target);
    }
    expect(broken).toEqual([]);
  });
});
