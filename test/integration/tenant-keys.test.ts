import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type TeeResponse } from '../../sdk/client.js';
import { StateTracker } from '../../protocol/response-signature.js';
import { deriveStorageKey, readSealedFile } from '../../enclave/storage/sealed-file.js';
import { SIMULATED_KEY_FILE } from '../../enclave/storage/sealing-key.js';
import { decodePayload } from '../../enclave/storage/payloads.js';
import { deriveTenantKey, openForTenant } from '../../enclave/storage/tenant-keys.js';
import { startGateway } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { filesUnder, occurrences } from '../helpers/key-scan.js';
import { startService, waitFor, type RunningService } from '../helpers/service.js';

/**
 * Issue 37 (keys the user holds), performed as the host would: it keeps a copy of every blob
 * the enclave ever gave it, after every write, and holds the sealing key (simulated: a file in
 * its store, the strongest host there is). A tenant that sends a tenant key inside its sealed
 * calls has its memories sealed under a key derived from it: no copy, opened with the sealing
 * key, holds any of its content, scopes or changes (only its tenant id), and a fresh enclave
 * started on the copies with the same sealing key cannot read or search it, nor carries it
 * anywhere readable through a compaction, until a call brings the key.
 */
const TENANT = 'vault';
const needles = ['the safe combination is 4711-HERON', 'the spare key is under the blue heron', 'heron-owner-77', 'cellar-shelf-9', 'first draft of the HERON plan'];
const [combination, spare, userId, metaValue, firstDraft] = needles;
const plainFiller = (i: number) => `plain filler ${i} about the ordinary weather ${'w'.repeat(300)}`;

