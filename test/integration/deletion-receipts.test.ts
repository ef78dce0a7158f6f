import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../common/paths.js';
import { connect, RollbackError } from '../../sdk/client.js';
import { checkReceipt, receiptState, type DeletionReceipt } from '../../protocol/deletion-receipt.js';
import { StateTracker } from '../../protocol/response-signature.js';
import { request } from '../helpers/http.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * Issue 37, item 2 (receipts): a delete answers a receipt signed by the enclave, which checks
 * offline (sdk and agent-verify --receipt). The attack: the host keeps a copy of the store from
 * before a deletion, restores it and restarts the enclave (as in forks.test.ts), so the deleted
 * memory is back. A client that holds nothing but the receipt (a new process, no tracker of
 * its own) refuses every answer from that copy.
 */
let svc: RunningService;
let rootPem: string;
let dir: string;

beforeAll(async () => {
  svc = await startService();
  rootPem = readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8');
  dir = mkdtempSync(join(tmpdir(), 'agent-receipts-'));
});
afterAll(async () => {
  await svc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const open = (stateTracker: StateTracker) => connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem, stateTracker });
const agentVerify = (...args: string[]) => {
  try {
    return { status: 0, out: execFileSync(process.execPath, [join(repoRoot, 'dist', 'sdk', 'bin', 'agent-verify.js'), ...args], { encoding: 'utf8' }) };
  } catch (error) {
    const e = error as { status: number; stdout: string };
    return { status: e.status, out: e.stdout };
  }
};

function copyStore(): string {
  const copy = mkdtempSync(join(tmpdir(), 'agent-fork-'));
  cpSync(svc.dataDir, copy, { recursive: true });
  return copy;
}

/** The host's move: stop everything, put `copy` in place of the store, start again. */
async function restartOn(copy: string): Promise<void> {
  await svc.killEnclave('SIGKILL');
  await svc.killHostStore('SIGKILL');
  rmSync(svc.dataDir, { recursive: true, force: true });
  cpSync(copy, svc.dataDir, { recursive: true });
  rmSync(copy, { recursive: true, force: true });
  await svc.startHostStore();
  await svc.startEnclave();
}

