/**
 * Signed responses: the one definition of what the enclave signs and what a client
 * checks. The enclave (enclave/api/signing.ts) and the sdk (sdk/client.ts) both build the
 * statement here, so the two cannot drift apart.
 *
 * The statement is UTF-8 text, eleven lines joined by a single "\n" (no trailing newline):
 *
 *   agent-service/response-signature/v2
 *   method <HTTP method>                         e.g. method GET
 *   target <JSON string of the request target>  e.g. target "/v1/memory?query=dogs&tenant_id=t1"
 *   organization <JSON string>                   the organization_id header, "" when absent
 *   key-id <32 lowercase hex, or nothing>        keyId(Authorization header): whose key the enclave acted for
 *   tenant <JSON string>                         = the x-tee-tenant header: the tenant(s) the enclave acted for
 *   request-body-sha256 <64 lowercase hex>       of the exact request body bytes (empty → e3b0c442…)
 *   status <decimal HTTP status>
 *   response-body-sha256 <64 lowercase hex>      of the exact response body bytes
 *   timestamp <decimal unix milliseconds>        = the x-tee-timestamp header
 *   state <decimal seq>:<64 lowercase hex>       = the x-tee-state header: the enclave's state head
 *
 * The signature is Ed25519 (the enclave's key, `tee_public_key`, bound in the attestation
 * document as `public_key`) over those bytes, sent base64 in `x-tee-signature`.
 *
 * Method and target bind the answer to the question: a signed answer to one request
 * does not verify as the answer to another. The state head (how many changes the store
 * has made durable, and a hash chained over all of them) lets a client that has seen a
 * newer state refuse an answer from an older one: the host cannot roll the store back
 * unnoticed by a client that remembers (see StateTracker). The target and organization are written as
 * JSON strings so that no value can contain a line break and shift the other fields.
 */
import { createPublicKey, hash, verify as verifyEd25519 } from 'node:crypto';

export const SIGNATURE_HEADER = 'x-tee-signature';
export const TIMESTAMP_HEADER = 'x-tee-timestamp';
export const STATE_HEADER = 'x-tee-state';
/** The tenant the enclave acted for ("" when none; several, comma-separated, for a batch across tenants). */
export const TENANT_HEADER = 'x-tee-tenant';
export const STATEMENT_TAG = 'agent-service/response-signature/v2';
/** The name of the final Server-Sent Event that signs a streamed answer. */
export const STREAM_SIGNATURE_EVENT = 'tee.signature';

/** The request as the client sent it (and as the proxy relayed it to the enclave). */
export interface SignedRequest {
  method: string;
  /** Path plus query string, exactly as on the request line. */
  target: string;
  /** The organization_id header; empty or absent when not sent. */
  organization?: string;
  /**
   * The Authorization header the request carried (to the enclave: the sealed one for a
   * sealed call); only keyId() of it is in the statement. Empty or absent when none.
   */
  authorization?: string;
  body: Uint8Array;
}

/** The enclave's state head: changes made durable so far, and the hash chained over them. */
export interface StateHead {
  seq: number;
  /** SHA-256, lowercase hex. */
  hash: string;
}

export const formatState = (head: StateHead): string => `${head.seq}:${head.hash}`;

export function parseState(text: string | undefined): StateHead | undefined {
  const m = /^(\d{1,15}):([0-9a-f]{64})$/.exec(text ?? '');
  return m ? { seq: Number(m[1]), hash: m[2] } : undefined;
}

export interface SignedAnswer {
  status: number;
  /** SHA-256 of the response body, lowercase hex. */
  bodySha256: string;
  /** Unix milliseconds, decimal. */
  timestamp: string;
  /** formatState(head) of the enclave when it answered. */
  state: string;
  /** The x-tee-tenant header; "" when the answer acted for no tenant. */
  tenant?: string;
}

export interface ResponseSignature {
  /** base64 Ed25519 signature: the x-tee-signature header. */
  signature: string;
  /** The x-tee-timestamp header. */
  timestamp: string;
  /** The x-tee-state header. */
  state: string;
  /** The x-tee-tenant header (absent = ""). */
  tenant?: string;
}

/**
 * Names the API key a request carried without revealing it: the first 16 bytes of a
 * domain-separated SHA-256 of the whole Authorization header; "" when there is none. The
 * signed statement carries it, so an answer to a request the host re-sent with another
 * caller's key does not verify for the caller who sent the original.
 */
export function keyId(authorization: string | undefined): string {
  if (!authorization) return '';
  return hash('sha256', `agent-service/key-id/v1\0${authorization}`, 'hex').slice(0, 32);
}

/**
 * One-shot (crypto.hash): no Hash object, which is a native handle the collector must sweep,
 * and the enclave hashes two bodies for every reply it signs.
 */
export function sha256Hex(bytes: Uint8Array): string {
  return hash('sha256', bytes, 'hex');
}

/** What a statement accepts as an HTTP method. */
export const HTTP_METHOD = /^[A-Z]{1,16}$/;

