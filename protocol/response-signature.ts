/**
 * Signed responses: the one definition of what the enclave signs and what a client
 * checks. The enclave (enclave/api/signing.ts) and the sdk (sdk/client.ts) both build the
 * statement here, so the two cannot drift apart.
 *
 * The statement is UTF-8 text, sixteen lines joined by a single "\n" (no trailing newline):
 *
 *   agent-service/response-signature/v5
 *   method <HTTP method>                         e.g. method GET
 *   target <JSON string of the request target>  e.g. target "/v1/memory?query=dogs&tenant_id=t1"
 *   organization <JSON string>                   the organization_id header, "" when absent
 *   key-id <32 lowercase hex, or nothing>        keyId(Authorization header): whose key the enclave acted for
 *   tenant <JSON string>                         = the x-tee-tenant header: the tenant(s) the enclave acted for
 *   upstream <JSON string>                       = the x-tee-upstream header: where a chat's prompt and memories went
 *                                                (upstream.ts: `local`, or origin + certificate key hashes); "" when none
 *   request-body-sha256 <64 lowercase hex>       of the exact request body bytes (empty → e3b0c442…)
 *   status <decimal HTTP status>
 *   response-body-sha256 <64 lowercase hex>      of the exact response body bytes
 *   timestamp <decimal unix milliseconds>        = the x-tee-timestamp header
 *   state <decimal seq>:<64 lowercase hex>       = the x-tee-state header: the enclave's state head
 *   store <32 lowercase hex>                     = the x-tee-store header: the id of the sealed store it heads
 *   shard <index>/<count>                        = the x-tee-shard header: which of the service's shards that store is
 *   known-state <shard>/<seq>:<hex>,… or nothing the x-tee-known-state header the client sent (the newest head it saw of each shard)
 *   ancestor <yes|no|unknown, or nothing>        = the x-tee-ancestor header: is the client's head of this shard on its chain?
 *
 * The signature is Ed25519 (the enclave's key, `tee_public_key`, bound in the attestation
 * document as `public_key`) over those bytes, sent base64 in `x-tee-signature`.
 *
 * Method and target bind the answer to the question: a signed answer to one request
 * does not verify as the answer to another. The state head (how many changes the store
 * has made durable, and a hash chained over all of them) lets a client that has seen a
 * newer state refuse an answer from an older one: the host cannot roll the store back
 * unnoticed by a client that remembers (see StateTracker). The store id names which sealed store
 * the head belongs to, so a wiped or replaced store is not mistaken for the one the client
 * knew. The known state and the enclave's answer about it (is that head an ancestor of, or
 * equal to, its own?) catch a fork: an older copy of the store that other writes have pushed
 * past the sequence number the client saw. The shard (v5) names which of the service's shards
 * (protocol/shards.ts) the head is of: each shard is its own store with its own chain, and an
 * answer for a tenant must come from that tenant's shard. The upstream (v4) names the chat model that saw
 * the prompt and the tenant's memories, as the enclave's TLS saw it, so a client can refuse an
 * answer whose memories went anywhere else (requireUpstream). The target and organization are written as
 * JSON strings so that no value can contain a line break and shift the other fields.
 */
import { hash } from 'node:crypto';
import sodium from 'sodium-native';
import { MAX_SHARDS, parseShard, shardOfAnswer } from './shards.js';
import { parseUpstream } from './upstream.js';

export { UPSTREAM_HEADER } from './upstream.js';

export const SIGNATURE_HEADER = 'x-tee-signature';
export const TIMESTAMP_HEADER = 'x-tee-timestamp';
export const STATE_HEADER = 'x-tee-state';
/** The tenant the enclave acted for ("" when none; several, comma-separated, for a batch across tenants). */
export const TENANT_HEADER = 'x-tee-tenant';
/** The id of the sealed store whose head x-tee-state is. */
export const STORE_HEADER = 'x-tee-store';
/** Sent by a client: the newest head it has seen (<seq>:<hash>), for the enclave to place on its chain. */
export const KNOWN_STATE_HEADER = 'x-tee-known-state';
/** Whether the known state is on the enclave's chain of heads: yes, no or unknown (absent when none was sent). */
export const ANCESTOR_HEADER = 'x-tee-ancestor';
/** Which of the service's shards the store of x-tee-state is: <index>/<count> (protocol/shards.ts). */
export const SHARD_HEADER = 'x-tee-shard';
export const STATEMENT_TAG = 'agent-service/response-signature/v5';
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
  /** The x-tee-known-state header the request carried (formatKnownStates of the heads it saw); empty or absent when none. */
  knownState?: string;
  body: Uint8Array;
}

