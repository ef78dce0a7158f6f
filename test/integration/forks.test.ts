import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, RollbackError, type TeeClient } from '../../sdk/client.js';
import { StateTracker } from '../../protocol/response-signature.js';
import { request } from '../helpers/http.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * Issue 31, item 3: the host restores an older copy of the store (or wipes it), restarts the
 * enclave, and lets other tenants' writes push the copy's sequence number past the newest
 * one a client saw. A client that keeps its tracker (connect() does, per origin) refuses
 * every answer from it, from the attestation on.
 */
let svc: RunningService;
let rootPem: string;

beforeAll(async () => {
  svc = await startService();
  rootPem = readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8');
});
afterAll(async () => {
  await svc?.stop();
});

const open = (stateTracker?: StateTracker) => connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem, ...(stateTracker ? { stateTracker } : {}) });
const refusal = (promise: Promise<unknown>) => promise.then(() => undefined, (e: unknown) => e);

function copyStore(): string {
  const copy = mkdtempSync(join(tmpdir(), 'agent-fork-'));
  cpSync(svc.dataDir, copy, { recursive: true });
  return copy;
}

/** The host's move: stop everything, put `copy` (or nothing, for a wiped store) in place of the memory store, start again. */
async function restartOn(copy: string | 'wiped'): Promise<void> {
  await svc.killEnclave('SIGKILL');
  await svc.killHostStore('SIGKILL');
  if (copy === 'wiped') {
    rmSync(join(svc.dataDir, 'memory'), { recursive: true, force: true });
  } else {
    rmSync(svc.dataDir, { recursive: true, force: true });
    cpSync(copy, svc.dataDir, { recursive: true });
    rmSync(copy, { recursive: true, force: true });
  }
  await svc.startHostStore();
  await svc.startEnclave();
}

/** Another tenant writes (plainly: the host or anyone may) until the store's head passes `seq`. */
async function writeUntilPast(seq: number): Promise<number> {
  for (let i = 0; ; i++) {
    const res = await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: 'fork-other', content: `filler ${i}` });
    expect(res.status).toBe(200);
    const now = Number(res.headers.get('x-tee-state')!.split(':')[0]);
    if (now > seq) return now;
  }
}

describe('a client that saw a newer state refuses an older or forked copy of the store', () => {
  let client: TeeClient;

  it('(a) an older copy, after a restart: the same client reconnects (and connect() again, by default) and is refused', async () => {
    client = await open();
    await client.call('POST', '/v1/memory', { tenant_id: 'fork-a', content: 'first words' });
    const deleted = await client.call<{ id: string }>('POST', '/v1/memory', { tenant_id: 'fork-a', content: 'a secret to delete' });
    const copy = copyStore();
    await client.call('DELETE', `/v1/memory/${deleted.body.id}?tenant_id=fork-a`);
    const newest = client.state.current!;

    await restartOn(copy);
    const err = await refusal(client.reconnect());
    expect(err).toBeInstanceOf(RollbackError);
    expect((err as RollbackError).message).toMatch(new RegExp(`older than state ${newest.seq} this client has already seen`));
    // connect() without a tracker uses the one this process keeps for the origin: the same.
    expect(await refusal(open())).toBeInstanceOf(RollbackError);
    // Only a client told to start over accepts it (and sees the deleted memory again).
    const naive = await open(new StateTracker());
    expect((await naive.call('GET', `/v1/memory/${deleted.body.id}?tenant_id=fork-a`)).status).toBe(200);
  });

  it('(b) an older copy written past the client\'s newest seq by another tenant: refused as a fork, deleted memories included', async () => {
    // A fresh start: the client's history now is the store as it stands.
    const tracker = new StateTracker();
    client = await open(tracker);
    await client.call('POST', '/v1/memory', { tenant_id: 'fork-b', content: 'kept' });
    const deleted = await client.call<{ id: string }>('POST', '/v1/memory', { tenant_id: 'fork-b', content: 'deleted later' });
    const copy = copyStore();
    await client.call('DELETE', `/v1/memory/${deleted.body.id}?tenant_id=fork-b`);
    const newest = tracker.current!;

    await restartOn(copy);
    const reached = await writeUntilPast(newest.seq);
    expect(reached).toBeGreaterThan(newest.seq);
    // The deleted memory is back on the fork, for anyone who does not check.
    expect((await request(svc.baseUrl, 'GET', `/v1/memory/${deleted.body.id}?tenant_id=fork-b`)).status).toBe(200);

    const err = await refusal(client.reconnect());
    expect(err).toBeInstanceOf(RollbackError);
    expect((err as RollbackError).message).toMatch(new RegExp(`state ${reached}:.*does not descend from state ${newest.seq}:.*fork`));
    expect((err as RollbackError).newestSeen).toEqual(newest);
    expect(await refusal(open(StateTracker.from(JSON.stringify(tracker))))).toBeInstanceOf(RollbackError);
  });

  it('(c) a wiped store (a new store id): refused by a client that knew the old store, accepted with a new tracker', async () => {
    const tracker = new StateTracker();
    client = await open(tracker);
    await client.call('POST', '/v1/memory', { tenant_id: 'fork-c', content: 'before the wipe' });
    const known = tracker.current!;

    await restartOn('wiped');
    await writeUntilPast(known.seq);
    const err = await refusal(client.reconnect());
    expect(err).toBeInstanceOf(RollbackError);
    expect((err as RollbackError).message).toMatch(new RegExp(`from store [0-9a-f]{32}, but this client has seen store ${known.store}.*new StateTracker`));

    const fresh = await open(new StateTracker());
    expect(fresh.state.current!.store).not.toBe(known.store);
    expect((await fresh.call('GET', '/v1/memory?tenant_id=fork-c')).status).toBe(200);
  });
});
