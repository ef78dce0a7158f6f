import { describe, expect, it } from 'vitest';
import { generateIdentity } from '../../enclave/keys.js';
import { checkReceipt, receiptState, receiptStatement, signReceipt, type DeletionReceipt } from '../../protocol/deletion-receipt.js';

/**
 * The edges of deletion receipts (protocol/deletion-receipt.ts): every field a receipt may not
 * hold, refused with its reason before any signature is checked, and the encodings of the key
 * and signature. deletion-receipt.test.ts holds the round trip and the tampering.
 */
const head = { seq: 7, hash: 'ab'.repeat(32) };
const store = 'cd'.repeat(16);
const fields = { scope: 'tenant' as const, tenant_id: 't1', ids: [], count: 0, deleted_at: 0, store };

function signed(): { receipt: DeletionReceipt; publicKey: Uint8Array } {
  const identity = generateIdentity();
  return { receipt: signReceipt((m) => identity.sign(m), identity.publicKey, { ...fields, state: head }), publicKey: identity.publicKey };
}

describe('deletion receipt fields', () => {
  it('a receipt is the statement\'s fields, the key that signed it and the signature, in base64', () => {
    const { receipt, publicKey } = signed();
    expect(receipt).toEqual({
      object: 'memory.deletion_receipt', ...fields, state: `7:${head.hash}`,
      public_key: Buffer.from(publicKey).toString('base64'), signature: expect.stringMatching(/^[A-Za-z0-9+/]{86}==$/),
    });
    // Zero memories at time zero is still a receipt: a tenant that held none.
    expect(checkReceipt(receipt, publicKey)).toEqual({ ok: true, receipt, deletedAt: new Date(0), state: head, store });
  });

  it.each([
    ['scope', { scope: 'all' }, 'not a deletion scope: "all"'],
    ['tenant', { tenant_id: 7 }, 'the receipt names no tenant'],
    ['ids not a list', { ids: 'mem_1' }, 'the receipt\'s ids are not a list of ids'],
    ['ids holding a number', { ids: ['mem_1', 2] }, 'the receipt\'s ids are not a list of ids'],
    ['count below zero', { count: -1 }, 'not a count: -1'],
    ['count a fraction', { count: 1.5 }, 'not a count: 1.5'],
    ['count a string', { count: '1' }, 'not a count: "1"'],
    ['deleted_at below zero', { deleted_at: -1 }, 'not a time in milliseconds: -1'],
    ['deleted_at unsafe', { deleted_at: 2 ** 53 }, 'not a time in milliseconds: 9007199254740992'],
    ['state', { state: '7:ab' }, 'not a state head: "7:ab"'],
    ['store', { store: 'CD'.repeat(16) }, `not a store id: "${'CD'.repeat(16)}"`],
    ['store not a string', { store: 5 }, 'not a store id: 5'],
  ])('refuses a receipt whose %s has no place in the statement', (_name, change, reason) => {
    const { receipt } = signed();
    expect(() => receiptStatement({ ...receipt, ...change } as never)).toThrow(reason);
    expect(checkReceipt({ ...receipt, ...change })).toEqual({ ok: false, reason });
  });

  it('a scoped receipt signs its where in one order (user_id, agent_id, run_id), whatever order it is sent in', () => {
    const identity = generateIdentity();
    const scoped = signReceipt((m) => identity.sign(m), identity.publicKey, { ...fields, scope: 'scope', where: { run_id: 'r1', user_id: 'u1' }, state: head });
    expect(receiptStatement(scoped).split('\n').slice(1, 5)).toEqual(['scope scope', 'tenant "t1"', 'where {"user_id":"u1","run_id":"r1"}', 'ids []']);
    expect(checkReceipt({ ...scoped, where: { user_id: 'u1', run_id: 'r1' } }, identity.publicKey).ok).toBe(true);
    // Without where, a memory or tenant receipt's statement is what it was before scoped receipts.
    expect(receiptStatement(signed().receipt).split('\n')).toHaveLength(8);
  });

  it.each([
    ['no where', {}, 'a scoped receipt names no scope (where)'],
    ['an empty where', { where: {} }, 'the receipt\'s where must name some of user_id, agent_id, run_id and nothing else'],
    ['a where naming another field', { where: { user_id: 'u', tenant_id: 't2' } }, 'the receipt\'s where must name some of user_id, agent_id, run_id and nothing else'],
    ['a where that is a list', { where: ['user_id'] }, 'the receipt\'s where is not an object'],
    ['a where that is null', { where: null }, 'the receipt\'s where is not an object'],
    ['a where holding a number', { where: { user_id: 5 } }, 'the receipt\'s where holds a value that is not a string'],
  ])('refuses a scoped receipt with %s', (_name, change, reason) => {
    const { receipt } = signed();
    expect(checkReceipt({ ...receipt, scope: 'scope', ...change })).toEqual({ ok: false, reason });
  });

  it('refuses a where on a memory or tenant receipt (it would be shown, unsigned)', () => {
    const { receipt } = signed();
    expect(checkReceipt({ ...receipt, where: { user_id: 'u' } })).toEqual({ ok: false, reason: 'a tenant receipt has no where' });
    expect(checkReceipt({ ...receipt, scope: 'memory', where: { user_id: 'u' } })).toEqual({ ok: false, reason: 'a memory receipt has no where' });
  });

  it.each([
    ['null', null],
    ['a string', 'memory.deletion_receipt'],
    ['another object', { object: 'memory.deleted' }],
  ])('refuses %s as not a receipt', (_name, value) => {
    expect(checkReceipt(value)).toEqual({ ok: false, reason: 'not a deletion receipt (object memory.deletion_receipt)' });
  });

  it.each([
    ['missing', undefined],
    ['a number', 5],
    ['31 bytes', Buffer.alloc(31).toString('base64')],
    ['33 bytes', Buffer.alloc(33).toString('base64')],
  ])('refuses a public_key that is %s', (_name, publicKey) => {
    const { receipt } = signed();
    expect(checkReceipt({ ...receipt, public_key: publicKey })).toEqual({ ok: false, reason: 'the receipt\'s public_key is not a base64 Ed25519 key' });
  });

  it('refuses a signature that is missing, not 64 bytes, or another spelling of the same bytes', () => {
    const { receipt, publicKey } = signed();
    const reason = 'the receipt\'s signature is not a base64 Ed25519 signature';
    expect(checkReceipt({ ...receipt, signature: undefined })).toEqual({ ok: false, reason });
    expect(checkReceipt({ ...receipt, signature: 64 })).toEqual({ ok: false, reason });
    expect(checkReceipt({ ...receipt, signature: Buffer.alloc(63).toString('base64') })).toEqual({ ok: false, reason });
    expect(checkReceipt({ ...receipt, signature: receipt.signature.replace(/==$/, '') })).toEqual({ ok: false, reason });
    // The last character's unused bits changed: Buffer.from decodes the same 64 bytes.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const respelled = `${receipt.signature.slice(0, -3)}${alphabet[alphabet.indexOf(receipt.signature.at(-3)!) ^ 1]}==`;
    expect(Buffer.from(respelled, 'base64')).toEqual(Buffer.from(receipt.signature, 'base64'));
    expect(checkReceipt({ ...receipt, signature: respelled }, publicKey)).toEqual({ ok: false, reason });
  });

  it('refuses a signature of 64 bytes that does not verify, even with the attested key', () => {
    const { receipt, publicKey } = signed();
    const bytes = Buffer.from(receipt.signature, 'base64');
    bytes[0] ^= 1;
    expect(checkReceipt({ ...receipt, signature: bytes.toString('base64') }, publicKey)).toEqual({
      ok: false, reason: 'the receipt\'s signature does not verify with its public_key: it was altered, or not signed by the enclave',
    });
  });

  it('receiptState starts from the receipt\'s head and store, and refuses a receipt with no head', () => {
    const { receipt } = signed();
    expect(receiptState(receipt)).toEqual({ store, ...head });
    expect(() => receiptState({ ...receipt, state: 'none' })).toThrow(new TypeError('the receipt holds no state head'));
  });
});
