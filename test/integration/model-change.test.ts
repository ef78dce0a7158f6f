import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { freePort, startService, type RunningService } from '../helpers/service.js';
import { installTinyBert, sha256 } from '../helpers/tiny-bert.js';
import { startLoneEnclave } from '../helpers/processes.js';

let work: string;
let modelsDir: string;
let dataDir: string;
let svc: RunningService | undefined;
/** What the tiny model's embedder (and attestation) identifies it by: the SHA-256 of its model.json. */
let tinySha256: string;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'model-change-it-'));
  modelsDir = join(work, 'models');
  dataDir = join(work, 'data');
  const { dir } = await installTinyBert(modelsDir, 'tiny-bert');
  tinySha256 = sha256(await readFile(join(dir, 'model.json')));
});
afterAll(async () => {
  await svc?.stop();
  await rm(work, { recursive: true, force: true });
});

const words = ['the', 'cat', 'dog', 'sat', 'on', 'my', 'mat', 'park', 'invoice', 'due', 'friday', 'rex', 'called', 'playing'];
/** Distinct short texts that both models know (the tiny model has a 30-token vocabulary and 16 positions). */
const text = (n: number) => `${words[n % 14]} ${words[(n * 3 + 1) % 14]} ${words[(n * 5 + 2) % 14]} ${words[Math.floor(n / 14) % 14]}`;

interface Stored { id: string; object: 'memory'; tenant_id: string; content: string; metadata: Record<string, unknown>; created_at: number }
let kept: Stored[] = [];
let deleted: Stored[] = [];

/** The enclave's JSON log lines with message `msg` (from this run's output only). */
function logLines(output: string, msg: string): Array<Record<string, any>> {
  return output.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)).filter((l) => l.msg === msg);
}

/**
 * Each kept memory is found by id and, by its own content, among the top results with
 * cosine 1 under the current model (the fused ranking may put a stronger lexical match
 * first); deleted ones stay deleted.
 */
async function expectEveryMemoryFound(baseUrl: string) {
  for (const memory of kept) {
    const byId = await request(baseUrl, 'GET', `/v1/memory/${memory.id}?tenant_id=${memory.tenant_id}`);
    expect(byId.status).toBe(200);
    expect(byId.body).toEqual(memory);
    const byQuery = await request(baseUrl, 'GET', `/v1/memory?tenant_id=${memory.tenant_id}&top_k=5&query=${encodeURIComponent(memory.content)}`);
    expect(byQuery.status).toBe(200);
    const hit = byQuery.body.data.find((d: { id: string }) => d.id === memory.id);
    expect(hit, `${memory.content} not in its own top 5`).toBeDefined();
    expect(hit.scores.vector).toBeCloseTo(1, 4);
  }
  for (const memory of deleted) {
    expect((await request(baseUrl, 'GET', `/v1/memory/${memory.id}?tenant_id=${memory.tenant_id}`)).status).toBe(404);
  }
}

/** Runs the enclave alone on the shared DATA_DIR until it exits; its exit code and output. */
async function enclaveExit(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const enclave = await startLoneEnclave({ DATA_DIR: dataDir, ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, ...env });
  const code = await enclave.exited;
  await enclave.stop();
  return { code, output: enclave.output() };
}

const storeFiles = async () => (await readdir(join(dataDir, 'memory'))).sort();

describe('changing EMBEDDING_MODEL with memories stored', () => {
  it('re-embeds every memory at start, with progress in the log, and serves all of them with the new model', async () => {
    // Stored with the built-in static model...
    svc = await startService({ DATA_DIR: dataDir });
    const added: Stored[] = [];
    for (let n = 0; n < 150; n++) {
      const res = await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: `tenant-${n % 3}`, content: text(n), metadata: { n }, dedupe: false });
      expect(res.status).toBe(200);
      const { event: _event, ...memory } = res.body; // what the add did, beside the memory
      added.push(memory);
    }
    deleted = [added[4], added[77], added[149]];
    for (const memory of deleted) {
      expect((await request(svc.baseUrl, 'DELETE', `/v1/memory/${memory.id}?tenant_id=${memory.tenant_id}`)).status).toBe(200);
    }
    kept = added.filter((m) => !deleted.includes(m));
    await svc.stop();
    svc = undefined;

    // ... then the enclave restarts with an imported transformer model.
    svc = await startService({ DATA_DIR: dataDir, EMBEDDING_MODEL: 'tiny-bert', MODELS_DIR: modelsDir });
    const output = svc.output();
    expect(logLines(output, 'embedding model changed: re-embedding every stored memory')).toEqual([
      expect.objectContaining({ from: expect.stringMatching(/^static-sif-100d \(100-d, sha256 [0-9a-f]{12}\)$/), to: `tiny-bert (8-d, sha256 ${tinySha256.slice(0, 12)})`, memories: 147 }),
    ]);
    const progress = logLines(output, 're-embedding memories with tiny-bert');
    expect(progress.length).toBeGreaterThanOrEqual(3);
    expect(progress.every((l) => l.total === 147)).toBe(true);
    expect(progress[0]).toMatchObject({ done: 0, percent: 0 });
    expect(progress.at(-1)).toMatchObject({ done: 147, percent: 100 });
    expect(logLines(output, 're-embedded all memories')).toEqual([expect.objectContaining({ model: 'tiny-bert', memories: 147 })]);
    expect(logLines(output, 'memory store rewritten under the new embedding model')).toHaveLength(1);
    // Re-embedded and rewritten before the enclave listened.
    expect(output.indexOf('memory store rewritten')).toBeLessThan(output.indexOf('enclave listening'));
    expect(output).toMatch(/"embedding":"tiny-bert","dim":8/);
    expect(await storeFiles()).toEqual(['log-000000000002.sealed', 'shards.sealed', 'snapshot.sealed']);

    await expectEveryMemoryFound(svc.baseUrl);
    await svc.stop();
    svc = undefined;
  });

  it('with ON_MODEL_CHANGE=refuse, exits non-zero naming both models, and leaves the store as it was', async () => {
    const before = await Promise.all((await storeFiles()).map((name) => readFile(join(dataDir, 'memory', name))));
    const refused = await enclaveExit({ EMBEDDING_MODEL: 'static', ON_MODEL_CHANGE: 'refuse' });
    expect(refused.code).toBe(1);
    expect(refused.output).toContain(
      `enclave: refusing to start: memory/snapshot.sealed holds vectors from embedding model tiny-bert (8-d, sha256 ${tinySha256.slice(0, 12)})`,
    );
    expect(refused.output).toMatch(
      /but this enclave runs static-sif-100d \(100-d, sha256 [0-9a-f]{12}\); refusing to mix vectors of two models: start with EMBEDDING_MODEL=tiny-bert \(the same model files\), or set ON_MODEL_CHANGE=reembed/,
    );
    expect(refused.output).not.toContain('re-embedding memories');
    const after = await Promise.all((await storeFiles()).map((name) => readFile(join(dataDir, 'memory', name))));
    expect(after).toEqual(before);
  });

  it('opens the rewritten store with the new model without re-embedding again', async () => {
    svc = await startService({ DATA_DIR: dataDir, EMBEDDING_MODEL: 'tiny-bert', MODELS_DIR: modelsDir, ON_MODEL_CHANGE: 'refuse' });
    expect(logLines(svc.output(), 'memories recovered')).toEqual([expect.not.objectContaining({ modelChange: expect.anything() })]);
    expect(svc.output()).not.toContain('re-embedding');
    await expectEveryMemoryFound(svc.baseUrl);
  });
});
