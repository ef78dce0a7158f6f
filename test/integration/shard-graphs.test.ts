/**
 * A restarted enclave opens a large tenant's HNSW graph as saved with the last snapshot
 * (storage/graph-file.ts) instead of inserting every vector again, as real processes: the
 * host store, the enclave and the proxy (npm start's). What it answers is what it answered
 * before it was killed (ids and scores), after a tail of adds, updates and deletes; and a
 * graph blob the host altered or swapped is refused (a warn line) and the index rebuilt,
 * answering the same scores.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryText, questionText } from '../../bench/corpus.js';
import { request } from '../helpers/http.js';
import { flipByte, frameSpans } from '../helpers/sealed-files.js';
import { startService, waitFor, type RunningService } from '../helpers/service.js';

let svc: RunningService;
/** Above DEFAULT_TIERS.promoteAbove (4,096): the tenant gets an HNSW graph. */
const BIG = 4_200;
const memoryDir = () => join(svc.dataDir, 'memory');
const graphFiles = () => readdirSync(memoryDir()).filter((f) => f.startsWith('graph-')).sort();
const graphsSaved = () => svc.output().split('vector graphs saved with the snapshot').length - 1;

/** The last "memories recovered" line of the enclave's log, parsed. */
function lastRecovery(): { graphs?: { restored: number; refused?: string } } {
  const lines = svc.output().split('\n').filter((line) => line.includes('"memories recovered"'));
  return JSON.parse(lines[lines.length - 1]) as { graphs?: { restored: number; refused?: string } };
}

/** Twenty questions' top ten, ids and scores. */
async function answers(): Promise<string[]> {
  const out: string[] = [];
  for (let q = 0; q < 20; q++) {
    const res = await request(svc.baseUrl, 'POST', '/v1/memory/search', { tenant_id: 'big', query: questionText(q), top_k: 10 });
    expect(res.status, res.text).toBe(200);
    out.push((res.body.data as Array<{ id: string; score: number }>).map((hit) => `${hit.id}:${hit.score.toFixed(6)}`).join(' '));
  }
  return out;
}

/** Ten large memories of another tenant: the log grows to a compaction quickly. */
async function fill(i: number): Promise<void> {
  const memories = Array.from({ length: 10 }, (_, j) => ({ tenant_id: 'filler', content: `filler ${i}-${j} ${'many short words to fill the log '.repeat(900)}`, dedupe: false }));
  const res = await request(svc.baseUrl, 'POST', '/v1/memory', { memories });
  expect(res.status, res.text).toBe(200);
}

/**
 * The scores alone: a rebuilt graph (other insertion order) may pick other members of a tie,
 * and the corpus repeats texts, so ties are common; the restored graph must match ids too.
 */
const scores = (ranked: string[]) => ranked.map((line) => line.split(' ').map((hit) => hit.split(':')[1]).join(' '));

async function restart(): Promise<void> {
  await svc.killEnclave('SIGKILL');
  await svc.startEnclave();
}

let expected: string[];

beforeAll(async () => {
  svc = await startService({ SNAPSHOT_LOG_BYTES: '65536' });
  for (let i = 0; i < BIG; i += 100) {
    const memories = Array.from({ length: 100 }, (_, j) => ({ tenant_id: 'big', content: memoryText(i + j), dedupe: false }));
    const res = await request(svc.baseUrl, 'POST', '/v1/memory', { memories });
    expect(res.status, res.text).toBe(200);
  }
  // Other tenants' writes until a compaction runs with the large tenant's graph in memory.
  for (let i = 0; graphsSaved() === 0; i++) await fill(i);
  await waitFor(async () => graphFiles().length === 1 && !readdirSync(memoryDir()).some((f) => f.endsWith('.tmp')), 30_000);
  // The log's tail after that snapshot: adds, updates and deletes of the large tenant.
  const page = await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=big&limit=20');
  const ids = (page.body.data as Array<{ id: string }>).map((m) => m.id);
  for (let i = 0; i < 10; i++) expect((await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: 'big', content: memoryText(50_000 + i) })).status).toBe(200);
  for (const id of ids.slice(0, 5)) expect((await request(svc.baseUrl, 'PATCH', `/v1/memory/${id}?tenant_id=big`, { content: memoryText(60_000) + ' (changed)' })).status).toBe(200);
  for (const id of ids.slice(5, 10)) expect((await request(svc.baseUrl, 'DELETE', `/v1/memory/${id}?tenant_id=big`)).status).toBe(200);
  expected = await answers();
}, 900_000);
afterAll(async () => {
  await svc?.stop();
});

describe('a large tenant\'s graph saved with the snapshot', () => {
  it('is opened by a restarted enclave, which answers as before it was killed', async () => {
    await restart();
    expect(lastRecovery().graphs).toEqual({ restored: 1 });
    expect(await answers()).toEqual(expected);
  }, 300_000);

  it('is refused when the host alters it or puts another snapshot\'s in its place; the index is rebuilt and answers the same', async () => {
    const [name] = graphFiles();
    const path = join(memoryDir(), name);
    const good = readFileSync(path);
    flipByte(path, frameSpans(good)[2][0] + 50);
    await restart();
    expect(lastRecovery().graphs).toMatchObject({ restored: 0, refused: expect.stringMatching(/does not authenticate/) });
    expect(svc.output()).toContain('the saved vector graphs were refused: rebuilding every index from the snapshot');
    expect(scores(await answers())).toEqual(scores(expected));

    // Another snapshot's graph (the store's own, kept aside) under the next one's name.
    writeFileSync(path, good);
    for (let i = 1_000; graphFiles()[0] === name; i++) await fill(i);
    await waitFor(async () => graphFiles().length === 1 && !readdirSync(memoryDir()).some((f) => f.endsWith('.tmp')), 30_000);
    const after = await answers();
    writeFileSync(join(memoryDir(), graphFiles()[0]), good);
    await restart();
    expect(lastRecovery().graphs).toMatchObject({ restored: 0, refused: expect.stringMatching(/saved with another snapshot/) });
    expect(scores(await answers())).toEqual(scores(after));
  }, 600_000);
});
