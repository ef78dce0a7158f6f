/**
 * Deletion receipts: what the enclave signs when it deletes (one memory, or every memory of a
 * tenant), so a client can keep proof of the deletion and check it offline, and later catch a
 * host that brings the deleted memories back by restoring an older copy of the store.
 *
 * The statement is UTF-8 text, eight lines joined by "\n" (no trailing newline):
 *
 *   agent-service/deletion-receipt/v1
 *   scope <memory|tenant>
 *   tenant <JSON string>
 *   ids <JSON array of the memory ids deleted; [] for a tenant>
 *   count <decimal: memories deleted>
 *   deleted-at <decimal unix milliseconds>
 *   state <seq>:<64 lowercase hex>   the store's state head once the deletion was durable
 *   store <32 lowercase hex>         the store it heads
 *
 * signed with the enclave's Ed25519 key (the one its attestation binds, `tee_public_key`).
 * Every state that descends from the receipt's head has the deletion in it: an answer from a
 * state that does not (older, forked, or another store) comes from a copy of the store from
 * before the deletion, which may hold the deleted memories again. A StateTracker started at the
 * receipt's head (receiptState) refuses such answers (response-signature.ts).
 */
import { ed25519Verify, formatState, parseState, STORE_ID, type KnownState, type StateHead } from './response-signature.js';

export const RECEIPT_TAG = 'agent-service/deletion-receipt/v1';

export interface DeletionReceipt {
  object: 'memory.deletion_receipt';
  scope: 'memory' | 'tenant';
  tenant_id: string;
  /** The memory deleted (scope memory); empty for a tenant, whose every memory was deleted. */
  ids: string[];
  count: number;
  /** Unix milliseconds. */
  deleted_at: number;
  /** formatState of the head once the deletion was durable. */
  state: string;
  store: string;
  /** The enclave's Ed25519 public key, base64: check it is the attested one. */
  public_key: string;
  /** base64 Ed25519 signature over receiptStatement. */
  signature: string;
}

export type UnsignedReceipt = Omit<DeletionReceipt, 'object' | 'public_key' | 'signature'>;

/** The exact text that is signed; throws on values that have no place in it. */
export function receiptStatement(r: UnsignedReceipt): string {
  if (r.scope !== 'memory' && r.scope !== 'tenant') throw new Error(`not a deletion scope: ${JSON.stringify(r.scope)}`);
  if (typeof r.tenant_id !== 'string') throw new Error('the receipt names no tenant');
  if (!Array.isArray(r.ids) || r.ids.some((id) => typeof id !== 'string')) throw new Error('the receipt\'s ids are not a list of ids');
  if (!Number.isSafeInteger(r.count) || r.count < 0) throw new Error(`not a count: ${JSON.stringify(r.count)}`);
  if (!Number.isSafeInteger(r.deleted_at) || r.deleted_at < 0) throw new Error(`not a time in milliseconds: ${JSON.stringify(r.deleted_at)}`);
  if (!parseState(r.state)) throw new Error(`not a state head: ${JSON.stringify(r.state)}`);
  if (typeof r.store !== 'string' || !STORE_ID.test(r.store)) throw new Error(`not a store id: ${JSON.stringify(r.store)}`);
  return [
    RECEIPT_TAG,
    `scope ${r.scope}`,
    `tenant ${JSON.stringify(r.tenant_id)}`,
    `ids ${JSON.stringify(r.ids)}`,
    `count ${r.count}`,
    `deleted-at ${r.deleted_at}`,
    `state ${r.state}`,
    `store ${r.store}`,
  ].join('\n');
}

/** Signs a receipt with `sign` (the enclave's key, which never leaves it). */
export function signReceipt(sign: (message: Uint8Array) => Uint8Array, publicKey: Uint8Array, receipt: Omit<UnsignedReceipt, 'state'> & { state: StateHead }): DeletionReceipt {
  const fields: UnsignedReceipt = { ...receipt, state: formatState(receipt.state) };
  const signature = Buffer.from(sign(Buffer.from(receiptStatement(fields), 'utf8'))).toString('base64');
  return { object: 'memory.deletion_receipt', ...fields, public_key: Buffer.from(publicKey).toString('base64'), signature };
}

export type ReceiptCheck =
  | { ok: true; receipt: DeletionReceipt; deletedAt: Date; state: StateHead; store: string }
  | { ok: false; reason: string };

/**
 * Checks a receipt offline: its signature by the key it names, and, when given, that this is
 * `publicKey` (the key an attestation of the enclave bound). Without `publicKey` it only shows
 * the receipt is intact and signed by the key it names: check that key against an attestation.
 * Never throws.
 */
export function checkReceipt(value: unknown, publicKey?: Uint8Array): ReceiptCheck {
  const r = value as Partial<DeletionReceipt> | null;
  if (!r || typeof r !== 'object' || r.object !== 'memory.deletion_receipt') return { ok: false, reason: 'not a deletion receipt (object memory.deletion_receipt)' };
  let statement: string;
  try {
    statement = receiptStatement(r as UnsignedReceipt);
  } catch (error) {
    return { ok: false, reason: (error as Error).message };
  }
  const key = Buffer.from(typeof r.public_key === 'string' ? r.public_key : '', 'base64');
  if (key.length !== 32) return { ok: false, reason: 'the receipt\'s public_key is not a base64 Ed25519 key' };
  if (publicKey && !key.equals(Buffer.from(publicKey))) return { ok: false, reason: 'the receipt is signed by another key than the enclave\'s attested one' };
  const signature = Buffer.from(typeof r.signature === 'string' ? r.signature : '', 'base64');
  if (signature.length !== 64 || signature.toString('base64') !== r.signature) return { ok: false, reason: 'the receipt\'s signature is not a base64 Ed25519 signature' };
  if (!ed25519Verify(key, Buffer.from(statement, 'utf8'), signature)) {
    return { ok: false, reason: 'the receipt\'s signature does not verify with its public_key: it was altered, or not signed by the enclave' };
  }
  return { ok: true, receipt: r as DeletionReceipt, deletedAt: new Date(r.deleted_at!), state: parseState(r.state)!, store: r.store! };
}

/** The head a client holding the receipt knows: start a StateTracker at it, and a copy of the store from before the deletion is refused. */
export function receiptState(receipt: DeletionReceipt): KnownState {
  const head = parseState(receipt.state);
  if (!head) throw new TypeError('the receipt holds no state head');
  return { store: receipt.store, ...head };
}