describe('deletion receipts', () => {
  let receipt: DeletionReceipt;
  let tenantReceipt: DeletionReceipt;
  let deletedId: string;
  let attested: Uint8Array;

  it('a delete (one memory, or a tenant\'s) answers a receipt the sdk and agent-verify check offline', async () => {
    const client = await open(new StateTracker());
    attested = client.attestation.teePublicKey;
    await client.call('POST', '/v1/memory', { tenant_id: 'rcpt', content: 'kept words' });
    deletedId = (await client.call<{ id: string }>('POST', '/v1/memory', { tenant_id: 'rcpt', content: 'my passport number is X1234567' })).body.id;
    await client.call('POST', '/v1/memory', { tenant_id: 'rcpt-all', content: 'gone with the tenant' });
    const copy = copyStore();
    writeFileSync(join(dir, 'copy-path'), copy);

    const deleted = await client.call<{ receipt: DeletionReceipt }>('DELETE', `/v1/memory/${deletedId}?tenant_id=rcpt`);
    receipt = deleted.body.receipt;
    expect(receipt).toMatchObject({ object: 'memory.deletion_receipt', scope: 'memory', tenant_id: 'rcpt', ids: [deletedId], count: 1, store: client.state.current!.store });
    // Its head is the state once the deletion was durable: the answer's own head, here.
    expect(receipt.state).toBe(`${deleted.state.seq}:${deleted.state.hash}`);
    expect(checkReceipt(receipt, attested)).toMatchObject({ ok: true });

    const all = await client.call<{ count: number; receipt: DeletionReceipt }>('DELETE', '/v1/memory?tenant_id=rcpt-all');
    tenantReceipt = all.body.receipt;
    expect(tenantReceipt).toMatchObject({ scope: 'tenant', tenant_id: 'rcpt-all', ids: [], count: 1 });
    expect(checkReceipt(tenantReceipt, attested).ok).toBe(true);

    writeFileSync(join(dir, 'answer.json'), JSON.stringify(deleted.body));
    const cli = agentVerify('--receipt', join(dir, 'answer.json'), '--public-key', Buffer.from(attested).toString('base64'));
    expect(cli.status, cli.out).toBe(0);
    expect(cli.out).toContain(`${deletedId} of tenant "rcpt"`);
    expect(cli.out).toContain(`state        ${receipt.state}`);
    writeFileSync(join(dir, 'altered.json'), JSON.stringify({ ...receipt, ids: ['mem_other'] }));
    expect(agentVerify('--receipt', join(dir, 'altered.json'))).toMatchObject({ status: 1, out: expect.stringMatching(/does not verify/) });
  });

  it('a delete of one scope answers a receipt naming that scope, not the tenant (the other scope is kept)', async () => {
    const client = await open(new StateTracker());
    await client.call('POST', '/v1/memory', { tenant_id: 'rcpt-scope', user_id: 'ana', content: 'Ana keeps bees' });
    await client.call('POST', '/v1/memory', { tenant_id: 'rcpt-scope', user_id: 'ana', run_id: 's1', content: 'Ana sold honey on Saturday' });
    await client.call('POST', '/v1/memory', { tenant_id: 'rcpt-scope', user_id: 'ben', content: 'Ben keeps goats' });
    const deleted = await client.call<{ count: number; receipt: DeletionReceipt }>('DELETE', '/v1/memory?tenant_id=rcpt-scope&user_id=ana');
    expect(deleted.body.count).toBe(2);
    const scoped = deleted.body.receipt;
    expect(scoped).toMatchObject({ scope: 'scope', tenant_id: 'rcpt-scope', where: { user_id: 'ana' }, ids: [], count: 2 });
    expect(checkReceipt(scoped, client.attestation.teePublicKey).ok).toBe(true);
    const left = await client.call<{ data: { content: string }[] }>('GET', '/v1/memory?tenant_id=rcpt-scope');
    expect(left.body.data.map((m) => m.content)).toEqual(['Ben keeps goats']);

    writeFileSync(join(dir, 'scoped.json'), JSON.stringify(deleted.body));
    const cli = agentVerify('--receipt', join(dir, 'scoped.json'));
    expect(cli.status, cli.out).toBe(0);
    expect(cli.out).toContain('every memory of tenant "rcpt-scope" with user_id "ana" (2)');
    // The scope is signed: widened to the tenant, or to another user, the receipt no longer verifies.
    const { where: _dropped, ...widened } = scoped;
    expect(checkReceipt({ ...widened, scope: 'tenant' }).ok).toBe(false);
    expect(checkReceipt({ ...scoped, where: { user_id: 'ben' } })).toMatchObject({ ok: false, reason: expect.stringMatching(/does not verify/) });
    expect(checkReceipt({ ...tenantReceipt, where: { user_id: 'ana' } })).toMatchObject({ ok: false, reason: 'a tenant receipt has no where' });
  });

  it('the host restores a copy from before the deletion: the memory is back, and a client holding only the receipt refuses it', async () => {
    await restartOn(readFileSync(join(dir, 'copy-path'), 'utf8'));
    // Another tenant's writes push the copy past the receipt's sequence number: a fork, not just an older state.
    const seq = Number(receipt.state.split(':')[0]);
    for (let i = 0; ; i++) {
      const res = await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: 'rcpt-other', content: `filler ${i}` });
      if (Number(res.headers.get('x-tee-state')!.split(':')[0]) > seq) break;
    }
    // The attack worked: for anyone who does not check, the deleted memory is back.
    const naive = await open(new StateTracker());
    expect((await naive.call<{ content: string }>('GET', `/v1/memory/${deletedId}?tenant_id=rcpt`)).body.content).toMatch(/passport/);

    // A new client, with the receipt only: refused from the attestation on.
    const refused = await open(new StateTracker(receiptState(receipt))).then(() => undefined, (e: unknown) => e);
    expect(refused).toBeInstanceOf(RollbackError);
    expect((refused as RollbackError).message).toMatch(/does not descend from state|older than state/);
    // The tenant's receipt catches it too.
    expect(await open(new StateTracker(receiptState(tenantReceipt))).then(() => undefined, (e: unknown) => e)).toBeInstanceOf(RollbackError);
  });
});