/**
 * Whether a head the client knows lies on the enclave's chain (equal to its head or an
 * ancestor of it): `unknown` when the enclave no longer holds that part of its chain.
 */
export type Ancestry = 'yes' | 'no' | 'unknown';
export const isAncestry = (value: unknown): value is Ancestry => value === 'yes' || value === 'no' || value === 'unknown';

/** A store id: 16 random bytes, lowercase hex (enclave/storage/store.ts). */
export const STORE_ID = /^[0-9a-f]{32}$/;

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

/** The heads a client has seen, by shard index (what it sends as x-tee-known-state). */
export type KnownStates = ReadonlyMap<number, StateHead>;

/** `<shard>/<seq>:<hash>` for each shard, in shard order, comma-separated; "" for none. */
export const formatKnownStates = (heads: KnownStates | undefined): string =>
  [...(heads ?? new Map<number, StateHead>())].sort(([a], [b]) => a - b).map(([shard, head]) => `${shard}/${formatState(head)}`).join(',');

/** The heads of an x-tee-known-state header; undefined when it is not one (shards in increasing order, each at most once). */
export function parseKnownStates(text: string | undefined): Map<number, StateHead> | undefined {
  if (!text || text.length > MAX_SHARDS * 86) return undefined;
  const heads = new Map<number, StateHead>();
  let last = -1;
  for (const part of text.split(',')) {
    const m = /^(\d{1,2})\/(.*)$/.exec(part);
    const head = m ? parseState(m[2]) : undefined;
    const shard = m ? Number(m[1]) : -1;
    if (!head || shard <= last || shard >= MAX_SHARDS) return undefined;
    heads.set(shard, head);
    last = shard;
  }
  return heads;
}

export interface SignedAnswer {
  status: number;
  /** SHA-256 of the response body, lowercase hex. */
  bodySha256: string;
  /** Unix milliseconds, decimal. */
  timestamp: string;
  /** formatState(head) of the enclave when it answered. */
  state: string;
  /** The id of the store the head belongs to. */
  store: string;
  /** formatShard: which of the service's shards that store is. */
  shard: string;
  /** Whether the request's known state is on the enclave's chain; absent (or "") when the request named none. */
  ancestor?: Ancestry | '';
  /** The x-tee-tenant header; "" when the answer acted for no tenant. */
  tenant?: string;
  /** The x-tee-upstream header (upstream.ts); "" when no chat model was used. */
  upstream?: string;
}

export interface ResponseSignature {
  /** base64 Ed25519 signature: the x-tee-signature header. */
  signature: string;
  /** The x-tee-timestamp header. */
  timestamp: string;
  /** The x-tee-state header. */
  state: string;
  /** The x-tee-store header. */
  store: string;
  /** The x-tee-shard header. */
  shard: string;
  /** The x-tee-ancestor header (absent when the request named no known state). */
  ancestor?: Ancestry;
  /** The x-tee-tenant header (absent = ""). */
  tenant?: string;
  /** The x-tee-upstream header (absent = ""). */
  upstream?: string;
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
  if (!STORE_ID.test(answer.store)) throw new Error(`not a store id: ${JSON.stringify(answer.store)}`);
  if (!parseShard(answer.shard)) throw new Error(`not a shard: ${JSON.stringify(answer.shard)}`);
  const known = request.knownState ?? '';
  if (known !== '' && !parseKnownStates(known)) throw new Error(`not known state heads: ${JSON.stringify(known.slice(0, 200))}`);
  const ancestor = answer.ancestor ?? '';
  if (ancestor !== '' && !isAncestry(ancestor)) throw new Error(`not an ancestry: ${JSON.stringify(ancestor)}`);
  const upstream = answer.upstream ?? '';
  if (upstream !== '' && !parseUpstream(upstream)) throw new Error(`not an upstream: ${JSON.stringify(upstream.slice(0, 200))}`);
  return [
    STATEMENT_TAG,
    `method ${request.method}`,
    `target ${JSON.stringify(request.target)}`,
    `organization ${JSON.stringify(request.organization ?? '')}`,
    `key-id ${keyId(request.authorization)}`,
    `tenant ${JSON.stringify(answer.tenant ?? '')}`,
    `upstream ${JSON.stringify(upstream)}`,
    `request-body-sha256 ${sha256Hex(request.body)}`,
    `status ${answer.status}`,
    `response-body-sha256 ${answer.bodySha256}`,
    `timestamp ${answer.timestamp}`,
    `state ${answer.state}`,
    `store ${answer.store}`,
    `shard ${answer.shard}`,
    `known-state ${known}`,
    `ancestor ${ancestor}`,
  ].join('\n');
}

