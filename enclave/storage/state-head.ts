import { createHash } from 'node:crypto';

/**
 * The enclave's state head: how many changes the store has made durable since it was
 * created, and a hash chained over every one of them. Each log segment and snapshot records
 * the head it starts from, so recovery can tell that segments follow each other with
 * nothing dropped, cut or replaced in between; and every signed response carries the head,
 * so a client that saw a newer state can tell when the host serves an older one.
 */
export interface StateHead {
  seq: number;
  /** SHA-256, hex. */
  hash: string;
}

/** The head of an empty store: bound to the store's random id, so two stores never share a chain. */
export function genesisHead(storeId: string): StateHead {
  return { seq: 0, hash: createHash('sha256').update('private-agent-service/state-head/v1\0').update(storeId).digest('hex') };
}

/** The head after one more change (its encoded payload, as sealed into the log). */
export function advanceHead(head: StateHead, payload: Uint8Array): StateHead {
  return { seq: head.seq + 1, hash: createHash('sha256').update(Buffer.from(head.hash, 'hex')).update(payload).digest('hex') };
}

export const sameHead = (a: StateHead | undefined, b: StateHead | undefined): boolean =>
  a !== undefined && b !== undefined && a.seq === b.seq && a.hash === b.hash;

export const describeHead = (head: StateHead | undefined): string => (head ? `${head.seq}:${head.hash.slice(0, 16)}` : 'none');
