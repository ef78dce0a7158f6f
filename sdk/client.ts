/**
 * A client that trusts the enclave, not the host in front of it.
 *
 *   const tee = await connect({ baseUrl, rootPem, pcrs: { 0: '…' } });
 *   // or: connect({ baseUrl, manifest: <signed release manifest>, operatorKey: '<OPERATOR_PUBKEY>' })
 *   await tee.call('GET', '/v1/memory?tenant_id=t1&query=dogs');        // signature checked
 *   await tee.sealedCall('POST', '/v1/memory', { tenant_id, content });  // the host sees ciphertext
 *
 * connect() fetches /v1/attestation with a fresh random nonce and verifies the document
 * (chain to the pinned root, signature, nonce, PCRs, key bindings) before anything else.
 * Every later answer must carry a valid signature by the attested key, or the call throws.
 *
 * Rollback and fork detection: every request carries the newest state head this process
 * has seen from the service (x-tee-known-state), and every answer must continue it: same
 * store, no older state, and a newer state only if the enclave signs that the known head is
 * on its chain (StateTracker). The tracker is kept per service origin for the life of the
 * process, so connecting again (after an enclave restart changed its keys) or
 * `tee.reconnect()` keeps it; pass `stateTracker` to choose one, e.g.
 * `StateTracker.from(readFileSync(file, 'utf8'))`, and save `JSON.stringify(tee.state)`
 * to carry it across runs. To accept a deliberately new store (the operator started over),
 * pass a `new StateTracker()`.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Check, DecodedDocument } from '../protocol/attestation/verify.js';
import { verifyAttestation } from '../protocol/attestation/verify.js';
import { verifyManifest, type VerifiedManifest } from './attestation/manifest.js';
import {
  ANCESTOR_HEADER, checkSignature, DEFAULT_MAX_SKEW_MS, formatKnownStates, isAncestry, KNOWN_STATE_HEADER, sha256Hex, SHARD_HEADER, SIGNATURE_HEADER, STATE_HEADER,
  StateTracker, splitSignedStream, STORE_HEADER, TENANT_HEADER, STREAM_SIGNATURE_EVENT, TIMESTAMP_HEADER, UPSTREAM_HEADER, type Ancestry, type Floor,
  type SignedRequest, type StateHead,
} from '../protocol/response-signature.js';
import {
  openReply, ClientSealingKey, SEALED_CONTENT_TYPE, SEALED_PATH, SealedFormatError, TENANT_KEY_MAX_BYTES, TENANT_KEY_MIN_BYTES,
} from '../protocol/sealed.js';
import { SEALED_STREAM_PATH, sealedStreamKey } from '../protocol/sealed-stream.js';
import { normalizeOrigin, upstreamRefusal } from '../protocol/upstream.js';
import { parseUserData } from '../protocol/user-data.js';
import { AttestationError, ResponseSignatureError, RollbackError, SealedCallError, UpstreamError } from './errors.js';
import { readSealedStream, type SealedStream } from './sealed-stream.js';
import { fetchTransport, undiciTransport, type Transport } from './transport.js';

export { AttestationError, ResponseSignatureError, RollbackError, SealedCallError, TrustError, UpstreamError } from './errors.js';
export type { SealedStream } from './sealed-stream.js';

export interface ConnectOptions {
  /** The service's origin, e.g. http://127.0.0.1:8080 (a path prefix would change the signed target). */
  baseUrl: string;
  /** PEM of the root to pin; default the AWS Nitro Enclaves Root G1. Locally: $DATA_DIR/simulated-root.pem. */
  rootPem?: string;
  /**
   * Expected PCR values (hex or bytes) by index: required, since without them any code
   * signed by the root (on Nitro: any enclave image at all) would be accepted.
   */
  pcrs?: Record<number, string | Uint8Array>;
  /**
   * A signed release manifest (its JSON text, or parsed) whose PCRs to pin instead of
   * `pcrs`: its signature must verify with `operatorKey`, which is then required, since the
   * key a manifest names, or a service advertises, could be anybody's (sdk/attestation/manifest.ts).
   */
  manifest?: string | object;
  /**
   * Development only: accept whatever code the root vouches for, without pinning PCRs
   * (a local simulated service whose PCRs change with every build). Never in production.
   */
  insecureSkipPcrPinning?: boolean;
  /** Expected operator Ed25519 key (base64, hex or bytes), checked against the document's user_data. */
  operatorKey?: string | Uint8Array;
  /** Sent as the Authorization header of plain calls, and only inside the envelope of sealed calls. */
  authorization?: string;
  /**
   * A file holding the tenant key (32 to 256 bytes, e.g. `head -c 32 /dev/urandom`): sent
   * inside every sealed call, it seals the tenant's memories under a key derived from it
   * (docs/api.md, Tenant keys). Never sent with a plain call. Lose it and the memories are gone.
   */
  tenantKeyFile?: string;
  /** The tenant key itself, instead of tenantKeyFile. */
  tenantKey?: Uint8Array;
  /** Largest accepted gap between a signature's timestamp and this machine's clock (default 5 minutes). */
  maxClockSkewMs?: number;
  /** Time at which certificates must be valid (default now). */
  at?: Date;
  /**
   * Development only: accept an enclave in debug mode (PCR0, PCR1 and PCR2 all zero), whose
   * memory the host can read. Refused by default.
   */
  allowDebug?: boolean;
  /** Oldest accepted attestation document, in seconds (default: its leaf certificate's lifetime; the nonce makes it fresh anyway). */
  maxAgeSeconds?: number;
  /**
   * Remembers the newest state head (and store) seen from this service, to refuse answers
   * from another store, an older state or a fork. Default: the one this process keeps for
   * the service's origin (stateTrackerFor(baseUrl)), so a client that connects again, after
   * a restart changed the enclave's keys, still remembers. Pass one to carry it across runs
   * (`StateTracker.from(saved)`, saved from `JSON.stringify(tracker)`), or a `new
   * StateTracker()` to start over (e.g. to accept a store the operator deliberately replaced).
   */
  stateTracker?: StateTracker;
  /**
   * The chat model origin (e.g. https://api.openai.com) that alone may see prompts and
   * memories: an answer whose signed upstream names another throws UpstreamError. Answers
   * that used no model, or the enclave's own responder (`local`), are accepted.
   */
  requireUpstream?: string;
  /** Send requests with this fetch function instead of undici's request() (sdk/transport.ts). */
  fetch?: typeof fetch;
}