/** Signs an answer with `sign` (the enclave's Ed25519 key; it never leaves the enclave). */
export function signAnswer(
  sign: (message: Uint8Array) => Uint8Array,
  request: SignedRequest,
  answer: { status: number; bodySha256: string; state: string; store: string; shard: string; ancestor?: Ancestry; tenant?: string; upstream?: string },
  now: number = Date.now(),
): ResponseSignature {
  const timestamp = String(Math.floor(now));
  // Object.assign, not literals that spread and add: V8 (Node 20) promoted what those made,
  // and the enclave signs every reply (docs/performance-log.md#collections-again-2026-11-25-afternoon).
  const statement = responseStatement(request, Object.assign({}, answer, { timestamp }));
  const signed = sign(Buffer.from(statement, 'utf8'));
  // A view of the signature, not a copy, to encode it.
  const signature: ResponseSignature = { signature: Buffer.from(signed.buffer, signed.byteOffset, signed.byteLength).toString('base64'), timestamp, state: answer.state, store: answer.store, shard: answer.shard };
  if (answer.ancestor) signature.ancestor = answer.ancestor;
  if (answer.tenant) signature.tenant = answer.tenant;
  if (answer.upstream) signature.upstream = answer.upstream;
  return signature;
}

export type SignatureCheck =
  | { ok: true; signedAt: Date; state: StateHead; store: string; shard: { index: number; count: number }; ancestor?: Ancestry; tenant: string; upstream: string }
  | { ok: false; reason: string };

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
  if (!signature.store || !STORE_ID.test(signature.store)) return { ok: false, reason: `the reply's ${STORE_HEADER} header is missing or not a store id` };
  const shard = parseShard(signature.shard);
  if (!shard) return { ok: false, reason: `the reply's ${SHARD_HEADER} header is missing or not <index>/<count>` };
  const ancestor = signature.ancestor ?? '';
  if (ancestor !== '' && !isAncestry(ancestor)) return { ok: false, reason: `the reply's ${ANCESTOR_HEADER} header is not yes, no or unknown` };
  const sig = Buffer.from(signature.signature, 'base64');
  if (sig.length !== 64 || sig.toString('base64') !== signature.signature) {
    return { ok: false, reason: `${SIGNATURE_HEADER} is not a base64 Ed25519 signature` };
  }
  let statement: string;
  try {
    statement = responseStatement(request, { ...answer, timestamp: signature.timestamp, state: signature.state!, store: signature.store, shard: signature.shard!, ancestor, tenant: signature.tenant ?? '', upstream: signature.upstream ?? '' });
  } catch (error) {
    return { ok: false, reason: (error as Error).message };
  }
  if (!ed25519Verify(publicKey, Buffer.from(statement, 'utf8'), sig)) {
    return {
      ok: false,
      reason: `${SIGNATURE_HEADER} does not verify with the enclave's key for ${request.method} ${request.target} ` +
        `(status ${answer.status}, response body sha256 ${answer.bodySha256}): the status or body was altered, ` +
        'or the reply belongs to another request (another target, body, organization, API key or known state)',
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
  return { ok: true, signedAt: new Date(signedAt), state, store: signature.store, shard, ...(ancestor ? { ancestor } : {}), tenant: signature.tenant ?? '', upstream: signature.upstream ?? '' };
}

/** DER prefix of an SPKI Ed25519 public key; the 32-byte key follows. */
/**
 * Ed25519 verification by libsodium: about a third of OpenSSL's time through node:crypto
 * (~120 against ~340 us a check on this machine, before a KeyObject is even made), and every
 * answer a client takes is checked (docs/performance-log.md, 2026-11-27 afternoon).
 */
export function ed25519Verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (publicKey.length !== sodium.crypto_sign_PUBLICKEYBYTES || signature.length !== sodium.crypto_sign_BYTES) return false;
  return sodium.crypto_sign_verify_detached(signature, message, publicKey);
}