/** The exact text that is signed. Throws on values that have no place in a statement. */
export function responseStatement(request: SignedRequest, answer: SignedAnswer): string {
  if (!HTTP_METHOD.test(request.method)) throw new Error(`not an HTTP method: ${JSON.stringify(request.method)}`);
  if (!Number.isInteger(answer.status) || answer.status < 100 || answer.status > 599) {
    throw new Error(`not an HTTP status: ${answer.status}`);
  }
  if (!/^[0-9a-f]{64}$/.test(answer.bodySha256)) throw new Error('response body hash must be 64 lowercase hex digits');
  if (!/^\d{1,16}$/.test(answer.timestamp)) throw new Error(`not a timestamp in milliseconds: ${JSON.stringify(answer.timestamp)}`);
  if (!parseState(answer.state)) throw new Error(`not a state head: ${JSON.stringify(answer.state)}`);
  return [
    STATEMENT_TAG,
    `method ${request.method}`,
    `target ${JSON.stringify(request.target)}`,
    `organization ${JSON.stringify(request.organization ?? '')}`,
    `key-id ${keyId(request.authorization)}`,
    `tenant ${JSON.stringify(answer.tenant ?? '')}`,
    `request-body-sha256 ${sha256Hex(request.body)}`,
    `status ${answer.status}`,
    `response-body-sha256 ${answer.bodySha256}`,
    `timestamp ${answer.timestamp}`,
    `state ${answer.state}`,
  ].join('\n');
}

/** Signs an answer with `sign` (the enclave's Ed25519 key; it never leaves the enclave). */
export function signAnswer(
  sign: (message: Uint8Array) => Uint8Array,
  request: SignedRequest,
  answer: { status: number; bodySha256: string; state: string; tenant?: string },
  now: number = Date.now(),
): ResponseSignature {
  const timestamp = String(Math.floor(now));
  // Object.assign, not literals that spread and add: V8 (Node 20) promoted what those made
  // to the old generation, and the enclave signs every reply (docs/performance.md).
  const statement = responseStatement(request, Object.assign({}, answer, { timestamp }));
  const signed = sign(Buffer.from(statement, 'utf8'));
  // A view of the signature, not a copy, to encode it.
  const signature: ResponseSignature = { signature: Buffer.from(signed.buffer, signed.byteOffset, signed.byteLength).toString('base64'), timestamp, state: answer.state };
  if (answer.tenant) signature.tenant = answer.tenant;
  return signature;
}

export type SignatureCheck = { ok: true; signedAt: Date; state: StateHead; tenant: string } | { ok: false; reason: string };

export interface CheckOptions {
  /** Largest accepted difference between the signature's timestamp and `now`. */
  maxSkewMs?: number;
  now?: number;
}

export const DEFAULT_MAX_SKEW_MS = 5 * 60 * 1000;

/**
 * Checks a signature from the x-tee-* headers against what the client sent and got.
 * Never throws; says why a check failed.
 */
export function checkSignature(
  publicKey: Uint8Array,
  request: SignedRequest,
  answer: { status: number; bodySha256: string },
  signature: Partial<ResponseSignature>,
  options: CheckOptions = {},
): SignatureCheck {
  if (!signature.signature) return { ok: false, reason: `the reply has no ${SIGNATURE_HEADER} header: it was not signed by the enclave` };
  if (!signature.timestamp || !/^\d{1,16}$/.test(signature.timestamp)) {
    return { ok: false, reason: `the reply's ${TIMESTAMP_HEADER} header is missing or not unix milliseconds` };
  }
  const state = parseState(signature.state);
  if (!state) return { ok: false, reason: `the reply's ${STATE_HEADER} header is missing or not <seq>:<sha256 hex>` };
  const sig = Buffer.from(signature.signature, 'base64');
  if (sig.length !== 64 || sig.toString('base64') !== signature.signature) {
    return { ok: false, reason: `${SIGNATURE_HEADER} is not a base64 Ed25519 signature` };
  }
  let statement: string;
  try {
    statement = responseStatement(request, { ...answer, timestamp: signature.timestamp, state: signature.state!, tenant: signature.tenant ?? '' });
  } catch (error) {
    return { ok: false, reason: (error as Error).message };
  }
  if (!ed25519Verify(publicKey, Buffer.from(statement, 'utf8'), sig)) {
    return {
      ok: false,
      reason: `${SIGNATURE_HEADER} does not verify with the enclave's key for ${request.method} ${request.target} ` +
        `(status ${answer.status}, response body sha256 ${answer.bodySha256}): the status or body was altered, ` +
        'or the reply belongs to another request (another target, body, organization or API key)',
    };
  }
  const signedAt = Number(signature.timestamp);
  const now = options.now ?? Date.now();
  const maxSkew = options.maxSkewMs ?? DEFAULT_MAX_SKEW_MS;
  if (Math.abs(now - signedAt) > maxSkew) {
    return {
      ok: false,
      reason: `the signature is from ${new Date(signedAt).toISOString()}, more than ${maxSkew} ms from now ` +
        `(${new Date(now).toISOString()}): a replayed or stale reply`,
    };
  }
  return { ok: true, signedAt: new Date(signedAt), state, tenant: signature.tenant ?? '' };
}

