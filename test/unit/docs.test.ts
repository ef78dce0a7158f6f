import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../common/paths.js';
import { errorCatalogue } from '../../common/errors.js';
import { apiRoutes, matchRoute } from '../../common/routes.js';
import { limits } from '../../common/limits.js';
import { DEFAULT_CAPACITY } from '../../enclave/memory/admission.js';
import { heapNeeded } from '../../enclave/memory/heap-budget.js';
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

  it('gives each error code named with a status, on any page, the status the catalogue gives it', () => {
    const pages = ['README.md', 'CONTRIBUTING.md', 'deploy/README.md', 'deploy/sealing.md', ...readdirSync(join(repoRoot, 'docs')).map((f) => `docs/${f}`)];
    const types = new Set(Object.values(errorCatalogue).map((spec) => spec.type as string));
    const wrong = pages.flatMap((page) => [...doc(page).matchAll(/\b([1-5]\d\d) `([a-z][a-z_0-9]*_[a-z_0-9]+)`/g)]
      .filter(([, status, code]) => !types.has(code) && (errorCatalogue as Record<string, { status: number }>)[code]?.status !== Number(status))
      .map(([text]) => `${page}: ${text}`));
    expect(wrong).toEqual([]);
  });

  it('states the limits the code enforces', () => {
    const table = section('docs/api.md', 'Limits');
    expect(table).toContain(`${(limits.maxContentChars).toLocaleString('en')} characters`);
    expect(table).toContain(`1–${limits.maxTopK}, default ${limits.defaultTopK}`);
    expect(table).toContain(`1–${limits.maxBatchMemories} memories`);
    expect(table).toContain(`${limits.maxBodyBytes / 1024 / 1024} MiB`);
    expect(table).toContain(`${limits.maxJsonDepth} levels`);
    expect(table).toContain(`1–${limits.maxQueryChars.toLocaleString('en')} characters`);
    expect(table).toContain(`1–${limits.maxTenantIdChars} characters`);
    expect(table).toContain(`≤ ${limits.maxMetadataKeys} keys (≤ ${limits.maxMetadataKeyChars} characters)`);
    expect(table).toContain(`string (≤ ${limits.maxMetadataValueChars} characters)`);
    // The capacity settings' defaults, as the enclave parses an unset value.
    const n = (setting: { parse(raw: undefined): number }) => setting.parse(undefined).toLocaleString('en');
    expect(table).toContain(`${n(enclaveSettings.maxMemoriesPerTenant)} (\`MAX_MEMORIES_PER_TENANT\``);
    expect(table).toContain(`${n(enclaveSettings.maxMemoriesPerKey)} over all its tenants`);
    expect(table).toContain(`${n(enclaveSettings.maxTenants)} tenants, ${n(enclaveSettings.maxMemories)} memories, ${enclaveSettings.maxStoredBytes.parse(undefined) / 1024 ** 3} GiB`);
    expect(table).toContain(`${n(enclaveSettings.maxTermsPerMemory)} per memory`);
    expect(table).toContain(`${n(enclaveSettings.maxTermsPerTenant)} per tenant`);
    expect(table).toContain(`${n(enclaveSettings.maxTerms)} over all tenants`);
  });

  it('lists every API route in the routes table of docs/api.md, and names no route the service does not have', () => {
    const table = section('docs/api.md', 'API');
    const listed = new Set([...table.matchAll(/`(GET|POST|PATCH|DELETE) (\/v1\/[^`?]*)/g)].map(([, method, path]) => `${method} ${path.replace(/\{[a-z_]+}/g, ':id')}`));
    const missing = Object.values(apiRoutes).map((r) => `${r.method} ${r.path.replace(/:[a-z_]+/g, ':id')}`).filter((route) => !listed.has(route));
    expect(missing).toEqual([]);
    // Any page: a method and a /v1 path in code style is a route (api.md's 404 example aside).
    const pages = ['README.md', 'deploy/README.md', ...readdirSync(join(repoRoot, 'docs')).map((f) => `docs/${f}`)];
    const unknown = pages.flatMap((page) => [...doc(page).matchAll(/`(GET|POST|PATCH|DELETE) (\/v1\/[^`?[\s]*)/g)]
      .filter(([, method, path]) => path !== '/v1/nope' && matchRoute(method, path.replace(/\{[a-z_]+}/g, 'x')).kind !== 'route')
      .map(([, method, path]) => `${page}: ${method} ${path}`));
    expect(unknown).toEqual([]);
  });

  it('states the heap the default capacity needs, as the heap budget computes it', () => {
    const mib = Math.ceil(heapNeeded(DEFAULT_CAPACITY) / 1024 ** 2);
    expect(section('docs/configuration.md', 'Authentication and limits')).toContain(`(${mib.toLocaleString('en')} MiB)`);
    expect(doc('deploy/README.md')).toContain(`${mib.toLocaleString('en')} MiB for the defaults`);
  });
});