// ---------------------------------------------------------------------------------------
// Streamed answers (Server-Sent Events)

/**
 * A streamed answer cannot carry its signature in headers (sent before the body), so its
 * last event carries it, shaped so that strict clients read it as a harmless event: a chat
 * chunk with no choices (the shape of OpenAI's usage chunk, which every client skips over),
 * and, in a Responses stream, an event of a type clients do not know (which they ignore):
 *
 *   data: {"object":"chat.completion.chunk","type":"tee.signature","choices":[],"tee_signature":{"signature":"<base64>","timestamp":"<ms>","state":"<seq>:<hex>","store":"<hex>","shard":"<index>/<count>"}}\n\n
 *
 * (with "ancestor", "tenant" and "upstream" too when the answer has them).
 *
 * It signs the same statement as a unary answer, where the response body is every byte
 * streamed before that event and the status is the stream's HTTP status. A chat stream's
 * `data: [DONE]\n\n` comes after it, so it stays the last thing clients read (it is
 * constant: nothing to sign).
 */
export function streamSignatureEvent(signature: ResponseSignature): string {
  return `data: ${JSON.stringify({ object: 'chat.completion.chunk', type: STREAM_SIGNATURE_EVENT, choices: [], tee_signature: signatureFields(signature) })}\n\n`;
}

function signatureFields(signature: ResponseSignature): Record<string, string> {
  return {
    signature: signature.signature, timestamp: signature.timestamp, state: signature.state, store: signature.store, shard: signature.shard,
    ...(signature.ancestor ? { ancestor: signature.ancestor } : {}), ...(signature.tenant ? { tenant: signature.tenant } : {}),
    ...(signature.upstream ? { upstream: signature.upstream } : {}),
  };
}

/** The key a stream's final event carries its signature under, as its last member. */
const EMBEDDED_SIGNATURE = ',"tee_signature":';

/**
 * A stream's final event as it is signed: `data: <json>\n\n`, the JSON without its signature.
 * Responses streams end this way (response.completed), since the SDKs' Responses helpers
 * refuse an event of a type they do not know; the signature then covers that event too.
 */
export const finalEventBytes = (json: string): string => `data: ${json}\n\n`;

/** Whether `json` can carry the signature as its last member: a non-empty JSON object. */
const isFinalEventJson = (json: string): boolean => json.startsWith('{') && json.endsWith('}') && json !== '{}';

/** The final event as sent: its JSON with `tee_signature` added as the last member. */
export function signedFinalEvent(json: string, signature: ResponseSignature): string {
  if (!isFinalEventJson(json)) throw new Error('a final event must be a non-empty JSON object');
  return `data: ${json.slice(0, -1)}${EMBEDDED_SIGNATURE}${JSON.stringify(signatureFields(signature))}}\n\n`;
}

const DONE_EVENT = 'data: [DONE]\n\n';
const SIGNATURE_MARKER = `data: {"object":"chat.completion.chunk","type":"${STREAM_SIGNATURE_EVENT}",`;

/**
 * Splits a complete SSE transcript into the signed body and the signature: a signature event
 * that is the last event (or the last before `data: [DONE]`), or a signature carried as the
 * last member of the last event (signedFinalEvent), in which case that event without it is
 * part of the signed body. Returns undefined when the transcript does not end either way.
 */
