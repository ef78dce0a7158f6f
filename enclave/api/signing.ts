import { createHash } from 'node:crypto';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import {
  ANCESTOR_HEADER, SHARD_HEADER, SIGNATURE_HEADER, STATE_HEADER, STORE_HEADER, TENANT_HEADER, TIMESTAMP_HEADER, UPSTREAM_HEADER, formatState, parseKnownStates, sha256Hex, signAnswer,
  finalEventBytes, signedFinalEvent, streamSignatureEvent, type Ancestry, type KnownStates, type SignedRequest, type StateHead,
} from '../../protocol/response-signature.js';
import { limits } from '../../common/limits.js';
import type { EnclaveIdentity } from '../keys.js';
import { signReceipt, type DeletionReceipt, type UnsignedReceipt } from '../../protocol/deletion-receipt.js';

/**
 * The shards' state as signed answers report it (storage/sharded-store.ts): each shard's head
 * (after any change made), its store id, and its chain of heads. An answer names the shard of
 * the tenant it acted for (the first, for several), or shard 0 when it acted for none.
 */
export interface SignedState {
  readonly count: number;
  /** The tenant's shard (protocol/shards.ts shardOf), cached. */
  shardOf(tenantId: string): number;
  head(shard: number): StateHead;
  storeId(shard: number): string;
  /** O(1) (storage/head-chain.ts): signing runs on every answer. */
  ancestry(shard: number, known: StateHead): Ancestry;
  /** Whether this enclave serves the shard now (storage/sharded-store.ts); absent: every shard. */
  holds?(shard: number): boolean;
}

const TENANT_ID = new RegExp(limits.tenantIdPattern);

/**
 * The tenant an error answer is about, found where the client's sdk looks for the one it asked
 * for (the organization, the target's tenant_id, the body's): the refusal is then signed with
 * that tenant's shard and head, which the client follows, instead of shard 0's, which this
 * enclave may not hold (in a cluster its view of shard 0's head may be older than the client's,
 * and the client would refuse the error as a rollback). Undefined, and shard 0 as before, when
 * there is none, it is not a valid tenant id, or its shard is not served here (then the answer
 * is a refusal for the host to re-route: 503 shard_not_owned), or the caller may not act for it:
 * a caller without a key for the tenant learns no more than shard 0's head, as before, not how
 * busy the shard of a tenant id of its choosing is.
 */
export function errorTenant(state: SignedState, request: ApiRequest, mayActFor: (tenant: string) => boolean): string | undefined {
  let tenant: string | undefined = request.organization || undefined;
  if (tenant === undefined) {
    const q = request.target.indexOf('?');
    tenant = q < 0 ? undefined : new URLSearchParams(request.target.slice(q + 1)).get('tenant_id') ?? undefined;
  }
  if (tenant === undefined && request.body.length > 0 && request.body[0] === 0x7b) {
    try {
      const parsed = JSON.parse(Buffer.from(request.body).toString('utf8')) as { tenant_id?: unknown } | null;
      if (typeof parsed?.tenant_id === 'string') tenant = parsed.tenant_id;
    } catch {
      // Not JSON: no tenant.
    }
  }
  if (tenant === undefined || tenant.length > limits.maxTenantIdChars || !TENANT_ID.test(tenant)) return undefined;
  if (state.holds && !state.holds(state.count === 1 ? 0 : state.shardOf(tenant))) return undefined;
  return mayActFor(tenant) ? tenant : undefined;
}

/** The enclave's key, and the state each signed answer reports. */
export interface ResponseSigner extends EnclaveIdentity {
  state: SignedState;
}

/**
 * The request as the statement names it (protocol/response-signature.ts). The known
 * state is the client's claim, relayed by the host: a value that is not a head is signed as
 * none, and the client, who sent a head, then refuses the answer.
 */
function signedRequest(method: string, request: ApiRequest, known: KnownStates | undefined): SignedRequest {
  return {
    method, target: request.target, organization: request.organization, authorization: request.authorization,
    knownState: known ? request.known_state : '', body: request.body,
  };
}

/** The shard an answer for `tenant` (x-tee-tenant: one, several comma-separated, or "") names. */
export function answerShard(state: SignedState, tenant: string): number {
  if (tenant === '' || state.count === 1) return 0;
  const comma = tenant.indexOf(',');
  return state.shardOf(comma < 0 ? tenant : tenant.slice(0, comma));
}