/** DER prefix of an SPKI Ed25519 public key; the 32-byte key follows. */
const SPKI_ED25519_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** Ed25519 verification by OpenSSL (tweetnacl's JavaScript is far slower). */
function ed25519Verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (publicKey.length !== 32) return false;
  const key = createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, publicKey]), format: 'der', type: 'spki' });
  return verifyEd25519(null, message, key, signature);
}

// ---------------------------------------------------------------------------------------
// Streamed answers (Server-Sent Events)

/**
 * A streamed answer cannot carry its signature in headers (sent before the body), so its
 * last event carries it, shaped so that strict clients read it as a harmless event: a chat
 * chunk with no choices (the shape of OpenAI's usage chunk, which every client skips over),
 * and, in a Responses stream, an event of a type clients do not know (which they ignore):
 *
 *   data: {"object":"chat.completion.chunk","type":"tee.signature","choices":[],"tee_signature":{"signature":"<base64>","timestamp":"<ms>","state":"<seq>:<hex>"}}\n\n
 *
 * It signs the same statement as a unary answer, where the response body is every byte
 * streamed before that event and the status is the stream's HTTP status. A chat stream's
 * `data: [DONE]\n\n` comes after it, so it stays the last thing clients read (it is
 * constant: nothing to sign).
 */
export function streamSignatureEvent(signature: ResponseSignature): string {
  const tee_signature = { signature: signature.signature, timestamp: signature.timestamp, state: signature.state, ...(signature.tenant ? { tenant: signature.tenant } : {}) };
  return `data: ${JSON.stringify({ object: 'chat.completion.chunk', type: STREAM_SIGNATURE_EVENT, choices: [], tee_signature })}\n\n`;
}

const DONE_EVENT = 'data: [DONE]\n\n';
const SIGNATURE_MARKER = `data: {"object":"chat.completion.chunk","type":"${STREAM_SIGNATURE_EVENT}",`;

/**
 * Splits a complete SSE transcript into the signed body and the signature event, which is
 * the last event (or the last before `data: [DONE]`). Returns undefined when the transcript
 * does not end that way.
 */
export function splitSignedStream(transcript: Uint8Array): { body: Uint8Array; signature: ResponseSignature } | undefined {
  let text = Buffer.from(transcript).toString('latin1'); // 1 char per byte: indexes are byte offsets
  if (text.endsWith(DONE_EVENT)) text = text.slice(0, -DONE_EVENT.length);
  const at = text.lastIndexOf(SIGNATURE_MARKER);
  if (at < 0 || (at > 0 && !text.slice(0, at).endsWith('\n\n'))) return undefined;
  const rest = text.slice(at + 'data: '.length);
  if (!rest.endsWith('\n\n') || rest.slice(0, -2).includes('\n')) return undefined;
  let data: unknown;
  try {
    data = (JSON.parse(rest.slice(0, -2)) as { tee_signature?: unknown }).tee_signature;
  } catch {
    return undefined;
  }
  const { signature, timestamp, state, tenant } = (data ?? {}) as Record<string, unknown>;
  if (typeof signature !== 'string' || typeof timestamp !== 'string' || typeof state !== 'string') return undefined;
  if (tenant !== undefined && typeof tenant !== 'string') return undefined;
  return { body: transcript.subarray(0, at), signature: { signature, timestamp, state, ...(tenant ? { tenant } : {}) } };
}

// ---------------------------------------------------------------------------------------
// Rollback detection

/**
 * Remembers the newest state head a client has seen from one service, and refuses an
 * answer from an older state. Only answers to requests sent after a newer head was seen
 * are judged (`floor()` is taken when a request is sent), so concurrent requests that
 * arrive out of order are not mistaken for a rollback. What it cannot know: a client that
 * never saw the newer state (a new client, or one whose memory was lost) accepts the older
 * one; persist the head (StateMemory) to carry it across runs.
 */
export class StateTracker {
  constructor(private newest?: StateHead) {}

  get current(): StateHead | undefined {
    return this.newest;
  }

  /** The head an answer to a request sent now must not be older than. */
  floor(): StateHead | undefined {
    return this.newest;
  }

  /** Says why `state` cannot be accepted against `floor`, or records it and returns undefined. */
  observe(state: StateHead, floor: StateHead | undefined): string | undefined {
    if (floor && state.seq < floor.seq) {
      return `the answer comes from state ${state.seq}, older than state ${floor.seq} this client has already seen: ` +
        'the host may be serving an older copy of the enclave\'s store (a rollback)';
    }
    if (floor && state.seq === floor.seq && state.hash !== floor.hash) {
      return `the answer comes from a state ${state.seq} whose hash differs from the one this client has seen: ` +
        'the host may be serving another copy of the store (a fork)';
    }
    if (!this.newest || state.seq > this.newest.seq) this.newest = state;
    return undefined;
  }
}
