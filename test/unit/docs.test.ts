import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../common/paths.js';
import { errorCatalogue } from '../../common/errors.js';
import { limits } from '../../common/limits.js';
import { enclaveSettings } from '../../enclave/config.js';
import { hostStoreSettings } from '../../host-store/config.js';
import { proxySettings } from '../../proxy/config.js';

const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
const section = (heading: string) => {
  const start = readme.indexOf(`\n## ${heading}\n`);
  expect(start, `README has no "## ${heading}"`).toBeGreaterThan(0);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end === -1 ? undefined : end);
};

describe('README stays true to the code', () => {
  it('lists every setting of every process, with its default', () => {
    const table = section('Configuration');
    for (const setting of [...Object.values(enclaveSettings), ...Object.values(proxySettings), ...Object.values(hostStoreSettings)]) {
      const row = table.split('\n').find((line) => line.startsWith(`| \`${setting.name}\` |`));
      expect(row, `${setting.name} is missing from the README's configuration table`).toBeDefined();
      if (setting.defaultText !== undefined) expect(row).toContain(`\`${setting.defaultText.replace(/\|/g, '\\|')}\``);
    }
  });

  it('names no setting the code does not have', () => {
    const known = new Set([...Object.values(enclaveSettings), ...Object.values(proxySettings), ...Object.values(hostStoreSettings)].map((s) => s.name));
    const named = [...section('Configuration').matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]);
    expect(named.filter((name) => !known.has(name))).toEqual([]);
  });

  it('lists every error code with its status and type, and no code the service does not send', () => {
    const rows = [...section('API').matchAll(/^\| `([a-z_0-9]+)` \| (\d{3}) \| `([a-z_]+)` \|/gm)];
    const documented = new Map(rows.map(([, code, status, type]) => [code, { status: Number(status), type }]));
    for (const [code, spec] of Object.entries(errorCatalogue)) {
      expect(documented.get(code), `${code} is missing from the README's error table`).toEqual({ status: spec.status, type: spec.type });
    }
    expect([...documented.keys()].filter((code) => !(code in errorCatalogue))).toEqual([]);
  });

  it('states the limits the code enforces', () => {
    const table = section('Limits');
    expect(table).toContain(`${(limits.maxContentChars).toLocaleString('en')} characters`);
    expect(table).toContain(`1–${limits.maxTopK}, default ${limits.defaultTopK}`);
    expect(table).toContain(`1–${limits.maxBatchMemories} memories`);
    expect(table).toContain(`${limits.maxBodyBytes / 1024 / 1024} MiB`);
    expect(table).toContain(`${limits.maxJsonDepth} levels`);
  });
});
