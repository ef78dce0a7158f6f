import { ApiError, badRequest, sealedReplayed, tooLarge, unavailable } from '../../common/errors.js';
import { limits } from '../../common/limits.js';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import { sealedRequestHeadSchema } from '../../common/schemas.js';
import { validator } from '../../common/validation.js';
import {
  decodeBase64, SEALED_CONTENT_TYPE, sealedBody, SealedFormatError, sealReply, TENANT_KEY_MAX_BYTES, TENANT_KEY_MIN_BYTES, type SealedRequestHead,
} from '../../protocol/sealed.js';
import { authenticate, type Caller } from '../auth/caller.js';
import type { SealedRequestKey } from '../keys.js';
import type { ReplayGuard } from './replay-guard.js';
import { SHARD_MISS_HEADER } from '../../protocol/shards.js';
import type { CallContext, RouteCall } from './resolve-call.js';

const validHead = validator<SealedRequestHead>(sealedRequestHeadSchema, 'body');

export interface SealedDeps {
  key: SealedRequestKey;
  replay: ReplayGuard;
  /**
   * Identifies the caller by the sealed Authorization (Authorizer.identify): the inner
   * request's one key lookup. Checked before the envelope takes a place in the replay guard,
   * so traffic without a valid API key cannot fill it (401; nothing in open mode).
   */
  identify: (authorization: string) => Caller;
  /** Handles a decrypted request, as `caller`, exactly as the plain route would (and signs its reply). */
  dispatch: (request: ApiRequest, caller: Caller, context?: CallContext) => Promise<ApiReply>;
}

const cannotOpen = () => badRequest(
  'the sealed request does not open with the enclave\'s box key: it was altered, or sealed to a key from an earlier start (fetch /v1/attestation again)',
  null,
  'sealed_open_failed',
);

const outerAuthorization = () => badRequest(
  'a sealed request must not carry an Authorization header outside the envelope, where the host reads it: send the key only inside the envelope, and replace a key that was sent this way',
  'authorization',
  'sealed_outer_authorization',
);

/** A sealed request opened and admitted: the inner request, and what the answer is sealed with. */
export interface AdmittedSealed {
  inner: ApiRequest;
  /** Who the inner request comes from: the key inside the envelope. */
  caller: Caller;
  sharedKey: Uint8Array;
  /** The envelope's nonce (a sealed stream's key is derived from it). */
  nonce: Uint8Array;
}

/**
 * Opens the envelope, validates its plaintext, checks the sealed key and refuses replays:
 * everything both sealed routes do before the inner request runs. Refusals are plain
 * errors: they reveal nothing the host does not already see.
 */
