import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';

const bin = resolve(import.meta.dirname, '../../dist/scripts/agent-embed.js');

/** Runs the built agent-embed with `input` on stdin; resolves with its exit code and output. */
function run(args: string[], input: string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [bin, ...args], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

describe('agent-embed (spawned, lines piped in)', () => {
  let embedder: Embedder;
  beforeAll(async () => {
    embedder = await loadEmbedder({ name: 'static', modelsDir });
  });
  afterAll(async () => {
    await embedder?.close();
  });

  it('writes one JSON array per line, equal to the enclave embedder\'s vectors, in order', async () => {
    const lines = ['My dog is called Rex', "what is my pet's name?", '', 'Ticket ZX-4471 dogsitter', 'Café naïve'];
    const { code, stdout, stderr } = await run([], `${lines.join('\n')}\n`);
    expect(code, stderr).toBe(0);
    const out = stdout.trimEnd().split('\n').map((line) => JSON.parse(line) as number[]);
    expect(out).toHaveLength(lines.length);
    const expected = await embedder.embed(lines);
    out.forEach((vector, i) => {
      expect(vector).toHaveLength(100);
      vector.forEach((x, d) => expect(Math.abs(x - expected[i][d])).toBeLessThan(1e-6));
    });
    expect(out[2].every((x) => x === 0)).toBe(true); // the empty line
  });

  it('keeps order across many batches and reads a last line without a newline, and CRLF', async () => {
    const lines = Array.from({ length: 450 }, (_, i) => `note ${i}: ${i % 2 ? 'the garden needs water' : 'the invoice is due'}`);
    const { code, stdout } = await run([], lines.join('\r\n'));
    expect(code).toBe(0);
    const out = stdout.trimEnd().split('\n').map((line) => JSON.parse(line) as number[]);
    expect(out).toHaveLength(450);
    const [garden, invoice] = await embedder.embed([lines[1], lines[0]]);
    const close = (a: number[], b: Float32Array) => a.every((x, d) => Math.abs(x - b[d]) < 1e-6);
    out.forEach((vector, i) => expect(close(vector, i % 2 ? garden : invoice), `line ${i}`).toBe(true));
  });

  it('uses EMBEDDING_MODEL and --model, and says which model with --info', async () => {
    const info = await run(['--info'], 'hello\n', { EMBEDDING_MODEL: 'static-sif-100d' });
    expect(info.code).toBe(0);
    expect(JSON.parse(info.stderr)).toEqual({ id: 'static-sif-100d', dimension: 100, sha256: embedder.sha256 });

    const bad = await run(['--model', 'no-such-model'], 'hello\n');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/unknown embedder "no-such-model"/);
    expect(bad.stdout).toBe('');
    const badEnv = await run([], 'hello\n', { EMBEDDING_MODEL: 'no-such-model' });
    expect(badEnv.code).toBe(1);
  });

  it('prints help, refuses unknown options, and writes nothing for empty input', async () => {
    const help = await run(['--help'], '');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: agent-embed/);
    const usage = await run(['--frobnicate'], '');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/Unknown option/);
    const empty = await run([], '');
    expect(empty).toMatchObject({ code: 0, stdout: '' });
  });
});
