import { describe, expect, it } from 'vitest';
import { signReply, type SignedState } from '../../enclave/api/signing.js';
import { generateIdentity } from '../../enclave/keys.js';
import {
  checkSignature, formatKnownStates, parseKnownStates, sha256Hex, SHARD_HEADER, SIGNATURE_HEADER, StateTracker, STORE_HEADER, TENANT_HEADER, TIMESTAMP_HEADER,
  type Ancestry, type StateHead,
} from '../../protocol/response-signature.js';
import { shardOf } from '../../protocol/shards.js';

const head = (seq: number, fill = 'ab'): StateHead => ({ seq, hash: fill.repeat(32) });
const storeOf = (shard: number) => shard.toString(16).padStart(2, '0').repeat(16);
/** Two tenants in different shards of 8, neither in shard 0 (1 and 7). */
const alice = 'alice';
const carol = 'carol';

describe('known states (x-tee-known-state)', () => {
  it('name a head per shard, in shard order, and nothing else parses', () => {
    const heads = new Map([[5, head(2, 'cd')], [0, head(9)]]);
    const text = formatKnownStates(heads);
    expect(text).toBe(`0/9:${'ab'.repeat(32)},5/2:${'cd'.repeat(32)}`);
    expect(parseKnownStates(text)).toEqual(new Map([[0, head(9)], [5, head(2, 'cd')]]));
    for (const bad of [`9:${'ab'.repeat(32)}`, `5/2:${'cd'.repeat(32)},0/9:${'ab'.repeat(32)}`, `1/1:${'ab'.repeat(32)},1/2:${'ab'.repeat(32)}`, `64/1:${'ab'.repeat(32)}`, '', 'x']) {
      expect(parseKnownStates(bad), bad).toBeUndefined();
    }
  });
});

describe('the tracker, per shard', () => {
  const observed = (tenant: string, shard: number, state: StateHead, ancestor?: Ancestry) =>
    ({ state, store: storeOf(shard), shard: { index: shard, count: 8 }, tenant, ...(ancestor ? { ancestor } : {}) });

  it('follows each shard\'s chain apart: one shard\'s head is never compared with another\'s', () => {
    expect(shardOf(alice, 8)).not.toBe(shardOf(carol, 8));
    const tracker = new StateTracker();
    expect(tracker.observe(observed(alice, shardOf(alice, 8), head(40)), undefined)).toBeUndefined();
    // Bob's shard is far behind alice's: no rollback, another chain.
    expect(tracker.observe(observed(carol, shardOf(carol, 8), head(3), 'yes'), tracker.floor())).toBeUndefined();
    expect(tracker.head(shardOf(alice, 8))).toEqual({ store: storeOf(shardOf(alice, 8)), ...head(40) });
    expect(tracker.head(shardOf(carol, 8))).toEqual({ store: storeOf(shardOf(carol, 8)), ...head(3) });
    // But carol's shard going back is a rollback of that shard.
    expect(tracker.observe(observed(carol, shardOf(carol, 8), head(2), 'yes'), tracker.floor())).toMatch(/state 2, older than state 3/);
  });

  it('refuses an answer for a tenant that names another shard than the tenant\'s', () => {
    const tracker = new StateTracker();
    expect(tracker.observe(observed(alice, shardOf(carol, 8), head(3)), undefined))
      .toMatch(new RegExp(`comes from shard ${shardOf(carol, 8)} of 8, but tenant "alice" is in shard ${shardOf(alice, 8)}`));
    // Acting for no tenant: shard 0.
    expect(tracker.observe(observed('', 3, head(3)), undefined)).toMatch(/an answer for no tenant comes from shard 0/);
    // Several tenants: the first one's shard.
    expect(tracker.observe(observed(`${alice},${carol}`, shardOf(alice, 8), head(3)), undefined)).toBeUndefined();
  });

  it('refuses a service whose shard count changed', () => {
    const tracker = new StateTracker();
    expect(tracker.observe(observed(alice, shardOf(alice, 8), head(3)), undefined)).toBeUndefined();
    expect(tracker.observe({ ...observed(alice, shardOf(alice, 4), head(4)), shard: { index: shardOf(alice, 4), count: 4 } }, tracker.floor()))
      .toMatch(/the service has 4 shards, but this client has seen 8/);
    expect(StateTracker.from(JSON.stringify(tracker)).shardCount).toBe(8);
  });

  it('with a genuine signature: the enclave signs the tenant\'s shard, and the host cannot pass another shard\'s answer off as it', () => {
    const identity = generateIdentity();
    const heads = [0, 1, 2, 3, 4, 5, 6, 7].map((s) => head(10 + s));
    const state: SignedState = {
      count: 8, shardOf: (t) => shardOf(t, 8), head: (s) => heads[s], storeId: storeOf,
      ancestry: (s, known) => (known.seq <= heads[s].seq && known.hash === heads[s].hash ? 'yes' : 'no'),
    };
    const body = Buffer.from('{}');
    const known = new Map([[shardOf(alice, 8), heads[shardOf(alice, 8)]], [shardOf(carol, 8), head(1, 'ee')]]);
    const request = { request_id: 'r', method: 'GET', target: '/v1/memory?tenant_id=alice', body: Buffer.alloc(0), authorization: '', organization: '', known_state: formatKnownStates(known) };
    const reply = signReply({ ...identity, state }, 'GET', request, { status: 200, body, headers: { [TENANT_HEADER]: alice } });
    const h = reply.headers!;
    expect(h[SHARD_HEADER]).toBe(`${shardOf(alice, 8)}/8`);
    expect(h[STORE_HEADER]).toBe(storeOf(shardOf(alice, 8)));
    // The ancestry is about the client's head of alice's shard, not carol's (which is not on any chain).
    expect(h['x-tee-ancestor']).toBe('yes');
    const sent = { method: 'GET', target: request.target, body: new Uint8Array(), knownState: request.known_state };
    const sig = { signature: h[SIGNATURE_HEADER], timestamp: h[TIMESTAMP_HEADER], state: h['x-tee-state'], store: h[STORE_HEADER], shard: h[SHARD_HEADER], ancestor: 'yes' as const, tenant: alice };
    const check = checkSignature(identity.publicKey, sent, { status: 200, bodySha256: sha256Hex(body) }, sig);
    expect(check.ok).toBe(true);
    // The host relabels the shard: the signature no longer verifies.
    expect(checkSignature(identity.publicKey, sent, { status: 200, bodySha256: sha256Hex(body) }, { ...sig, shard: `${shardOf(carol, 8)}/8` }).ok).toBe(false);
    // A genuine answer of carol's shard for alice (as an enclave holding the wrong shard would sign it) is refused by the tracker.
    const wrong = signReply({ ...identity, state: { ...state, shardOf: () => shardOf(carol, 8) } }, 'GET', request, { status: 200, body, headers: { [TENANT_HEADER]: alice } }).headers!;
    const wrongCheck = checkSignature(identity.publicKey, sent, { status: 200, bodySha256: sha256Hex(body) },
      { signature: wrong[SIGNATURE_HEADER], timestamp: wrong[TIMESTAMP_HEADER], state: wrong['x-tee-state'], store: wrong[STORE_HEADER], shard: wrong[SHARD_HEADER], ancestor: wrong['x-tee-ancestor'] as Ancestry, tenant: alice });
    expect(wrongCheck.ok).toBe(true);
    if (!wrongCheck.ok) return;
    expect(new StateTracker().observe({ ...wrongCheck, tenant: alice }, undefined)).toMatch(/tenant "alice" is in shard/);
  });
});
