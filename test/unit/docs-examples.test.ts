import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../common/paths.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { startService, type RunningService } from '../helpers/service.js';

// docs/api.md's memory examples are one sequence a reader runs in order on a fresh
// service. Every ```sh block after a `<!-- docs-test: run -->` line runs here, in the
// order of the page, as one bash script (so $REX and $SEATS carry over), and each prints
// what the block shown right after it says: same shape, same stable values (content,
// tenant, metadata, counts, order); timestamps and scores are compared by kind only, and
// ids by the order they first appear in (so a GET, PATCH or DELETE must name the memory
// the docs say it names).
//
// After a change of what the examples print (a score's scale, a new field), refresh the page
// from a real run: DOCS_WRITE=1 npx vitest run test/unit/docs-examples.test.ts writes each
// block with what its script printed, then check the diff of docs/api.md.

const MARKER = '<!-- docs-test: run -->';
const SEPARATOR = '@@docs-test: next block@@';

interface Example { line: number; script: string; shown: string; lang: string; shownLines: [number, number] }

function examples(markdown: string): Example[] {
  const lines = markdown.split('\n');
  const found: Example[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== MARKER) continue;
    const fence = (at: number, lang?: string) => {
      const open = lines[at] ?? '';
      if (!open.startsWith('```') || (lang !== undefined && open !== '```' + lang)) throw new Error(`docs/api.md:${at + 1}: expected a \`\`\`${lang ?? ''} block, found ${JSON.stringify(open)}`);
      const close = lines.indexOf('```', at + 1);
      return { lang: open.slice(3), body: lines.slice(at + 1, close).join('\n'), end: close };
    };
    const script = fence(i + 1, 'sh');
    const shown = fence(script.end + 1);
    found.push({ line: i + 2, script: script.body, shown: shown.body, lang: shown.lang, shownLines: [script.end + 2, shown.end] });
  }
  return found;
}

const ID = /^(mem|resp|msg|chatcmpl)_[0-9a-f]+$/;
const VARYING = new Set(['created_at', 'updated_at', 'created', 'score', 'vector', 'lexical', 'fused', 'at', 'deleted_at', 'state', 'store', 'signature', 'public_key']);

/** The parts of an answer that do not change from run to run; `ids` numbers the ids seen so far. */
function stable(value: unknown, ids: Map<string, string>, key = ''): unknown {
  if (VARYING.has(key)) return value === null ? null : `<${typeof value}>`;
  if (typeof value === 'string' && ID.test(value)) {
    if (!ids.has(value)) ids.set(value, `<${value.split('_')[0]} #${ids.size + 1}>`);
    return ids.get(value);
  }
  if (Array.isArray(value)) return value.map((v) => stable(v, ids));
  if (value && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    // occurred_at defaults to the time of storing (which varies); one the docs give is compared exactly.
    const storedAt = typeof record.created_at === 'number' ? new Date(record.created_at * 1000).toISOString() : undefined;
    return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, k === 'occurred_at' && v === storedAt ? '<when stored>' : stable(v, ids, k)]));
  }
  return value;
}

/** `curl -si` output: the status line, the x-tee-* header names, and the JSON body. */
function withHeaders(text: string, ids: Map<string, string>) {
  const [head, body] = text.replace(/\r/g, '').split('\n\n');
  const lines = head.split('\n');
  const tee = lines.slice(1).map((l) => l.split(':')[0].toLowerCase()).filter((name) => name.startsWith('x-tee-')).sort();
  return { status: lines[0], tee, body: stable(JSON.parse(body.trim()), ids) };
}

const compare = (lang: string, text: string, ids: Map<string, string>) => (lang === 'json' ? stable(JSON.parse(text.trim()), ids) : withHeaders(text, ids));

describe('docs/api.md: the memory examples, run in order on a fresh service', () => {
  let service: RunningService;
  // A model on loopback for the extraction example: with no script for the model it is asked
  // for, it extracts by rule (test/helpers/model-server.ts). Chat examples name local-memory.
  let model: ModelServer;
  beforeAll(async () => {
    model = await startModelServer();
    service = await startService({ MODEL_BASE_URL: model.url });
  });
  afterAll(async () => {
    await service?.stop();
    await model?.close();
  });

  it('print what the docs show after each of them', async () => {
    const page = readFileSync(join(repoRoot, 'docs/api.md'), 'utf8');
    const steps = examples(page);
    expect(steps.length, 'marked examples in docs/api.md').toBeGreaterThanOrEqual(10);
    const script = ['set -eo pipefail', ...steps.map((s) => `${s.script.replaceAll('http://127.0.0.1:8080', service.baseUrl)}\necho; echo '${SEPARATOR}'`)].join('\n');
    let output: string;
    try {
      // Not execFileSync: the model server answering the extraction example runs in this process.
      output = (await promisify(execFile)('bash', ['-c', script], { encoding: 'utf8', timeout: 20_000, cwd: repoRoot })).stdout;
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string };
      throw new Error(`the docs' examples failed as a script:\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
    }
    const printed = output.split(`${SEPARATOR}\n`).slice(0, steps.length);
    expect(printed.length).toBe(steps.length);
    if (process.env.DOCS_WRITE === '1') {
      const lines = page.split('\n');
      // From the last block up, so earlier line numbers stay right.
      for (let i = steps.length - 1; i >= 0; i--) {
        const [from, to] = steps[i].shownLines;
        lines.splice(from, to - from, ...printed[i].replace(/\r/g, '').replace(/\n+$/, '').split('\n'));
      }
      writeFileSync(join(repoRoot, 'docs/api.md'), lines.join('\n'));
    }
    const printedIds = new Map<string, string>();
    const shownIds = new Map<string, string>();
    steps.forEach((step, i) => {
      expect(compare(step.lang, printed[i], printedIds), `docs/api.md:${step.line}: ${step.script.split('\n')[0]}\nprinted: ${printed[i]}`).toEqual(compare(step.lang, step.shown, shownIds));
    });
  });
});