export function splitSignedStream(transcript: Uint8Array): { body: Uint8Array; signature: ResponseSignature } | undefined {
  let text = Buffer.from(transcript).toString('latin1'); // 1 char per byte: indexes are byte offsets
  if (text.endsWith(DONE_EVENT)) text = text.slice(0, -DONE_EVENT.length);
  const at = text.lastIndexOf(SIGNATURE_MARKER);
  if (at < 0) return splitEmbedded(transcript, text);
  if (at > 0 && !text.slice(0, at).endsWith('\n\n')) return undefined;
  const rest = text.slice(at + 'data: '.length);
  if (!rest.endsWith('\n\n') || rest.slice(0, -2).includes('\n')) return undefined;
  let data: unknown;
  try {
    data = (JSON.parse(rest.slice(0, -2)) as { tee_signature?: unknown }).tee_signature;
  } catch {
    return undefined;
  }
  const signature = signatureOf(data);
  return signature && { body: transcript.subarray(0, at), signature };
}

/** The signature fields a stream carries (signatureFields' output), or undefined when they are not that. */
function signatureOf(data: unknown): ResponseSignature | undefined {
  const { signature, timestamp, state, store, shard, ancestor, tenant, upstream } = (data ?? {}) as Record<string, unknown>;
  if (typeof signature !== 'string' || typeof timestamp !== 'string' || typeof state !== 'string' || typeof store !== 'string' || typeof shard !== 'string') return undefined;
  if (tenant !== undefined && typeof tenant !== 'string') return undefined;
  if (upstream !== undefined && typeof upstream !== 'string') return undefined;
  if (ancestor !== undefined && !isAncestry(ancestor)) return undefined;
  return { signature, timestamp, state, store, shard, ...(ancestor ? { ancestor } : {}), ...(tenant ? { tenant } : {}), ...(upstream ? { upstream } : {}) };
}

function splitEmbedded(transcript: Uint8Array, text: string): { body: Uint8Array; signature: ResponseSignature } | undefined {
  if (!text.endsWith('}\n\n')) return undefined;
  const start = text.lastIndexOf('\n\ndata: ', text.length - 3);
  const eventAt = start < 0 ? (text.startsWith('data: ') ? 0 : -1) : start + 2;
  if (eventAt < 0) return undefined;
  const line = text.slice(eventAt + 'data: '.length, -2);
  const cut = line.lastIndexOf(EMBEDDED_SIGNATURE);
  if (cut < 0 || line.includes('\n')) return undefined;
  let parsed: ResponseSignature | undefined;
  try {
    parsed = signatureOf(JSON.parse(line.slice(cut + EMBEDDED_SIGNATURE.length, -1)));
  } catch {
    return undefined;
  }
  if (!parsed) return undefined;
  // Exactly as signedFinalEvent writes it, or it is not ours (nothing else may ride there).
  const unsigned = `${line.slice(0, cut)}}`;
  // What the host put before the member may be no object at all: not ours either (and not an exception).
  if (!isFinalEventJson(unsigned) || signedFinalEvent(unsigned, parsed) !== text.slice(eventAt)) return undefined;
  const body = Buffer.concat([Buffer.from(transcript.subarray(0, eventAt)), Buffer.from(finalEventBytes(unsigned), 'latin1')]);
  return { body: new Uint8Array(body), signature: parsed };
}

// ---------------------------------------------------------------------------------------
// Rollback detection


/** A head a client has seen, and the store it belongs to (absent in a head saved before stores were named). */
export interface KnownState extends StateHead {
  store?: string;
}

/** The heads a client has seen, by shard: what answers to a request sent now must continue. */
export type Floor = ReadonlyMap<number, KnownState>;

/** What a signed answer says about the enclave's state (checkSignature's result). */
export interface ObservedState {
  state: StateHead;
  store: string;
  /** The shard whose store and head these are, and the service's shard count (x-tee-shard); absent: shard 0 of 1. */
  shard?: { index: number; count: number };
  /** The tenant(s) the answer acted for (x-tee-tenant); "" or absent for none. */
  tenant?: string;
  /** The enclave's answer about the floor the request carried for this shard; absent when it carried none. */
  ancestor?: Ancestry;
}