/** The state part of an answer: its shard's head and store and, when the client named a head of that shard, whether it is on the chain. */
function answerState(state: SignedState, known: KnownStates | undefined, tenant: string): { state: string; store: string; shard: string; ancestor?: Ancestry } {
  const shard = answerShard(state, tenant);
  const answer: { state: string; store: string; shard: string; ancestor?: Ancestry } = { state: formatState(state.head(shard)), store: state.storeId(shard), shard: `${shard}/${state.count}` };
  const head = known?.get(shard);
  if (head) answer.ancestor = state.ancestry(shard, head);
  return answer;
}

/**
 * Adds x-tee-signature, x-tee-timestamp, x-tee-state, x-tee-store and (when the request
 * named a known state) x-tee-ancestor to a reply: the enclave's Ed25519 signature over
 * (method, target, organization, key id, tenant, upstream, request body hash, status, response body
 * hash, timestamp, state head, store id, known state, ancestry).
 */
export function signReply(signer: ResponseSigner, method: string, request: ApiRequest, reply: ApiReply): ApiReply {
  const body = reply.body ?? new Uint8Array();
  const known = parseKnownStates(request.known_state);
  const tenant = reply.headers?.[TENANT_HEADER] ?? '';
  const answer = Object.assign(answerState(signer.state, known, tenant), { status: reply.status ?? 200, bodySha256: sha256Hex(body as Uint8Array), tenant, upstream: reply.headers?.[UPSTREAM_HEADER] ?? '' });
  const { signature, timestamp, state, store, shard, ancestor } = signAnswer((message) => signer.sign(message), signedRequest(method, request, known), answer);
  // Object.assign, not a literal spreading `reply` and adding to it: V8 (Node 20) promoted
  // what such literals made, on every reply (docs/performance-log.md#collections-again-2026-11-25-afternoon).
  const headers = Object.assign({}, reply.headers, { [SIGNATURE_HEADER]: signature, [TIMESTAMP_HEADER]: timestamp, [STATE_HEADER]: state, [STORE_HEADER]: store, [SHARD_HEADER]: shard });
  if (ancestor) headers[ANCESTOR_HEADER] = ancestor;
  return Object.assign({}, reply, { headers });
}

export interface StreamSigner {
  /** Feed every byte sent to the client after the head, in order. */
  update(chunk: Uint8Array): void;
  /** The final SSE event signing everything fed so far; send it last. */
  finish(): Buffer;
  /** `json`, the stream's last event, with the signature of everything fed so far and of that event inside it. */
  finishWith(json: string): Buffer;
}

/**
 * Signs a streamed answer (server-stream RPC): hashes the streamed bytes as they go and
 * ends with a tee.signature event (protocol/response-signature.ts) over the same
 * statement as signReply, whose response body is the concatenation of the streamed bytes.
 */
export function streamSigner(signer: ResponseSigner, method: string, request: ApiRequest, status: number, tenant = '', upstream = ''): StreamSigner {
  const hash = createHash('sha256');
  let finished = false;
  const sign = () => {
    if (finished) throw new Error('stream already signed');
    finished = true;
    // The head at the end: after any memory the stream's tool calls added.
    const known = parseKnownStates(request.known_state);
    const answer = Object.assign(answerState(signer.state, known, tenant), { status, bodySha256: hash.digest('hex'), tenant, upstream });
    return signAnswer((m) => signer.sign(m), signedRequest(method, request, known), answer);
  };
  return {
    update(chunk) {
      if (finished) throw new Error('stream already signed');
      hash.update(chunk);
    },
    finish() {
      return Buffer.from(streamSignatureEvent(sign()), 'utf8');
    },
    finishWith(json) {
      if (finished) throw new Error('stream already signed');
      hash.update(finalEventBytes(json));
      return Buffer.from(signedFinalEvent(json, sign()), 'utf8');
    },
  };
}

/**
 * A deletion's receipt (protocol/deletion-receipt.ts), signed by the enclave's key: made once
 * the deletion is durable, so its state head (read now: it or a later one) has the deletion in it.
 */
export function deletionReceipt(signer: ResponseSigner, deletion: Omit<UnsignedReceipt, 'state' | 'store' | 'deleted_at'>): DeletionReceipt {
  // The tenant's shard: the store and chain the deletion was made durable in.
  const shard = answerShard(signer.state, deletion.tenant_id);
  return signReceipt((message) => signer.sign(message), signer.publicKey, { ...deletion, deleted_at: Date.now(), state: signer.state.head(shard), store: signer.state.storeId(shard) });
}
