import { createReadStream, readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type TeeClient } from '../../sdk/client.js';
import { exportKeyPair, exportLines, fetchExport, importMemories, jsonLines } from '../../sdk/memory-export.js';
import { SealedStreamError } from '../../protocol/sealed-stream.js';
import { request } from '../helpers/http.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * Issue 37 (export and import): a tenant's memories, with their history (and the histories of
 * those it deleted), exported as JSON
 * Lines sealed to the caller's X25519 key (the host relaying or storing the file sees sealed
 * frames only), signed by the enclave, and imported again with ids kept: from that file, from
 * plain JSON Lines, and from a Mem0 export. Through both processes, and after a restart.
 */
let svc: RunningService;
let client: TeeClient;
let dir: string;
const fileOf = (path: string) => createReadStream(path) as AsyncIterable<Uint8Array>;
async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}
const history = async (tenant: string, id: string) => (await request(svc.baseUrl, 'GET', `/v1/memory/${id}/history?tenant_id=${tenant}`)).body as { tenant_id: string; deleted: boolean; data: Array<{ event: string; at: number; memory: { content: string } | null }> };

beforeAll(async () => {
  svc = await startService();
  client = await connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem: readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8') });
  dir = mkdtempSync(join(tmpdir(), 'agent-export-'));
});
afterAll(async () => {
  await svc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('export and import', () => {
  const ids: string[] = [];
  const keys = exportKeyPair();
  let file: string;

  it('exports the tenant sealed to the caller\'s key: signed, opaque to the host, opened only with the secret key', async () => {
    for (let i = 0; i < 250; i++) ids.push((await client.call<{ id: string }>('POST', '/v1/memory', { tenant_id: 'exp', content: `export memory ${i} about the lighthouse keeper`, metadata: { n: i } })).body.id);
    await client.call('PATCH', `/v1/memory/${ids[0]}?tenant_id=exp`, { content: 'the lighthouse keeper moved to Skye' });

    const transcript = await fetchExport(client, svc.baseUrl, 'exp', keys.publicKey);
    file = join(dir, 'exp.export');
    writeFileSync(file, transcript);
    // The frames are base64 text, where a short word can occur by chance: look for the phrases in
    // the frames' bytes, and for any word at all in what is not a frame.
    const text = Buffer.from(transcript).toString('latin1');
    const frames = Buffer.concat([...text.matchAll(/^data: ([A-Za-z0-9+/=]+)$/gm)].map((m) => Buffer.from(m[1], 'base64')));
    expect(frames.length).toBeGreaterThan(250 * 40);
    for (const phrase of ['lighthouse keeper', 'export memory 1', 'moved to Skye']) expect(frames.includes(phrase)).toBe(false);
    expect(text.replace(/^data: [A-Za-z0-9+/=]+$/gm, '')).not.toMatch(/lighthouse|export memory|Skye/);

    const lines = await collect(exportLines(fileOf(file), keys.secretKey)) as Array<{ type: string; memory: { id: string; content: string }; history: Array<{ event: string }> }>;
    expect(lines.map((l) => l.memory.id)).toEqual(ids);
    expect(lines[0]).toMatchObject({ type: 'memory', memory: { content: 'the lighthouse keeper moved to Skye' }, history: [{ event: 'add' }, { event: 'update' }] });
    // Another key opens nothing; a cut file is refused.
    await expect(collect(exportLines(fileOf(file), exportKeyPair().secretKey))).rejects.toBeInstanceOf(SealedStreamError);
    writeFileSync(join(dir, 'cut.export'), transcript.subarray(0, Math.floor(transcript.length / 2)));
    await expect(collect(exportLines(fileOf(join(dir, 'cut.export')), keys.secretKey))).rejects.toThrow();
  });

  it('imports the file into another tenant with ids and history kept; again, nothing twice', async () => {
    const result = await importMemories(client, 'exp-copy', exportLines(fileOf(file), keys.secretKey));
    expect(result).toEqual({ imported: 250, deleted: 0, skipped: [] });
    for (const id of [ids[0], ids[1], ids[249]]) {
      const [a, b] = await Promise.all([request(svc.baseUrl, 'GET', `/v1/memory/${id}?tenant_id=exp`), request(svc.baseUrl, 'GET', `/v1/memory/${id}?tenant_id=exp-copy`)]);
      expect(b.body).toEqual({ ...a.body, tenant_id: 'exp-copy' });
    }
    const [original, copy] = [await history('exp', ids[0]), await history('exp-copy', ids[0])];
    expect(copy.data.map((v) => [v.event, v.at, v.memory?.content])).toEqual(original.data.map((v) => [v.event, v.at, v.memory?.content]));
    const found = await client.call<{ data: Array<{ id: string }> }>('POST', '/v1/memory/search', { tenant_id: 'exp-copy', query: 'keeper moved to Skye', top_k: 1 });
    expect(found.body.data[0].id).toBe(ids[0]);
    expect((await importMemories(client, 'exp-copy', exportLines(fileOf(file), keys.secretKey))).imported).toBe(0);
  });

  const gone: string[] = [];
  it('exports what is kept of deleted memories (history, no content) and imports it with ids kept; again, nothing twice', async () => {
    const kept = (await client.call<{ id: string }>('POST', '/v1/memory', { tenant_id: 'del', content: 'the harbour master keeps the ledger' })).body.id;
    for (const content of ['the ferry leaves at dawn from pier four', 'the harbour fee is paid in March']) {
      gone.push((await client.call<{ id: string }>('POST', '/v1/memory', { tenant_id: 'del', content })).body.id);
    }
    await client.call('PATCH', `/v1/memory/${gone[0]}?tenant_id=del`, { content: 'the ferry leaves at noon from pier four' });
    for (const id of gone) expect((await client.call('DELETE', `/v1/memory/${id}?tenant_id=del`)).status).toBe(200);

    const file = join(dir, 'del.export');
    writeFileSync(file, await fetchExport(client, svc.baseUrl, 'del', keys.publicKey));
    const lines = await collect(exportLines(fileOf(file), keys.secretKey)) as Array<Record<string, unknown>>;
    expect(lines.map((l) => [l.type, l.type === 'memory' ? (l.memory as { id: string }).id : l.id])).toEqual([['memory', kept], ['deleted', gone[0]], ['deleted', gone[1]]]);
    expect(lines[1].history).toEqual((await history('del', gone[0])).data.map(({ event, at }) => expect.objectContaining({ event, at })));
    expect(JSON.stringify(lines.slice(1))).not.toMatch(/ferry|harbour|pier/);

    expect(await importMemories(client, 'del-copy', exportLines(fileOf(file), keys.secretKey))).toEqual({ imported: 1, deleted: 2, skipped: [] });
    for (const id of gone) {
      const [a, b] = await Promise.all([history('del', id), history('del-copy', id)]);
      expect(b).toEqual({ ...a, tenant_id: 'del-copy' });
      expect(b).toMatchObject({ deleted: true, data: [{ event: 'add', memory: null }, ...(id === gone[0] ? [{ event: 'update', memory: null }] : []), { event: 'delete', memory: null }] });
      expect((await request(svc.baseUrl, 'GET', `/v1/memory/${id}?tenant_id=del-copy`)).status).toBe(404);
    }
    expect(await importMemories(client, 'del-copy', exportLines(fileOf(file), keys.secretKey))).toEqual({ imported: 0, deleted: 0, skipped: [kept, ...gone] });
    // A deleted line is checked too: one whose history does not end with its delete refuses its call.
    const bad = await client.sealedCall<{ error: { message: string } }>('POST', '/v1/memory/import', { tenant_id: 'del-copy', memories: [{ type: 'deleted', id: 'x-1', history: [{ event: 'add', at: 1, key_id: null, extracted: false }] }] });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/memories\.0/);
  });

  it('imports plain JSON Lines and a Mem0 export (a JSON array), ids kept, and all of it survives a restart', async () => {
    const plain = '{"type":"memory","memory":{"id":"note-1","content":"plain line memory about tides","metadata":{"src":"jsonl"},"created_at":1700000000}}\n';
    expect(await importMemories(client, 'imp', jsonLines((async function* () { yield Buffer.from(plain); })()))).toEqual({ imported: 1, deleted: 0, skipped: [] });
    const mem0 = [
      { id: '0b4ec5e8-3c5d-4f3f-9a57-6a3f2c1d9e10', memory: 'Likes hiking in the Alps', metadata: { category: 'hobby' }, created_at: '2024-07-20T01:30:36.275141-07:00', updated_at: '2024-07-21T10:00:00-07:00', user_id: 'alice', hash: 'abc' },
      { id: '5c1f0a2b-1111-4e2a-8c3d-000000000002', memory: 'Allergic to peanuts', metadata: null, created_at: '2024-07-20T01:31:00-07:00' },
    ];
    expect(await importMemories(client, 'imp', mem0)).toEqual({ imported: 2, deleted: 0, skipped: [] });
    const hiking = (await request(svc.baseUrl, 'GET', `/v1/memory/${mem0[0].id}?tenant_id=imp`)).body;
    expect(hiking).toMatchObject({ id: mem0[0].id, content: 'Likes hiking in the Alps', metadata: { category: 'hobby' }, created_at: Math.floor(Date.parse(mem0[0].created_at) / 1000), updated_at: Math.floor(Date.parse(mem0[0].updated_at!) / 1000) });
    // A bad item refuses its batch, naming it; nothing of the batch is stored.
    const bad = await client.sealedCall<{ error: { message: string } }>('POST', '/v1/memory/import', { tenant_id: 'imp', memories: [{ id: 'ok-1', memory: 'fine' }, { id: 'has/slash', memory: 'no' }] });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/memories\.1/);
    expect((await request(svc.baseUrl, 'GET', '/v1/memory/ok-1?tenant_id=imp')).status).toBe(404);

    const before = await history('exp-copy', ids[0]);
    const deletedBefore = await history('del-copy', gone[0]);
    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    expect(await history('exp-copy', ids[0])).toEqual(before);
    expect(await history('del-copy', gone[0])).toEqual(deletedBefore);
    expect((await request(svc.baseUrl, 'GET', `/v1/memory/${mem0[1].id}?tenant_id=imp`)).body.content).toBe('Allergic to peanuts');
    expect((await request(svc.baseUrl, 'GET', '/v1/memory/note-1?tenant_id=imp')).body.metadata).toEqual({ src: 'jsonl' });
  });
});
