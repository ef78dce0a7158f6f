import { describe, expect, it } from 'vitest';
import { generateIdentity } from '../../enclave/keys.js';
import { checkReceipt, receiptState, receiptStatement, signReceipt } from '../../protocol/deletion-receipt.js';
import { StateTracker } from '../../protocol/response-signature.js';

const identity = generateIdentity();
const head = { seq: 7, hash: 'ab'.repeat(32) };
const store = 'cd'.repeat(16);
const receipt = signReceipt((m) => identity.sign(m), identity.publicKey, { scope: 'memory', tenant_id: 't1', ids: ['mem_1'], count: 1, deleted_at: 1_795_000_000_000, state: head, store });

describe('deletion receipts, checked offline', () => {
  it('verify with the key they name, and with the attested key when it is given', () => {
    expect(checkReceipt(receipt)).toMatchObject({ ok: true, state: head, store, deletedAt: new Date(1_795_000_000_000) });
    expect(checkReceipt(JSON.parse(JSON.stringify(receipt)), identity.publicKey).ok).toBe(true);
    expect(receiptStatement(receipt)).toBe(`agent-service/deletion-receipt/v1\nscope memory\ntenant "t1"\nids ["mem_1"]\ncount 1\ndeleted-at 1795000000000\nstate 7:${head.hash}\nstore ${store}`);
  });

  it('refuse any field changed, another key, or a forged key with its own signature when the attested key is given', () => {
    for (const change of [{ ids: ['mem_2'] }, { tenant_id: 't2' }, { scope: 'tenant' }, { count: 2 }, { deleted_at: 1 }, { state: `8:${head.hash}` }, { store: 'ef'.repeat(16) }]) {
      expect(checkReceipt({ ...receipt, ...change })).toMatchObject({ ok: false, reason: expect.stringMatching(/does not verify/) });
    }
    const other = generateIdentity();
    const forged = signReceipt((m) => other.sign(m), other.publicKey, { scope: 'memory', tenant_id: 't1', ids: [], count: 0, deleted_at: 1, state: head, store });
    expect(checkReceipt(forged).ok).toBe(true);
    expect(checkReceipt(forged, identity.publicKey)).toMatchObject({ ok: false, reason: expect.stringMatching(/another key/) });
    expect(checkReceipt({ ...receipt, public_key: forged.public_key })).toMatchObject({ ok: false });
    expect(checkReceipt({ object: 'memory.deleted' })).toMatchObject({ ok: false, reason: expect.stringMatching(/not a deletion receipt/) });
  });

  it('start a StateTracker that refuses states that do not descend from the deletion', () => {
    const tracker = new StateTracker(receiptState(receipt));
    const floor = tracker.floor();
    expect(tracker.observe({ state: { seq: 6, hash: 'ee'.repeat(32) }, store, shard: { index: 0, count: 1 } }, floor)).toMatch(/older than state 7/);
    expect(tracker.observe({ state: { seq: 9, hash: 'ee'.repeat(32) }, store, shard: { index: 0, count: 1 }, ancestor: 'no' }, floor)).toMatch(/does not descend/);
    expect(tracker.observe({ state: { seq: 9, hash: 'ee'.repeat(32) }, store, shard: { index: 0, count: 1 }, ancestor: 'yes' }, floor)).toBeUndefined();
  });
});
