/**
 * Deletion receipts: what the enclave signs when it deletes (one memory, every memory of a
 * tenant in a scope, or every memory of a tenant), so a client can keep proof of the deletion and check it offline, and later catch a
 * host that brings the deleted memories back by restoring an older copy of the store.
 *
 * The statement is UTF-8 text, eight lines (nine for scope `scope`) joined by "\n" (no trailing newline):
 *
 *   agent-service/deletion-receipt/v1
 *   scope <memory|scope|tenant>
 *   tenant <JSON string>
 *   where <JSON object: the scope's user_id, agent_id, run_id, in that order>   (scope `scope` only)
 *   ids <JSON array of the memory ids deleted; [] for a scope or a tenant>
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

/** The scope fields a scoped deletion names (the API's user_id, agent_id, run_id). */
export const RECEIPT_SCOPE_FIELDS = ['user_id', 'agent_id', 'run_id'] as const;
export type ReceiptWhere = Partial<Record<(typeof RECEIPT_SCOPE_FIELDS)[number], string>>;

export interface DeletionReceipt {
  object: 'memory.deletion_receipt';
  /** One memory; every memory of the tenant in the scope `where` names; every memory of the tenant. */
  scope: 'memory' | 'scope' | 'tenant';
  tenant_id: string;
  /** Scope `scope` only: the memories deleted were the tenant's with these scope fields (every one named). */
  where?: ReceiptWhere;
  /** The memory deleted (scope memory); empty for a scope or a tenant. */
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
  if (r.scope !== 'memory' && r.scope !== 'scope' && r.scope !== 'tenant') throw new Error(`not a deletion scope: ${JSON.stringify(r.scope)}`);
  if (typeof r.tenant_id !== 'string') throw new Error('the receipt names no tenant');
  // Only a scoped receipt has `where`, and it is signed: one added to another receipt would be shown unsigned.
  if ((r.scope === 'scope') !== (r.where !== undefined)) throw new Error(r.scope === 'scope' ? 'a scoped receipt names no scope (where)' : `a ${r.scope} receipt has no where`);
  const where = r.where === undefined ? undefined : canonicalWhere(r.where);
  if (!Array.isArray(r.ids) || r.ids.some((id) => typeof id !== 'string')) throw new Error('the receipt\'s ids are not a list of ids');
  if (!Number.isSafeInteger(r.count) || r.count < 0) throw new Error(`not a count: ${JSON.stringify(r.count)}`);
  if (!Number.isSafeInteger(r.deleted_at) || r.deleted_at < 0) throw new Error(`not a time in milliseconds: ${JSON.stringify(r.deleted_at)}`);
  if (!parseState(r.state)) throw new Error(`not a state head: ${JSON.stringify(r.state)}`);
  if (typeof r.store !== 'string' || !STORE_ID.test(r.store)) throw new Error(`not a store id: ${JSON.stringify(r.store)}`);
  return [
    RECEIPT_TAG,
    `scope ${r.scope}`,
    `tenant ${JSON.stringify(r.tenant_id)}`,
    ...(where === undefined ? [] : [`where ${where}`]),
    `ids ${JSON.stringify(r.ids)}`,
    `count ${r.count}`,
    `deleted-at ${r.deleted_at}`,
    `state ${r.state}`,
    `store ${r.store}`,
  ].join('\n');
}

/** `where` as the statement has it: its fields in RECEIPT_SCOPE_FIELDS's order; throws unless it names one or more and nothing else. */
function canonicalWhere(where: unknown): string {
  if (typeof where !== 'object' || where === null || Array.isArray(where)) throw new Error('the receipt\'s where is not an object');
  const fields = Object.keys(where);
  const known: readonly string[] = RECEIPT_SCOPE_FIELDS;
  if (fields.length === 0 || fields.some((f) => !known.includes(f))) throw new Error(`the receipt's where must name some of ${RECEIPT_SCOPE_FIELDS.join(', ')} and nothing else`);
  const values = where as Record<string, unknown>;
  if (fields.some((f) => typeof values[f] !== 'string')) throw new Error('the receipt\'s where holds a value that is not a string');
  return JSON.stringify(Object.fromEntries(RECEIPT_SCOPE_FIELDS.filter((f) => f in values).map((f) => [f, values[f]])));
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