export interface CallOptions {
  /** The organization_id header: the chat tenant. Signed (and sealed, for sealed calls). */
  organization?: string;
  /** Extra plain headers (not covered by the signature). */
  headers?: Record<string, string>;
  /** Sent sealed instead of the client's own authorization (a gateway relays each caller's key). */
  authorization?: string;
  /** Sent sealed instead of the client's own tenant key (ConnectOptions.tenantKeyFile). */
  tenantKey?: Uint8Array;
  /** Abandons the call (and, for a stream, the enclave's work). */
  signal?: AbortSignal;
}

export interface TeeResponse<T = unknown> {
  status: number;
  /** Parsed JSON, or the text when the body is not JSON. */
  body: T;
  raw: Uint8Array;
  /** For a plain call, the response headers as the host delivered them; for a sealed call, the enclave's. */
  headers: Record<string, string>;
  /** When the enclave signed the answer. */
  signedAt: Date;
  /** The enclave's state head when it answered. */
  state: StateHead;
  /** The id of the sealed store that head belongs to. */
  store: string;
  /** Where a chat's prompt and memories went (protocol/upstream.ts); "" when no model was used. */
  upstream: string;
}

export interface VerifiedAttestation {
  teeName: string;
  /** Ed25519 key that signs every answer (the document's public_key). */
  teePublicKey: Uint8Array;
  /** X25519 key sealed requests are encrypted to (from user_data). */
  boxPublicKey: Uint8Array;
  operatorKey: Uint8Array;
  document: DecodedDocument;
  checks: Check[];
}

type Body = unknown;

/** The state tracker this process keeps per service origin (connect()'s default). */
const trackers = new Map<string, StateTracker>();

/** The tracker connect() uses by default for `baseUrl`'s origin (made on first use), e.g. to save it. */
export function stateTrackerFor(baseUrl: string): StateTracker {
  const origin = new URL(baseUrl).origin;
  let tracker = trackers.get(origin);
  if (!tracker) trackers.set(origin, (tracker = new StateTracker()));
  return tracker;
}