let svc: RunningService;
let fresh: RunningService | undefined;
let dir: string;
let keyFile: string;
let copies = 0;
/** A copy of every blob the host holds now; again if a compaction removed a file while it copied (as a host's backup would). */
const keep = () => {
  const to = join(dir, 'kept', String(copies++));
  for (let attempt = 1; ; attempt++) {
    try {
      return cpSync(svc.dataDir, to, { recursive: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || attempt === 5) throw error;
      rmSync(to, { recursive: true, force: true });
    }
  }
};
const rootOf = (s: RunningService) => readFileSync(join(s.dataDir, 'simulated-root.pem'), 'utf8');
const client = (s: RunningService, tenantKeyFile?: string) =>
  connect({ insecureSkipPcrPinning: true, baseUrl: s.baseUrl, rootPem: rootOf(s), stateTracker: new StateTracker(), ...(tenantKeyFile ? { tenantKeyFile } : {}) });
const snapshots = (s: RunningService) => s.output().split('memory snapshot written; older logs deleted').length - 1;
const code = (r: TeeResponse | Awaited<ReturnType<typeof request>>) => (r.body as { error?: { code?: string } }).error?.code;

/** Every payload of every sealed blob of a data dir, opened with its sealing key, by file. */
async function openedPayloads(dataDir: string): Promise<Array<{ where: string; payload: Buffer }>> {
  const key = deriveStorageKey(Buffer.from((JSON.parse(readFileSync(join(dataDir, SIMULATED_KEY_FILE), 'utf8')) as { key: string }).key, 'base64'));
  const out: Array<{ where: string; payload: Buffer }> = [];
  // The store's snapshot and segments (memory/shards.sealed holds the shard count and store ids, nothing of a tenant).
  for (const name of readdirSync(join(dataDir, 'memory')).filter((n) => /^(snapshot|log-\d+)\.sealed$/.test(n))) {
    const opened = await readSealedFile(readFileSync(join(dataDir, 'memory', name)), name.startsWith('snapshot') ? 'snapshot' : 'log', key, name, { allowTail: true });
    opened.payloads.forEach((payload, i) => out.push({ where: `${dataDir}/memory/${name} frame ${i}`, payload: Buffer.from(payload) }));
  }
  return out;
}

/** What every copy the host kept tells a holder of the sealing key about the tenant: content found, and entries of it readable as changes. */
async function hostReads(dataDirs: string[]): Promise<{ found: string[]; readable: string[]; sealed: number; plainFound: boolean }> {
  const found: string[] = [];
  const readable: string[] = [];
  let sealed = 0;
  let plainFound = false;
  for (const dataDir of dataDirs) {
    for (const { where, payload } of await openedPayloads(dataDir)) {
      for (const needle of needles) if (occurrences({ [where]: payload }, Buffer.from(needle)).length > 0) found.push(`${needle} in ${where}`);
      if (payload.includes('ordinary weather')) plainFound = true;
      const p = decodePayload(payload, where);
      if (p.type === 'sealed' && p.tenant_id === TENANT) sealed++;
      if (p.type !== 'event') continue;
      const tenant = p.event.type === 'delete' || p.event.type === 'tombstone' ? p.event.tenant_id : p.event.record.tenant_id;
      if (tenant === TENANT) readable.push(`${p.event.type} in ${where}`);
    }
  }
  return { found, readable, sealed, plainFound };
}
const keptDirs = () => readdirSync(join(dir, 'kept')).map((n) => join(dir, 'kept', n));

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-tenant-keys-'));
  keyFile = join(dir, 'tenant.key');
  writeFileSync(keyFile, randomBytes(32));
  writeFileSync(join(dir, 'wrong.key'), randomBytes(32));
  svc = await startService({ SNAPSHOT_LOG_BYTES: '16384' });
});
afterAll(async () => {
  await svc?.stop();
  await fresh?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('a tenant sealed under a key its client holds', () => {
  it('is written so that no copy the host keeps, opened with the sealing key, holds anything of it but its id', async () => {
    const owner = await client(svc, keyFile);
    const plain = async (i: number) => expect((await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: 'plain', content: plainFiller(i) })).status).toBe(200);
    await plain(0);
    keep();
    // The first sealed call with the key, on a tenant with no memories, turns the key on.
    const first = await owner.sealedCall<{ id: string }>('POST', '/v1/memory', { tenant_id: TENANT, content: firstDraft, user_id: userId, metadata: { where: metaValue } });
    expect(first.status).toBe(200);
    keep();
    const draft = first.body.id;
    expect((await owner.sealedCall('PATCH', `/v1/memory/${draft}?tenant_id=${TENANT}`, { content: combination })).status).toBe(200);
    keep();
    const gone = (await owner.sealedCall<{ id: string }>('POST', '/v1/memory', { tenant_id: TENANT, content: spare, user_id: userId, dedupe: false })).body.id;
    keep();
    expect((await owner.sealedCall('DELETE', `/v1/memory/${gone}?tenant_id=${TENANT}`)).status).toBe(200);
    keep();
    expect((await owner.sealedCall('POST', '/v1/memory', { tenant_id: TENANT, content: spare, user_id: userId, dedupe: false })).status).toBe(200);
    keep();
    // Compactions while the tenant is open: its memories, history and tombstones go into snapshots, sealed.
    for (let i = 1; snapshots(svc) < 2; i++) {
      await plain(i);
      keep();
    }
    await waitFor(async () => !readdirSync(join(svc.dataDir, 'memory')).some((f) => f.endsWith('.tmp')), 30_000);
    keep();
    const search = await owner.sealedCall<{ data: Array<{ content: string }> }>('GET', `/v1/memory?tenant_id=${TENANT}&query=${encodeURIComponent('safe combination')}`);
    expect(search.body.data[0]).toMatchObject({ content: combination });

    // Neither the secret nor the key derived from it is in any file the host kept (opened with the sealing key or not) or in the logs.
    const secret = readFileSync(keyFile);
    const derived = deriveTenantKey(secret, search.store, TENANT);
    const everything: Record<string, Buffer> = { 'enclave, proxy and host store output': Buffer.from(svc.output()) };
    for (const kept of keptDirs()) {
      for (const [name, bytes] of Object.entries(filesUnder(kept))) everything[`${kept}/${name}`] = bytes;
      for (const { where, payload } of await openedPayloads(kept)) everything[`${where} (opened)`] = payload;
    }
    expect(occurrences(everything, secret)).toEqual([]);
    expect(occurrences(everything, derived)).toEqual([]);
    // (That is the key: it opens the tenant's entries, so the scan looked for the right bytes.)
    // Its payload as decoded: a sealed call's first change carries its replay id in front (payloads.ts 0x0c).
    const entry = (await openedPayloads(keptDirs()[1])).map(({ payload }) => decodePayload(payload, 'entry')).flatMap((p) => (p.type === 'sealed' ? [p.payload] : []))[0];
    expect(openForTenant(entry, derived)).toBeDefined();
    expect(openForTenant(entry, deriveTenantKey(randomBytes(32), search.store, TENANT))).toBeUndefined();

    const read = await hostReads(keptDirs());
    expect(read.found).toEqual([]);
    expect(read.readable).toEqual([]);
    // The scan does see plain tenants' content (so it can fail), and the tenant's entries are there, sealed.
    expect(read.plainFound).toBe(true);
    expect(read.sealed).toBeGreaterThanOrEqual(6);
  });

  it('refuses plain calls, sealed calls without the key and with another key, and a key sent in a plain header; agent-gateway --tenant-key-file brings it', async () => {
    const plainList = await request(svc.baseUrl, 'GET', `/v1/memory?tenant_id=${TENANT}`);
    expect([plainList.status, code(plainList)]).toEqual([423, 'tenant_locked']);
    const plainAdd = await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: TENANT, content: 'a plain add' });
    expect([plainAdd.status, code(plainAdd)]).toEqual([423, 'tenant_locked']);
    const noKey = await (await client(svc)).sealedCall('GET', `/v1/memory?tenant_id=${TENANT}&query=combination`);
    expect([noKey.status, code(noKey)]).toEqual([423, 'tenant_locked']);
    const wrong = await (await client(svc, join(dir, 'wrong.key'))).sealedCall('GET', `/v1/memory?tenant_id=${TENANT}&query=combination`);
    expect([wrong.status, code(wrong)]).toEqual([403, 'wrong_tenant_key']);
    expect(JSON.stringify(wrong.body)).not.toMatch(/HERON|heron/);
    const inPlain = await request(svc.baseUrl, 'GET', `/v1/memory?tenant_id=${TENANT}`, undefined, { 'x-tenant-key': readFileSync(keyFile).toString('base64') });
    expect([inPlain.status, code(inPlain)]).toEqual([400, 'tenant_key_in_plain']);
    // An unmodified client through agent-gateway --tenant-key-file: the gateway seals the key into every call.
    const gateway = await startGateway(['--service', svc.baseUrl, '--root', join(svc.dataDir, 'simulated-root.pem'), '--insecure-dev', '--state-file', join(dir, 'gw-state.json'), '--tenant-key-file', keyFile]);
    try {
      const through = await request(gateway.url, 'POST', '/v1/memory/search', { tenant_id: TENANT, query: 'safe combination', top_k: 1 });
      expect([through.status, (through.body as { data: Array<{ content: string }> }).data[0].content]).toEqual([200, combination]);
    } finally {
      await gateway.stop();
    }
    // A key sent for a tenant whose memories were stored without one turns nothing on.
    const late = await (await client(svc, keyFile)).sealedCall('GET', '/v1/memory?tenant_id=plain');
    expect([late.status, code(late)]).toEqual([409, 'tenant_key_not_enabled']);
  });

  it('stays unreadable to a fresh enclave on the host\'s copies, and through a compaction there, while no call brings the key', async () => {
    const last = keptDirs().sort((a, b) => Number(a.split('/').pop()) - Number(b.split('/').pop())).at(-1)!;
    const copy = join(dir, 'fresh');
    cpSync(last, copy, { recursive: true });
    await svc.stop();
    fresh = await startService({ DATA_DIR: copy, SNAPSHOT_LOG_BYTES: '16384' });
    const s = fresh;
    // Locked: nothing of it is loaded, so nothing can be read or searched, by any call without the key.
    const search = await request(s.baseUrl, 'POST', '/v1/memory/search', { tenant_id: TENANT, query: 'safe combination' });
    expect([search.status, code(search)]).toEqual([423, 'tenant_locked']);
    // Nor deleted: erasing a keyed tenant takes its key too (docs/api.md, Tenant keys).
    const erase = await request(s.baseUrl, 'DELETE', `/v1/memory?tenant_id=${TENANT}`);
    expect([erase.status, code(erase)]).toEqual([423, 'tenant_locked']);
    const noKey = await (await client(s)).sealedCall('GET', `/v1/memory?tenant_id=${TENANT}`);
    expect([noKey.status, code(noKey)]).toEqual([423, 'tenant_locked']);
    const wrong = await (await client(s, join(dir, 'wrong.key'))).sealedCall('GET', `/v1/memory?tenant_id=${TENANT}`);
    expect([wrong.status, code(wrong)]).toEqual([403, 'wrong_tenant_key']);
    // A chat for the tenant gets none of its memories either.
    const chat = await request(s.baseUrl, 'POST', '/v1/chat/completions', { model: 'local-memory', messages: [{ role: 'user', content: 'what is the safe combination?' }] }, { organization_id: TENANT });
    expect([chat.status, code(chat)]).toEqual([423, 'tenant_locked']);

    // Compactions while it is locked carry its entries over as they are.
    const before = snapshots(s);
    for (let i = 0; snapshots(s) === before; i++) expect((await request(s.baseUrl, 'POST', '/v1/memory', { tenant_id: 'plain', content: plainFiller(1000 + i) })).status).toBe(200);
    await waitFor(async () => !readdirSync(join(copy, 'memory')).some((f) => f.endsWith('.tmp')), 30_000);
    const read = await hostReads([copy]);
    expect(read.found).toEqual([]);
    expect(read.readable).toEqual([]);
    expect(read.sealed).toBeGreaterThanOrEqual(1);
  });

  // Its own test (and so its own time budget): two restarts, each replaying the store.
  it('opens, after a restart, at the first call that brings the key, with everything there; locked again after the next restart', async () => {
    const s = fresh!;
    // A restart, then the first call with the key opens it: everything is there.
    await s.killEnclave('SIGKILL');
    await s.startEnclave();
    const owner = await client(s, keyFile);
    const found = await owner.sealedCall<{ data: Array<{ content: string; user_id?: string; metadata: Record<string, unknown> }> }>('POST', '/v1/memory/search', { tenant_id: TENANT, query: 'safe combination', top_k: 5 });
    expect(found.status).toBe(200);
    expect(found.body.data[0]).toMatchObject({ content: combination, user_id: userId, metadata: { where: metaValue } });
    const list = await owner.sealedCall<{ data: Array<{ content: string }> }>('GET', `/v1/memory?tenant_id=${TENANT}`);
    expect(list.body.data.map((m) => m.content).sort()).toEqual([combination, spare].sort());
    // Open, it still needs the key on every call.
    const plainList = await request(s.baseUrl, 'GET', `/v1/memory?tenant_id=${TENANT}`);
    expect([plainList.status, code(plainList)]).toEqual([423, 'tenant_locked']);

    // The key is not kept: after another restart the tenant is locked again.
    await s.killEnclave('SIGKILL');
    await s.startEnclave();
    const again = await (await client(s)).sealedCall('GET', `/v1/memory?tenant_id=${TENANT}`);
    expect([again.status, code(again)]).toEqual([423, 'tenant_locked']);
    expect((await (await client(s, keyFile)).sealedCall('GET', `/v1/memory?tenant_id=${TENANT}`)).status).toBe(200);
  });
});
