/** What the sdk throws when it cannot verify something (client.ts, sealed-stream.ts). */
import type { Check } from '../protocol/attestation/verify.js';
import type { KnownState, StateHead } from '../protocol/response-signature.js';

/** Base class: something the client could not verify. */
export class TrustError extends Error {
  override name = 'TrustError';
}

/** The attestation document did not verify; `checks` says which checks failed and why. */
export class AttestationError extends TrustError {
  override name = 'AttestationError';
  constructor(message: string, readonly checks: Check[] = []) {
    super(message);
  }
}

/**
 * An answer that is not signed by the attested enclave, or whose signature does not
 * match what was sent and received. `status` and `body` are what arrived: unverified.
 */
export class ResponseSignatureError extends TrustError {
  override name = 'ResponseSignatureError';
  constructor(
    message: string,
    readonly status: number,
    readonly body: string,
    /** Whether the answer carried a signature at all (one that fails may be by keys this client does not know yet). */
    readonly signed = false,
    /** The answer's Retry-After header, as sent (unverified, like the rest of it). */
    readonly retryAfter?: string,
  ) {
    super(message);
  }
}

/**
 * A validly signed answer that does not continue the newest state this client has seen: an
 * older state (a rolled-back store), one that does not descend from it (a fork), or another
 * store (wiped or replaced). `state`/`store` are the answer's, `newestSeen` the client's.
 */
export class RollbackError extends TrustError {
  override name = 'RollbackError';
  constructor(message: string, readonly state: StateHead, readonly newestSeen: KnownState | undefined, readonly store?: string) {
    super(message);
  }
}

/** A sealed call whose envelope the enclave refused, or whose reply could not be opened. */
export class SealedCallError extends TrustError {
  override name = 'SealedCallError';
  constructor(message: string, readonly status?: number, readonly body?: unknown) {
    super(message);
  }
}

/**
 * A validly signed answer whose prompt (and memories) the enclave sent to another upstream
 * than the client requires (requireUpstream): the enclave says where they went, and it was not there.
 */
export class UpstreamError extends TrustError {
  override name = 'UpstreamError';
  constructor(message: string, readonly upstream: string) {
    super(message);
  }
}