type SavedHead = { store?: string; seq: number; hash: string };

/** The saved form of a StateTracker (toJSON / StateTracker.from): a small JSON object. */
export type SavedState =
  | { v: 1; newest?: SavedHead }
  /** `shards`: the service's shard count once seen; `heads`: the newest head of each shard seen, by index. */
  | { v: 2; shards?: number; heads: Record<string, SavedHead> };

/**
 * Remembers, for each shard of one service (protocol/shards.ts: each shard is its own store
 * with its own chain of heads), the newest state head a client has seen and the store it
 * belongs to, and refuses an answer that does not continue it:
 *
 * - from another shard than its tenant's (or, acting for no tenant, than shard 0), or from a
 *   service with another shard count than one seen before;
 * - from another store (a wiped or replaced store: its id differs);
 * - from an older state (a rollback), or the same state with another hash;
 * - from a newer state that the enclave itself says does not descend from the head this
 *   client saw (`ancestor no`: a fork, e.g. an older copy of the store that other writes
 *   have pushed past this client's sequence number), or cannot place (`ancestor unknown`).
 *
 * The client sends floor() with each request (x-tee-known-state: its head of every shard) and
 * the enclave signs its answer about the head of the answer's shard. Only answers to requests
 * sent after a newer head was seen are judged against it (`floor()` is taken when a request
 * is sent), so concurrent requests that arrive out of order are not mistaken for a rollback.
 * What it cannot know: a client that never saw the newer state (a new tracker) accepts the
 * older one; keep the tracker (connect() does, per service, for the life of the process) and
 * persist it across runs (toJSON / StateTracker.from). To accept a deliberately new store,
 * start a new tracker.
 */
export class StateTracker {
  private readonly heads = new Map<number, KnownState>();
  private shards?: number;

  /** A tracker that has seen `newest` (of shard `shard`, default 0: a service of one shard, or a receipt's shard). */
  constructor(newest?: KnownState, shard = 0) {
    if (newest) this.heads.set(shard, { ...newest });
  }

  /** A tracker from toJSON()'s output (or its JSON text; v 1, from before shards, is shard 0's head); throws on anything else. */
  static from(saved: SavedState | string): StateTracker {
    const value = (typeof saved === 'string' ? JSON.parse(saved) : saved) as Partial<SavedState> | null;
    const tracker = new StateTracker();
    if (value?.v === 1) {
      if (value.newest !== undefined) tracker.heads.set(0, savedHead(value.newest));
      return tracker;
    }
    if (value?.v !== 2 || typeof value.heads !== 'object' || value.heads === null) throw new TypeError('not a saved StateTracker (v 1 or 2)');
    if (value.shards !== undefined && !parseShard(`0/${value.shards}`)) throw new TypeError('a saved StateTracker holds an invalid shard count');
    tracker.shards = value.shards;
    for (const [index, head] of Object.entries(value.heads)) {
      const shard = Number(index);
      if (!/^\d{1,2}$/.test(index) || shard >= (value.shards ?? MAX_SHARDS)) throw new TypeError('a saved StateTracker holds an invalid shard');
      tracker.heads.set(shard, savedHead(head));
    }
    return tracker;
  }

  toJSON(): SavedState {
    const heads: Record<string, SavedHead> = {};
    for (const [shard, head] of [...this.heads].sort(([a], [b]) => a - b)) heads[shard] = { ...head };
    return { v: 2, ...(this.shards === undefined ? {} : { shards: this.shards }), heads };
  }

  /** The newest head seen of shard 0 (a service of one shard: its only one). */
  get current(): KnownState | undefined {
    return this.heads.get(0);
  }

  /** The newest head seen of `shard`. */
  head(shard: number): KnownState | undefined {
    return this.heads.get(shard);
  }

  /** The service's shard count, once an answer has said it. */
  get shardCount(): number | undefined {
    return this.shards;
  }

  /** The heads an answer to a request sent now must continue (one per shard seen); undefined before any. */
  floor(): Floor | undefined {
    return this.heads.size === 0 ? undefined : new Map([...this.heads].map(([shard, head]) => [shard, { ...head }]));
  }