/** The x-tee-known-state header for `floor`: the newest head seen of each shard (none when nothing has been seen yet). */
export function knownStateHeaders(floor: Floor | undefined): Record<string, string> {
  return floor ? { [KNOWN_STATE_HEADER]: formatKnownStates(floor) } : {};
}

export async function connect(options: ConnectOptions): Promise<TeeClient> {
  const manifest = options.manifest === undefined ? undefined : releaseManifest(options);
  const pinned = manifest?.pcrs ?? options.pcrs ?? {};
  if (Object.keys(pinned).length === 0 && options.insecureSkipPcrPinning !== true) {
    throw new AttestationError(
      'no PCRs pinned: pass the PCR values of the build you trust as `pcrs` (on Nitro, from the release manifest); ' +
      'only for local development, `insecureSkipPcrPinning: true` accepts any code the root vouches for',
    );
  }
  if (Object.keys(pinned).length > 0 && !Object.keys(pinned).includes('0')) {
    throw new AttestationError('pin PCR0: it measures the code (on Nitro, the whole image); other PCRs alone pin no code');
  }
  if (options.requireUpstream !== undefined) options = { ...options, requireUpstream: normalizeOrigin(options.requireUpstream) };
  const transport = options.fetch ? fetchTransport(options.fetch) : undiciTransport;
  const tracker = options.stateTracker ?? stateTrackerFor(options.baseUrl);
  const nonce = randomBytes(32);
  const target = `/v1/attestation?nonce=${nonce.toString('hex')}`;
  const floor = tracker.floor();
  const response = await transport(new URL(target, options.baseUrl), { method: 'GET', headers: knownStateHeaders(floor) });
  const raw = await response.bytes();
  if (response.status !== 200) {
    throw new AttestationError(`GET ${target} returned HTTP ${response.status}: ${Buffer.from(raw).toString('utf8').slice(0, 300)}`);
  }
  const fields = parseJson(raw) as Record<string, unknown> | undefined;
  const text = (name: string) => {
    const value = fields?.[name];
    if (typeof value !== 'string') throw new AttestationError(`the attestation response has no ${name}`);
    return value;
  };
  const teePublicKey = new Uint8Array(Buffer.from(text('tee_public_key'), 'base64'));
  const expectedOperator = options.operatorKey === undefined ? undefined : key32(options.operatorKey, 'operatorKey');

  const result = await verifyAttestation(new Uint8Array(Buffer.from(text('code_attestation'), 'base64')), {
    rootPem: options.rootPem,
    at: options.at,
    nonce,
    pcrs: Object.fromEntries(Object.entries(pinned).map(([i, v]) => [i, typeof v === 'string' ? Buffer.from(v, 'hex') : v])),
    publicKey: teePublicKey,
    // The advertised keys must be the bound ones; a pinned operator key wins over the advertised one.
    operatorKey: expectedOperator ?? new Uint8Array(Buffer.from(text('operator_pubkey'), 'base64')),
    boxPublicKey: new Uint8Array(Buffer.from(text('tee_box_public_key'), 'base64')),
    allowDebug: options.allowDebug,
    maxAgeSeconds: options.maxAgeSeconds,
  });
  if (!result.ok || !result.document) {
    const failed = result.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);
    throw new AttestationError(`attestation of ${options.baseUrl} failed: ${failed.join('; ')}`, result.checks);
  }
  if (manifest && manifest.manifest.tee_name !== text('tee_name')) {
    throw new AttestationError(`the service says tee_name ${text('tee_name')}, the manifest is for ${manifest.manifest.tee_name}`, result.checks);
  }
  const bound = parseUserData(result.document.userData);
  const client = new TeeClient({ ...options, stateTracker: tracker }, transport, {
    teeName: text('tee_name'),
    teePublicKey,
    boxPublicKey: bound.boxPublicKey,
    operatorKey: bound.operatorKey,
    document: result.document,
    checks: result.checks,
  });
  // The attestation answer itself is signed by the key it attests.
  client.verify({ method: 'GET', target, body: new Uint8Array(), knownState: floor && formatKnownStates(floor) }, response.status, raw, response.headers, floor);
  return client;
}

