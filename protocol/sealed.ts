/**
 * Sealed requests: the one definition of the envelopes, used by the sdk to seal and by
 * the enclave to open (enclave/api/sealed-route.ts).
 *
 * The client encrypts with nacl.box (X25519 + XSalsa20-Poly1305) from a key pair of its own,
 * renewed every SEALING_KEY_LIFETIME_MS (ClientSealingKey), to the enclave's
 * `tee_box_public_key`, which the attestation document binds in user_data. It POSTs to
 * /v1/sealed:
 *
 *   {"client_public_key":"<b64, 32 bytes>","nonce":"<b64, 24 bytes>","ciphertext":"<b64>"}
 *
 * where the plaintext is UTF-8 JSON
 *
 *   {"type":"agent-service/sealed-request/v1","method":"POST","target":"/v1/memory",
 *    "body":"<b64 of the exact body bytes>","authorization":"…","organization":"…",
 *    "known_state":"<seq>:<hash>","tenant_key":"<b64>","timestamp":<unix ms>}
 *
 * (authorization, organization, known_state and tenant_key optional; known_state is the plain calls'
 * x-tee-known-state header, which the sealed request carries inside instead; tenant_key is the
 * secret a tenant's memories are sealed under (docs/api.md, Tenant keys), which only ever
 * travels inside an envelope). The enclave answers 200 with
 *
 *   {"nonce":"<b64, 24 bytes>","ciphertext":"<b64>"}
 *
 * boxed to the client's key, whose plaintext is one line of UTF-8 JSON, a newline, the answer's
 * body as it is (bytes), then zero bytes of padding:
 *
 *   {"type":"agent-service/sealed-reply/v3","request_nonce":"<b64>","status":200,"headers":{…},"body_bytes":3172}\n<body><padding>
 *
 * (The body travels as its bytes, not as base64 inside the JSON: a quarter smaller before
 * padding, often half once padded, and no second encoding for either end to make and check.)
 *
 * The `type` tags keep a request from being reflected back as its own reply (both
 * directions share one box key). Only the holder of the client's key pair can open a
 * reply, and `request_nonce` (the request envelope's nonce) binds it to its request: the
 * client's key serves many requests, so without it the host could hand a reply (an older
 * one, or another call's) back as the answer to another request sealed under the same key.
 */
import { createHash } from 'node:crypto';
import { boxAfter, boxBefore, boxKeyPair, boxOpenAfter, NONCE_BYTES, PUBLIC_KEY_BYTES, randomNonce, SharedKeyCache, type BoxKeyPair } from './box.js';

export const SEALED_PATH = '/v1/sealed';
export const SEALED_REQUEST_TYPE = 'agent-service/sealed-request/v1';
export const SEALED_REPLY_TYPE = 'agent-service/sealed-reply/v3';
/**
 * How long a client seals with one key pair. Reusing it spares both ends an X25519
 * multiplication per request (the enclave keeps the keys it shares with recent clients,
 * box.ts SharedKeyCache); renewing it bounds how many requests one client secret opens.
 */
export const SEALING_KEY_LIFETIME_MS = 5 * 60 * 1000;
/** A sealed request older (or further in the future) than this is refused as a possible replay. */
export const SEALED_MAX_AGE_MS = 5 * 60 * 1000;
/** A tenant key (the secret a tenant's memories are sealed under) is 32 to 256 bytes: a file of random bytes. */
export const TENANT_KEY_MIN_BYTES = 32;
export const TENANT_KEY_MAX_BYTES = 256;
/** A plain request carrying this header is refused: the host would read the tenant key in it. */
export const TENANT_KEY_HEADER = 'x-tenant-key';

export interface SealedRequest {
  method: string;
  target: string;
  body: Uint8Array;
  authorization?: string;
  organization?: string;
  /** The newest state head the client has seen (formatState), for the enclave to place on its chain. */
  knownState?: string;
  /** The tenant key (TENANT_KEY_MIN_BYTES to TENANT_KEY_MAX_BYTES): the secret the tenant's memories are sealed under. */
  tenantKey?: Uint8Array;
  /** Unix milliseconds when sealed. */
  timestamp: number;
}