  /** Says why `observed` cannot be accepted against `floor`, or records it and returns undefined. */
  observe(observed: ObservedState, floor: Floor | undefined): string | undefined {
    const { state, store, shard = ONE_SHARD } = observed;
    if (this.shards !== undefined && shard.count !== this.shards) {
      return `the answer says the service has ${shard.count} shard${shard.count === 1 ? '' : 's'}, but this client has seen ${this.shards}: ` +
        'the host may have replaced the enclave\'s store; if the operator started a new store on purpose, use a new StateTracker';
    }
    const expected = shardOfAnswer(observed.tenant, shard.count);
    if (shard.index !== expected) {
      const tenant = (observed.tenant ?? '').split(',')[0];
      return `the answer comes from shard ${shard.index} of ${shard.count}, but ${tenant ? `tenant ${JSON.stringify(tenant)} is in shard ${expected}` : `an answer for no tenant comes from shard ${expected}`}: ` +
        'the host may be answering with another shard\'s store';
    }
    const below = floor?.get(shard.index);
    const refusal = below && refuse(observed, below);
    if (refusal) return refusal;
    const newest = this.heads.get(shard.index);
    // Judged against no floor (sent before any head of this shard was seen), an answer from another store than
    // one seen since is still refused: one tracker follows one store per shard, and a host serving two at
    // once is showing a wiped or replaced copy (a new store on purpose takes a new tracker).
    if (!below && newest?.store !== undefined && store !== newest.store) {
      return `the answer comes from store ${store}, but this client has seen store ${newest.store} (state ${headText(newest)}) for shard ${shard.index}: ` +
        'the host may have wiped or replaced the enclave\'s store; if the operator started a new store on purpose, use a new StateTracker';
    }
    this.shards = shard.count;
    if (!newest || (newest.store !== undefined && newest.store !== store) || state.seq > newest.seq) {
      this.heads.set(shard.index, { store, seq: state.seq, hash: state.hash });
    } else if (newest.store === undefined && state.seq === newest.seq && state.hash === newest.hash) {
      this.heads.set(shard.index, { store, ...state });
    }
    return undefined;
  }
}

const ONE_SHARD = { index: 0, count: 1 };

function savedHead(saved: SavedHead): KnownState {
  const head = parseState(`${saved?.seq}:${saved?.hash}`);
  if (!head || (saved.store !== undefined && !STORE_ID.test(saved.store))) throw new TypeError('a saved StateTracker holds an invalid head');
  return saved.store === undefined ? head : { store: saved.store, ...head };
}

const headText = (head: StateHead) => `${head.seq}:${head.hash.slice(0, 16)}…`;

function refuse({ state, store, ancestor }: ObservedState, floor: KnownState): string | undefined {
  if (floor.store !== undefined && store !== floor.store) {
    return `the answer comes from store ${store}, but this client has seen store ${floor.store} (state ${headText(floor)}): ` +
      'the host may have wiped or replaced the enclave\'s store; if the operator started a new store on purpose, use a new StateTracker';
  }
  if (state.seq < floor.seq) {
    return `the answer comes from state ${state.seq}, older than state ${floor.seq} this client has already seen: ` +
      'the host may be serving an older copy of the enclave\'s store (a rollback)';
  }
  if (state.seq === floor.seq && state.hash !== floor.hash) {
    return `the answer comes from a state ${state.seq} whose hash differs from the one this client has seen: ` +
      'the host may be serving another copy of the store (a fork)';
  }
  if (ancestor === 'no') {
    return `the answer comes from state ${headText(state)}, which does not descend from state ${headText(floor)} this client has seen ` +
      '(the enclave says that head is not on its chain): the host may be serving an older copy of the store that later writes have moved past (a fork)';
  }
  if (ancestor !== 'yes' && !(state.seq === floor.seq && state.hash === floor.hash)) {
    return `the answer comes from state ${headText(state)}, and the enclave ${ancestor === 'unknown' ? 'cannot tell' : 'did not say'} ` +
      `whether it descends from state ${headText(floor)} this client has seen`;
  }
  return undefined;
}