/** The manifest's PCRs, once its signature verifies with the pinned operator key. */
function releaseManifest(options: ConnectOptions): VerifiedManifest {
  if (options.operatorKey === undefined) {
    throw new AttestationError('a manifest needs operatorKey: the operator key you trust to sign releases');
  }
  if (options.pcrs !== undefined) throw new AttestationError('pass either pcrs or a manifest, not both');
  try {
    return verifyManifest(options.manifest, key32(options.operatorKey, 'operatorKey'));
  } catch (error) {
    throw new AttestationError(`release manifest refused: ${(error as Error).message}`);
  }
}

export class TeeClient {
  /** The newest state head seen from this service (rollback and fork detection); shared by reconnect(). */
  readonly state: StateTracker;
  /** The tenant key sealed calls carry (ConnectOptions.tenantKeyFile). */
  private readonly tenantKey?: Uint8Array;
  /** The key pair sealed calls are sealed with, renewed every few minutes. */
  private readonly sealing: ClientSealingKey;

  constructor(
    private readonly options: ConnectOptions,
    private readonly transport: Transport,
    readonly attestation: VerifiedAttestation,
  ) {
    this.state = options.stateTracker ?? new StateTracker();
    this.sealing = new ClientSealingKey(attestation.boxPublicKey);
    this.tenantKey = options.tenantKey ?? (options.tenantKeyFile === undefined ? undefined : readTenantKey(options.tenantKeyFile));
    if (this.tenantKey && (this.tenantKey.length < TENANT_KEY_MIN_BYTES || this.tenantKey.length > TENANT_KEY_MAX_BYTES)) {
      throw new TypeError(`a tenant key must be ${TENANT_KEY_MIN_BYTES} to ${TENANT_KEY_MAX_BYTES} bytes`);
    }
  }


  /** What an answer to a request sent now must continue: the newest head seen of each shard. */
  stateFloor(): Floor | undefined {
    return this.state.floor();
  }

  /**
   * Attests the service again (a restarted enclave has new keys) and returns a client for
   * it that keeps this client's options and state tracker, so an older or forked store
   * behind the new keys is still refused.
   */
  reconnect(): Promise<TeeClient> {
    return connect({ ...this.options, stateTracker: this.state });
  }

  /** Headers to send with a request made outside call() (e.g. a streamed chat) whose answer verifyStream() will judge. */
  stateHeaders(floor: Floor | undefined = this.stateFloor()): Record<string, string> {
    return knownStateHeaders(floor);
  }

  /**
   * A plain call whose answer must be signed by the attested enclave. Returns the answer
   * whatever its status (a signed 404 is a true 404); throws ResponseSignatureError when
   * the answer is unsigned (e.g. the host refused the request itself) or does not verify.
   */
  async call<T = unknown>(method: string, path: string, body?: Body, options: CallOptions = {}): Promise<TeeResponse<T>> {
    return this.send<T>(method, path, encodeBody(body), this.options.authorization, options);
  }

  /** Sends one plain request with `authorization` (or none) and checks the signed answer. */
  private async send<T>(method: string, path: string, bytes: Uint8Array, authorization: string | undefined, options: CallOptions): Promise<TeeResponse<T>> {
    const sent = await this.fetchRaw(method, path, bytes, authorization, options);
    return this.checked<T>(sent);
  }

  /** One HTTP exchange, not yet verified. */
  private async fetchRaw(method: string, path: string, bytes: Uint8Array, authorization: string | undefined, options: CallOptions): Promise<RawExchange> {
    const { url, target } = this.resolve(path);
    const floor = this.stateFloor();
    const headers: Record<string, string> = { ...options.headers, ...knownStateHeaders(floor) };
    if (bytes.length > 0 && !('content-type' in headers)) headers['content-type'] = 'application/json';
    if (authorization) headers.authorization = authorization;
    if (options.organization) headers.organization_id = options.organization;
    const response = await this.transport(url, { method, headers, body: bytes.length > 0 ? bytes : undefined, signal: options.signal });
    const raw = await response.bytes();
    return {
      request: { method, target, organization: options.organization, authorization, knownState: floor && formatKnownStates(floor), body: bytes },
      status: response.status, raw, headers: response.headers, floor,
    };
  }