export interface SealedReply {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

export interface RequestEnvelope {
  client_public_key: string;
  nonce: string;
  ciphertext: string;
}

export interface ReplyEnvelope {
  nonce: string;
  ciphertext: string;
}

/** The plaintext of a request box, as JSON. */
export interface SealedRequestPlaintext {
  type: typeof SEALED_REQUEST_TYPE;
  method: string;
  target: string;
  body: string;
  authorization?: string;
  organization?: string;
  known_state?: string;
  /** Base64 of the tenant key. */
  tenant_key?: string;
  timestamp: number;
  /** Padding (spaces), ignored. */
  pad?: string;
}

/** A reply that cannot be opened or is malformed. */
export class SealedFormatError extends Error {
  override name = 'SealedFormatError';
}

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');

/**
 * The size a sealed plaintext is padded up to: 1 KiB, then powers of two up to 64 KiB, then
 * multiples of 64 KiB. The host sees envelope and reply sizes, so without padding it would
 * learn each body's exact length (and from that, often which call it was).
 */
export function paddedSize(bytes: number): number {
  if (bytes <= 1024) return 1024;
  if (bytes <= 65536) return 2 ** Math.ceil(Math.log2(bytes));
  return Math.ceil(bytes / 65536) * 65536;
}

/** JSON of `value` with a `pad` of spaces that brings it to paddedSize (the reader ignores it). */
const utf8 = (value: Record<string, unknown>) => {
  // Serialised once: the spaces go inside the empty pad string, which ends the JSON as `"pad":""}`.
  const bare = JSON.stringify({ ...value, pad: '' });
  const size = Buffer.byteLength(bare, 'utf8');
  return new Uint8Array(Buffer.from(`${bare.slice(0, -2)}${' '.repeat(paddedSize(size) - size)}"}`, 'utf8'));
};

// ---------------------------------------------------------------------------------------
// Client side

/**
 * Seals a request to the enclave's box key with a fresh key pair, or the one given (with
 * the key it shares with the enclave, when known: ClientSealingKey). `replyKey` (the shared
 * key, nacl.box.before) and the envelope's nonce are what open the reply (openReply).
 */
export function sealRequest(
  enclaveBoxKey: Uint8Array,
  request: SealedRequest,
  ephemeral: BoxKeyPair = boxKeyPair(),
  sharedKey: Uint8Array = boxBefore(enclaveBoxKey, ephemeral.secretKey),
): { envelope: RequestEnvelope; replyKey: Uint8Array } {
  const plaintext: SealedRequestPlaintext = {
    type: SEALED_REQUEST_TYPE,
    method: request.method,
    target: request.target,
    body: b64(request.body),
    ...(request.authorization ? { authorization: request.authorization } : {}),
    ...(request.organization ? { organization: request.organization } : {}),
    ...(request.knownState ? { known_state: request.knownState } : {}),
    ...(request.tenantKey ? { tenant_key: b64(request.tenantKey) } : {}),
    timestamp: request.timestamp,
  };
  const nonce = randomNonce();
  const ciphertext = boxAfter(utf8(plaintext as unknown as Record<string, unknown>), nonce, sharedKey);
  return {
    envelope: { client_public_key: b64(ephemeral.publicKey), nonce: b64(nonce), ciphertext: b64(ciphertext) },
    replyKey: sharedKey,
  };
}

/**
 * A client's sealing key pair and the key it shares with the enclave, renewed after
 * `lifetimeMs`: one X25519 multiplication per window instead of two per request.
 */
export class ClientSealingKey {
  private current?: { pair: BoxKeyPair; shared: Uint8Array; renewAt: number };