export function admitSealed(deps: Omit<SealedDeps, 'dispatch'>, outer: Pick<RouteCall<'Sealed'>, 'request' | 'caller'>, envelope: Uint8Array): AdmittedSealed {
  const { request } = outer;
  // The key belongs inside the envelope only: one sent outside has passed the host in the
  // clear. Refusing it tells the client at once, instead of quietly working while leaking.
  if (outer.caller.sentHeader) throw outerAuthorization();
  const malformed = (error: unknown) => (error instanceof SealedFormatError ? badRequest(error.message, null, 'invalid_sealed_request') : error);
  let opened;
  try {
    // Too short, a key of small order, or a plaintext without a JSON head line.
    opened = deps.key.open(envelope);
  } catch (error) {
    throw malformed(error);
  }
  if (!opened) throw cannotOpen();

  let payload: SealedRequestHead;
  try {
    payload = validHead(opened.head);
  } catch (error) {
    const detail = error instanceof ApiError ? `: ${error.message}` : '';
    throw badRequest(`the sealed plaintext is not a sealed request${detail}`, null, 'invalid_sealed_request');
  }
  let body: Uint8Array;
  try {
    body = sealedBody(opened.rest, payload.body_bytes, 'request');
  } catch (error) {
    throw malformed(error);
  }
  if (body.length > limits.maxBodyBytes) throw tooLarge(`the sealed request body is larger than ${limits.maxBodyBytes} bytes`);

  const tenantKey = payload.tenant_key === undefined ? undefined : decodeBase64(payload.tenant_key, 'tenant_key');
  if (tenantKey && (tenantKey.length < TENANT_KEY_MIN_BYTES || tenantKey.length > TENANT_KEY_MAX_BYTES)) {
    throw badRequest(`the sealed request's tenant_key must be ${TENANT_KEY_MIN_BYTES} to ${TENANT_KEY_MAX_BYTES} bytes`, null, 'invalid_tenant_key');
  }
  const identified = deps.identify(payload.authorization ?? '');
  authenticate(identified);
  switch (deps.replay.admit(opened.replayId, payload.timestamp)) {
    case 'stale':
      throw badRequest('the sealed request\'s timestamp is too far from the enclave\'s clock (seal it again)', null, 'sealed_request_expired');
    case 'replayed':
      throw sealedReplayed();
    case 'full':
      throw unavailable('too many sealed requests in the replay window; try again shortly', 'sealed_replay_window_full');
    case 'ok':
      break;
  }
  // The tenant key and the replay id travel with the caller, for this request only: no handler
  // sees the envelope. Every change the request makes is logged with the id (memory/journal.ts).
  const replay = { id: opened.replayId, expires_at: deps.replay.expiresAt(payload.timestamp) };
  const caller: Caller = { ...identified, ...(tenantKey ? { tenantKey } : {}), replay };

  const inner: ApiRequest = {
    request_id: request.request_id,
    method: payload.method,
    target: payload.target,
    // A view of the opened plaintext, which nothing else holds: no copy.
    body: Buffer.from(body.buffer, body.byteOffset, body.byteLength),
    authorization: payload.authorization ?? '',
    organization: payload.organization ?? '',
    // The known state travels inside the envelope; the outer call's header is the outer answer's.
    known_state: payload.known_state ?? '',
  };
  return { inner, caller, sharedKey: opened.sharedKey, nonce: opened.nonce };
}

/**
 * The refusal of a sealed call whose tenant is in a shard this enclave does not hold, made
 * outside the box so that the host can send the same envelope to the shard's owner: it learns
 * the shard (docs/trust-model.md), as it would from where it routes the call.
 */
export const shardMissOutside = (shard: string, guard: ReplayGuard, caller: Caller) => {
  // Nothing was done: the same envelope may come back here after the shard does.
  if (caller.replay) guard.forget(caller.replay.id);
  return unavailable(`the sealed request's tenant is in shard ${shard}, which this enclave does not hold now: send it to the shard's owner`, 'shard_not_owned', { [SHARD_MISS_HEADER]: shard });
};

/**
 * POST /v1/sealed: admits the envelope, hands the inner request to the same handler as its
 * plain route, and seals the whole reply (status, headers, body) to the client's key.
 */
export function sealedRoute(deps: SealedDeps) {
  return async (call: RouteCall<'Sealed'>, context?: CallContext): Promise<ApiReply> => {
    const { inner, caller, sharedKey, nonce } = admitSealed(deps, call, call.body);
    const reply = await deps.dispatch(inner, caller, context);
    // The tenant's shard is not held here: refused outside the box, so the host can send the
    // same envelope to the shard's owner (it learns the shard, as it would from where it routes).
    const miss = reply.headers?.[SHARD_MISS_HEADER];
    if (miss !== undefined) throw shardMissOutside(miss, deps.replay, caller);
    const sealed = sealReply(
      { status: reply.status ?? 200, headers: reply.headers ?? {}, body: (reply.body ?? new Uint8Array()) as Uint8Array },
      sharedKey,
      nonce,
    );
    return { status: 200, body: sealed, headers: { 'content-type': SEALED_CONTENT_TYPE } };
  };
}