  /** An exchange whose signature checks out (ResponseSignatureError, RollbackError or UpstreamError when not). */
  private checked<T>({ request, status, raw, headers, floor }: RawExchange): TeeResponse<T> {
    const { signedAt, state, store, upstream } = this.verify(request, status, raw, headers, floor);
    return { status, body: parseJson(raw) as T, raw, headers, signedAt, state, store, upstream };
  }

  /**
   * A call the host cannot read: method, target, body, authorization and organization are
   * sealed to the attested box key, and the whole answer comes back sealed to a key only
   * this call holds. The inner answer must also carry a valid enclave signature.
   */
  async sealedCall<T = unknown>(method: string, path: string, body?: Body, options: CallOptions = {}): Promise<TeeResponse<T>> {
    const { target } = this.resolve(path);
    const bytes = encodeBody(body);
    // The same floor inside the envelope and on the outer call: each answer is judged against it.
    const floor = this.stateFloor();
    const knownState = floor && formatKnownStates(floor);
    const authorization = options.authorization ?? this.options.authorization;
    const { envelope, nonce, replyKey } = this.sealing.seal({
      method,
      target,
      body: bytes,
      authorization,
      organization: options.organization,
      knownState,
      tenantKey: options.tenantKey ?? this.tenantKey,
      timestamp: Date.now(),
    });
    // The outer request is itself a signed plain call, and carries no key: the host reads
    // every outer header, and the key travels only inside the envelope.
    const extra = Object.fromEntries(Object.entries(options.headers ?? {}).filter(([name]) => name.toLowerCase() !== 'authorization'));
    const exchange = await this.fetchRaw('POST', SEALED_PATH, envelope, undefined, { headers: { ...extra, 'content-type': SEALED_CONTENT_TYPE }, signal: options.signal });
    if (exchange.status !== 200) {
      // A refusal is the enclave's plain, signed answer (or the host's, which does not verify).
      const outer = this.checked<unknown>(exchange);
      const message = describeError(outer.body) ?? `HTTP ${outer.status}`;
      throw new SealedCallError(`the enclave refused the sealed request: ${message}`, outer.status, outer.body);
    }
    // A 200 is not signed outside: the box authenticates it (only the enclave holds the other
    // half of this call's key), and the answer inside carries the enclave's signature.
    let reply;
    try {
      reply = openReply(exchange.raw, replyKey, nonce);
    } catch (error) {
      if (error instanceof SealedFormatError) throw new SealedCallError(error.message, exchange.status, exchange.raw);
      throw error;
    }
    const { signedAt, state, store, upstream } = this.verify(
      { method, target, organization: options.organization, authorization, knownState, body: bytes },
      reply.status, reply.body, reply.headers, floor,
    );
    return { status: reply.status, body: parseJson(reply.body) as T, raw: reply.body, headers: reply.headers, signedAt, state, store, upstream };
  }