describe('links between the docs', () => {
  // GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens.
  const anchors = (file: string) => new Set([...doc(file).matchAll(/^#{1,6} (.+)$/gm)]
    .map(([, heading]) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, '').replace(/ /g, '-')));
  const pages = ['README.md', 'CONTRIBUTING.md', 'deploy/README.md', 'deploy/sealing.md', ...readdirSync(join(repoRoot, 'docs')).map((f) => `docs/${f}`)];

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

describe('files and tests the docs name', () => {
  const pages = ['README.md', 'CONTRIBUTING.md', 'deploy/README.md', 'deploy/sealing.md', ...readdirSync(join(repoRoot, 'docs')).map((f) => `docs/${f}`)];
  const TOP = '(?:bench|common|deploy|docs|enclave|gateway|host-log|host-store|placement|protocol|protos|proxy|scripts|sdk|test)';
  // A path in code style, from the repository's root or built (`dist/x/y.js` is `x/y.ts`). The
  // performance log names a file removed since without code style, with the commit that removed it.
  const PATH = new RegExp('`(?:node )?(?:\\./)?(dist/)?(' + TOP + '/[A-Za-z0-9_./-]*[A-Za-z0-9_])`', 'g');
  // Written by a build or a release, not kept in the repository (deploy/README.md says which).
  const generated = (path: string) => /^deploy\/(build\/|base-images\.lock|kmstool\/(sources\.lock|.*Cargo\.lock))/.test(path);
  const exists = (path: string, built: boolean) => {
    if (built) return [/\.js$/, /\.mjs$/].some((ext) => ext.test(path) && existsSync(join(repoRoot, path.replace(ext, '.ts'))));
    return existsSync(join(repoRoot, path));
  };

  it.each(pages)('every repository path %s names in code style exists', (page) => {
    const missing = [...doc(page).matchAll(PATH)]
      .filter(([, built, path]) => !generated(path) && !exists(path, built !== undefined))
      .map(([, built, path]) => `${built ?? ''}${path}`);
    expect(missing).toEqual([]);
  });

  it.each(pages)('every npm script, bin and benchmark %s runs exists', (page) => {
    const pkg = JSON.parse(doc('package.json')) as { scripts: Record<string, string>; bin: Record<string, string> };
    const benchmarks = [...doc('bench/run.ts').matchAll(/^\s+\['([a-z0-9-]+):/gm)].map((m) => m[1]);
    const text = doc(page);
    const unknown = [
      ...[...text.matchAll(/npm run ([a-z0-9:_-]+)/g)].map((m) => m[1]).filter((name) => !(name in pkg.scripts)).map((name) => `npm run ${name}`),
      ...[...text.matchAll(/npx (agent-[a-z-]+)/g)].map((m) => m[1]).filter((name) => !(name in pkg.bin)).map((name) => `npx ${name}`),
      ...[...text.matchAll(/(?:npm run bench --|bench\/run\.js)(?: --quick)? ([a-z]+)/g)].map((m) => m[1]).filter((name) => !benchmarks.some((b) => b.startsWith(name))).map((name) => `bench ${name}`),
    ];
    expect(unknown).toEqual([]);
  });

  it.each(pages)('every test %s quotes by name is in the file it names', (page) => {
    // `test/x.test.ts` ("a test's title", "another…"): each quoted title, up to an ellipsis.
    const unknown: string[] = [];
    for (const [, path, quoted] of doc(page).matchAll(/`(test\/[^`]+\.test\.ts)` \(([^)]*)\)/g)) {
      if (!existsSync(join(repoRoot, path))) continue; // the test above names it
      const source = readFileSync(join(repoRoot, path), 'utf8').replace(/\\'/g, "'").toLowerCase();
      for (const [, title] of quoted.matchAll(/"([^"]+)"/g)) {
        const words = title.replace(/…$/, '').replace(/^…/, '').trim().toLowerCase();
        if (!source.includes(words)) unknown.push(`${path}: "${title}"`);
      }
    }
    expect(unknown).toEqual([]);
  });
});

