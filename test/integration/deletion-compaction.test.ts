import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { occurrences } from '../helpers/key-scan.js';
import { openedMemoryBlobs } from '../helpers/sealed-files.js';
import { startService, waitFor, type RunningService } from '../helpers/service.js';

/**
 * Issue 37 (deletion that stays deleted): a deleted memory's content stays in the sealed log
 * the host store keeps until the next compaction, and is in no blob the host store holds once
 * that compaction is done: checked by opening every blob with the sealing key (the simulated
 * key is a host file), so the scan sees what any holder of the key would.
 */
let svc: RunningService;
const secret = 'the vault combination is 31337-ZEBRA';
const older = 'the vault combination is 27182-OKAPI';
const metaSecret = 'safe-in-the-cellar';
const needles = [secret, older, metaSecret].map((s) => Buffer.from(s));
const found = async () => {
  const blobs = await openedMemoryBlobs(svc.dataDir);
  return needles.flatMap((n) => occurrences(blobs, n).map((where) => `${n.toString()} in ${where}`));
};
const snapshots = () => svc.output().split('memory snapshot written; older logs deleted').length - 1;

beforeAll(async () => {
  svc = await startService({ SNAPSHOT_LOG_BYTES: '16384' });
});
afterAll(async () => {
  await svc?.stop();
});

describe('a deleted memory\'s content, in the blobs the host store holds', () => {
  it('is in the log until the next compaction, and in no blob once it is done', async () => {
    const add = await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: 'gone', content: older, metadata: { where: metaSecret } });
    const id = add.body.id as string;
    expect((await request(svc.baseUrl, 'PATCH', `/v1/memory/${id}?tenant_id=gone`, { content: secret })).status).toBe(200);
    // A compaction while it lives: its versions are in the snapshot too.
    for (let i = 0; snapshots() === 0; i++) expect((await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: 'filler', content: `filler ${i} ${'y'.repeat(300)}` })).status).toBe(200);
    await waitFor(async () => (await found()).length > 0 && !readdirSync(join(svc.dataDir, 'memory')).some((f) => f.endsWith('.tmp')), 30_000);
    expect((await found()).some((hit) => hit.includes('snapshot'))).toBe(true);

    expect((await request(svc.baseUrl, 'DELETE', `/v1/memory/${id}?tenant_id=gone`)).status).toBe(200);
    // Until the next compaction, the host still holds it: the scan sees it (so it can fail).
    expect(await found()).not.toEqual([]);
    const before = snapshots();
    for (let i = 0; snapshots() === before; i++) expect((await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: 'filler', content: `more ${i} ${'z'.repeat(300)}` })).status).toBe(200);
    // The snapshot is written and the older logs deleted: nothing of the memory is left.
    expect(await found()).toEqual([]);
    // What is kept says it was deleted, without content.
    const history = await request(svc.baseUrl, 'GET', `/v1/memory/${id}/history?tenant_id=gone`);
    expect(history.body).toMatchObject({ deleted: true });
    expect(history.text).not.toMatch(/ZEBRA|OKAPI|cellar/);
    // And after a restart from those blobs, still gone.
    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    expect((await request(svc.baseUrl, 'GET', `/v1/memory/${id}?tenant_id=gone`)).status).toBe(404);
  });
});