  /**
   * A sealed call whose answer streams (a chat or a response with `stream: true`, or any
   * other route): resolves with the inner status and headers once the enclave's first frame
   * opens, and iterates over the inner body as it arrives (sdk/sealed-stream.ts). The host
   * sees only the envelope and padded frames; a stream it cuts, reorders, repeats or alters
   * throws SealedCallError, and the inner signature is checked at the end.
   */
  async sealedStream(method: string, path: string, body?: Body, options: CallOptions = {}): Promise<SealedStream> {
    const { target, url } = this.resolve(path);
    const bytes = encodeBody(body);
    const authorization = options.authorization ?? this.options.authorization;
    const floor = this.stateFloor();
    const knownState = floor && formatKnownStates(floor);
    const { envelope, nonce, replyKey } = this.sealing.seal({
      method, target, body: bytes, authorization, organization: options.organization, knownState, tenantKey: options.tenantKey ?? this.tenantKey, timestamp: Date.now(),
    });
    const abort = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, abort.signal]) : abort.signal;
    const extra = Object.fromEntries(Object.entries(options.headers ?? {}).filter(([name]) => name.toLowerCase() !== 'authorization'));
    const outerBody = envelope;
    const response = await this.transport(new URL(SEALED_STREAM_PATH, url), {
      method: 'POST', headers: { ...extra, ...knownStateHeaders(floor), 'content-type': SEALED_CONTENT_TYPE }, body: outerBody, signal,
    });
    if (response.status !== 200) {
      // A refused envelope: a plain answer, which must still be the enclave's (signed).
      const raw = await response.bytes();
      this.verify({ method: 'POST', target: SEALED_STREAM_PATH, knownState, body: outerBody }, response.status, raw, response.headers, floor);
      const refused = parseJson(raw);
      throw new SealedCallError(`the enclave refused the sealed request: ${describeError(refused) ?? `HTTP ${response.status}`}`, response.status, refused);
    }
    const request = { method, target, organization: options.organization, authorization, knownState, body: bytes };
    return readSealedStream(
      response.body,
      sealedStreamKey(replyKey, nonce),
      (status, headers, inner, streamed) => (streamed
        ? this.verifyStream(request, status, inner, floor)
        : this.verify(request, status, inner, headers, floor)),
      async () => abort.abort(),
    );
  }

  /**
   * Checks an answer's signature, and that it continues `floor` (the newest head seen when
   * the request was sent, which `request.knownState` must name if the request carried it);
   * returns when it was signed and the state it reports. Throws ResponseSignatureError,
   * RollbackError or (with requireUpstream) UpstreamError.
   */
  verify(request: SignedRequest, status: number, body: Uint8Array, headers: Record<string, string>, floor: Floor | undefined): { signedAt: Date; state: StateHead; store: string; shard: { index: number; count: number }; tenant: string; upstream: string } {
    const ancestor = headers[ANCESTOR_HEADER];
    const result = checkSignature(
      this.attestation.teePublicKey,
      request,
      { status, bodySha256: sha256Hex(body) },
      {
        signature: headers[SIGNATURE_HEADER], timestamp: headers[TIMESTAMP_HEADER], state: headers[STATE_HEADER], store: headers[STORE_HEADER], shard: headers[SHARD_HEADER],
        ancestor: ancestor as Ancestry | undefined, tenant: headers[TENANT_HEADER], upstream: headers[UPSTREAM_HEADER],
      },
      { maxSkewMs: this.options.maxClockSkewMs ?? DEFAULT_MAX_SKEW_MS },
    );
    if (!result.ok) {
      const text = Buffer.from(body).toString('utf8');
      throw new ResponseSignatureError(`${request.method} ${request.target} (HTTP ${status}): ${result.reason}`, status, text, Boolean(headers[SIGNATURE_HEADER]), headers['retry-after']);
    }
    // The enclave names the tenant it acted for; where the request named one, it must be that one.
    const asked = tenantAskedFor(request);
    if (asked !== undefined && result.tenant !== '' && !result.tenant.split(',').includes(asked)) {
      throw new ResponseSignatureError(`${request.method} ${request.target}: the enclave acted for tenant '${result.tenant}', not '${asked}'`, status, Buffer.from(body).toString('utf8'));
    }
    const elsewhere = upstreamRefusal(result.upstream, this.options.requireUpstream);
    if (elsewhere) throw new UpstreamError(`${request.method} ${request.target}: ${elsewhere}`, result.upstream);
    const refusal = this.state.observe({
      state: result.state, store: result.store, shard: result.shard, tenant: result.tenant, ancestor: isAncestry(result.ancestor) ? result.ancestor : undefined,
    }, floor);
    if (refusal) throw new RollbackError(`${request.method} ${request.target}: ${refusal}`, result.state, floor?.get(result.shard.index), result.store);
    return { signedAt: result.signedAt, state: result.state, store: result.store, shard: result.shard, tenant: result.tenant, upstream: result.upstream };
  }

  /**
   * Checks a complete Server-Sent Events transcript (a streamed answer) whose last event
   * (before a chat stream's `data: [DONE]`) is the enclave's tee.signature chunk; returns
   * the signed bytes before that event. Send `stateHeaders(floor)` with the request and name
   * the same head in `request.knownState`, or an answer from a newer state is refused.
   */
  verifyStream(request: SignedRequest, status: number, transcript: Uint8Array, floor: Floor | undefined = this.stateFloor()): { body: Uint8Array; signedAt: Date; state: StateHead } {
    const split = splitSignedStream(transcript);
    if (!split) {
      throw new ResponseSignatureError(
        `${request.method} ${request.target}: the stream does not end with a ${STREAM_SIGNATURE_EVENT} event (cut short, or not signed)`,
        status,
        Buffer.from(transcript).toString('utf8'),
      );
    }
    const { signedAt, state } = this.verify(request, status, split.body, {
      [SIGNATURE_HEADER]: split.signature.signature,
      [TIMESTAMP_HEADER]: split.signature.timestamp,
      [STATE_HEADER]: split.signature.state,
      [STORE_HEADER]: split.signature.store,
      [SHARD_HEADER]: split.signature.shard,
      ...(split.signature.ancestor ? { [ANCESTOR_HEADER]: split.signature.ancestor } : {}),
      ...(split.signature.tenant ? { [TENANT_HEADER]: split.signature.tenant } : {}),
      ...(split.signature.upstream ? { [UPSTREAM_HEADER]: split.signature.upstream } : {}),
    }, floor);
    return { body: split.body, signedAt, state };
  }

  /** The URL to fetch and the request target the proxy and the enclave will see. */
  private resolve(path: string): { url: URL; target: string } {
    if (!path.startsWith('/')) throw new TypeError(`path must start with "/": ${path}`);
    const url = new URL(path, this.options.baseUrl);
    // "//other.host/x" is a path to URL but another origin: the API key must never go there.
    if (url.origin !== new URL(this.options.baseUrl).origin) {
      throw new TypeError(`path ${JSON.stringify(path)} leads to ${url.origin}, not to the service at ${new URL(this.options.baseUrl).origin}`);
    }
    return { url, target: `${url.pathname}${url.search}` };
  }
}