  constructor(
    private readonly enclaveBoxKey: Uint8Array,
    private readonly lifetimeMs = SEALING_KEY_LIFETIME_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** sealRequest with this window's key pair. */
  seal(request: SealedRequest): { envelope: RequestEnvelope; replyKey: Uint8Array } {
    const now = this.now();
    if (!this.current || now >= this.current.renewAt) {
      const pair = boxKeyPair();
      this.current = { pair, shared: boxBefore(this.enclaveBoxKey, pair.secretKey), renewAt: now + this.lifetimeMs };
    }
    return sealRequest(this.enclaveBoxKey, request, this.current.pair, this.current.shared);
  }
}

/**
 * Opens the enclave's sealed reply with the call's replyKey, and checks that it answers the
 * request whose envelope had `requestNonce` (base64, as sent); throws SealedFormatError when not.
 */
export function openReply(envelope: unknown, replyKey: Uint8Array, requestNonce: string): SealedReply {
  const { nonce, ciphertext } = (typeof envelope === 'object' && envelope !== null ? envelope : {}) as Record<string, unknown>;
  const nonceBytes = decodeBase64(nonce, 'nonce', NONCE_BYTES);
  const boxed = decodeBase64(ciphertext, 'ciphertext');
  const opened = boxOpenAfter(boxed, nonceBytes, replyKey);
  if (!opened) throw new SealedFormatError('the sealed reply does not open with the enclave\'s box key: it was altered or not made by the enclave');
  // JSON never holds a raw newline, so the first one ends the head; a sealed request (one
  // JSON document, padded with spaces) has none and cannot pass as a reply.
  const headEnd = opened.indexOf(0x0a);
  if (headEnd < 0) throw new SealedFormatError(`the sealed reply is not an ${SEALED_REPLY_TYPE} reply (it has no head line)`);
  let reply: Record<string, unknown>;
  try {
    reply = JSON.parse(Buffer.from(opened.buffer, opened.byteOffset, headEnd).toString('utf8')) as Record<string, unknown>;
  } catch {
    throw new SealedFormatError('the sealed reply\'s head is not JSON');
  }
  if (reply?.type !== SEALED_REPLY_TYPE) throw new SealedFormatError(`the sealed reply's type is not ${SEALED_REPLY_TYPE}`);
  if (reply.request_nonce !== requestNonce) {
    throw new SealedFormatError('the sealed reply answers another request (its request_nonce is not this request\'s): replayed or swapped on the way');
  }
  const { status, headers, body_bytes: bodyBytes } = reply;
  if (!Number.isInteger(status) || (status as number) < 100 || (status as number) > 599) throw new SealedFormatError('the sealed reply has no valid status');
  if (typeof headers !== 'object' || headers === null || Object.values(headers).some((v) => typeof v !== 'string')) {
    throw new SealedFormatError('the sealed reply\'s headers are not strings');
  }
  const bodyStart = headEnd + 1;
  if (!Number.isInteger(bodyBytes) || (bodyBytes as number) < 0 || (bodyBytes as number) > opened.length - bodyStart) {
    throw new SealedFormatError('the sealed reply\'s body_bytes is not the length of a body it holds');
  }
  return { status: status as number, headers: headers as Record<string, string>, body: opened.subarray(bodyStart, bodyStart + (bodyBytes as number)) };
}

// ---------------------------------------------------------------------------------------
// Enclave side

export interface OpenedRequest {
  /** The decrypted JSON, still to be validated (common/schemas.ts sealedPayloadSchema). */
  plaintext: unknown;
  clientPublicKey: Uint8Array;
  /** The key shared with this client (nacl.box.before): seals the reply. */
  sharedKey: Uint8Array;
  /** The envelope's nonce: a sealed stream's key is derived from it (sealed-stream.ts). */
  nonce: Uint8Array;
  /**
   * Identifies this envelope for replay detection: a hash of the key the enclave actually
   * decrypts with and the nonce, so no other spelling of the client's key (X25519 ignores
   * bit 255) can make the same request count as new.
   */
  replayId: string;
}

/**
 * X25519 public keys that are not canonical (u >= p = 2^255 - 19, or bit 255 set) or of
 * small order (u in libsodium's blacklist: 0, 1, p - 1 and the two points of order 8):
 * another spelling of a valid key, or a key whose shared secret is predictable.
 */
const LOW_ORDER = [
  '0000000000000000000000000000000000000000000000000000000000000000',
  '0100000000000000000000000000000000000000000000000000000000000000',
  'e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800',
  '5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
];

/** p = 2^255 - 19, little-endian. */
const P_BYTES = [0xed, ...new Array<number>(30).fill(0xff), 0x7f];

export function isAcceptableX25519Key(key: Uint8Array): boolean {
  if (key.length !== 32 || LOW_ORDER.includes(Buffer.from(key).toString('hex'))) return false;
  // Canonical: as a little-endian number, below p (compared from the most significant byte).
  for (let i = 31; i >= 0; i--) {
    if (key[i] !== P_BYTES[i]) return key[i] < P_BYTES[i];
  }
  return false;
}

/**
 * Opens a request envelope whose fields are already known to be base64 strings of the
 * right lengths (the schema), with the enclave's box secret key, or the cache of keys it
 * shares with recent clients. Returns undefined when the box does not open, i.e. it was
 * altered or sealed to another key.
 */
export function openRequest(envelope: RequestEnvelope, boxKey: Uint8Array | SharedKeyCache): OpenedRequest | undefined {
  const clientPublicKey = decodeBase64(envelope.client_public_key, 'client_public_key', PUBLIC_KEY_BYTES);
  const nonce = decodeBase64(envelope.nonce, 'nonce', NONCE_BYTES);
  if (!isAcceptableX25519Key(clientPublicKey)) throw new SealedFormatError('client_public_key is not a canonical X25519 key of large order');
  const sharedKey = boxKey instanceof SharedKeyCache ? boxKey.get(clientPublicKey) : boxBefore(clientPublicKey, boxKey);
  const opened = boxOpenAfter(decodeBase64(envelope.ciphertext, 'ciphertext'), nonce, sharedKey);
  if (!opened) return undefined;
  let plaintext: unknown;
  try {
    plaintext = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(opened));
  } catch {
    plaintext = undefined;
  }
  const replayId = createHash('sha256').update('sealed-replay/v2\0').update(sharedKey).update(nonce).digest('base64');
  return { plaintext, clientPublicKey, sharedKey, nonce, replayId };
}

/** Seals the reply to the client, with the key shared when its request was opened, bound to that request's nonce. */
export function sealReply(reply: SealedReply, sharedKey: Uint8Array, requestNonce: Uint8Array): ReplyEnvelope {
  const head = Buffer.from(`${JSON.stringify({
    type: SEALED_REPLY_TYPE, request_nonce: b64(requestNonce), status: reply.status, headers: reply.headers, body_bytes: reply.body.length,
  })}\n`, 'utf8');
  // Zero-filled: what follows the body is the padding.
  const plaintext = new Uint8Array(paddedSize(head.length + reply.body.length));
  plaintext.set(head, 0);
  plaintext.set(reply.body, head.length);
  const nonce = randomNonce();
  return { nonce: b64(nonce), ciphertext: b64(boxAfter(plaintext, nonce, sharedKey)) };
}

/**
 * Strict base64, optionally of an exact decoded length: Buffer.from skips junk, so the
 * bytes must encode back to exactly `value` (canonical base64, padded; a few times cheaper
 * than a regular expression over a reply's kilobytes).
 */
export function decodeBase64(value: unknown, what: string, length?: number): Uint8Array {
  const decoded = typeof value === 'string' ? Buffer.from(value, 'base64') : undefined;
  if (decoded === undefined || decoded.toString('base64') !== value) throw new SealedFormatError(`${what} is not base64`);
  const bytes = new Uint8Array(decoded.buffer, decoded.byteOffset, decoded.byteLength);
  if (length !== undefined && bytes.length !== length) throw new SealedFormatError(`${what} must be ${length} bytes, got ${bytes.length}`);
  return bytes;
}