/** The tenant a request names: the organization header, tenant_id in its query, or a top-level tenant_id in its JSON body. */
function tenantAskedFor(request: SignedRequest): string | undefined {
  if (request.organization) return request.organization;
  const query = request.target.split('?')[1];
  const inQuery = query === undefined ? undefined : new URLSearchParams(query).get('tenant_id') ?? undefined;
  return inQuery ?? tenantInBody(request.body);
}

function tenantInBody(body: Uint8Array): string | undefined {
  if (body.length === 0 || body[0] !== 0x7b /* { */ || !Buffer.from(body).includes('"tenant_id"')) return undefined;
  const parsed = parseJson(body) as { tenant_id?: unknown } | string;
  return typeof parsed === 'object' && parsed !== null && typeof parsed.tenant_id === 'string' ? parsed.tenant_id : undefined;
}

interface RawExchange {
  request: SignedRequest;
  status: number;
  raw: Uint8Array;
  headers: Record<string, string>;
  floor: Floor | undefined;
}

/** The tenant key file's bytes, as they are (a file of random bytes; a trailing newline would be part of it). */
function readTenantKey(path: string): Uint8Array {
  return new Uint8Array(readFileSync(path));
}

function encodeBody(body: Body): Uint8Array {
  if (body === undefined) return new Uint8Array();
  if (body instanceof Uint8Array) return body;
  return new Uint8Array(Buffer.from(typeof body === 'string' ? body : JSON.stringify(body), 'utf8'));
}

function parseJson(raw: Uint8Array): unknown {
  const text = Buffer.from(raw).toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function describeError(body: unknown): string | undefined {
  const error = (body as { error?: { message?: unknown; code?: unknown } } | undefined)?.error;
  return typeof error?.message === 'string' ? `${error.message}${typeof error.code === 'string' ? ` (${error.code})` : ''}` : undefined;
}

function key32(value: string | Uint8Array, what: string): Uint8Array {
  if (value instanceof Uint8Array) return value;
  const bytes = /^[0-9a-fA-F]{64}$/.test(value) ? Buffer.from(value, 'hex') : Buffer.from(value, 'base64');
  if (bytes.length !== 32) throw new TypeError(`${what} must be a 32-byte key in base64 or hex`);
  return new Uint8Array(bytes);
}
