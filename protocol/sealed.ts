/**
 * Sealed requests: the one definition of the envelopes, used by the sdk to seal and by
 * the enclave to open (enclave/api/sealed-route.ts).
 *
 * The client encrypts with nacl.box (X25519 + XSalsa20-Poly1305) from a key pair of its own,
 * renewed every SEALING_KEY_LIFETIME_MS (ClientSealingKey), to the enclave's
 * `tee_box_public_key`, which the attestation document binds in user_data. It POSTs to
 * /v1/sealed (or /v1/sealed/stream) a body of Content-Type application/octet-stream:
 *
 *   client public key (32 bytes) ‖ nonce (24 bytes) ‖ box (MAC ‖ ciphertext, 16 bytes and more)
 *
 * whose plaintext is one line of UTF-8 JSON, a newline, the request's body as it is (bytes),
 * then zero bytes of padding up to paddedSize():
 *
 *   {"type":"agent-service/sealed-request/v2","method":"POST","target":"/v1/memory","authorization":"…",
 *    "organization":"…","known_state":"<shard>/<seq>:<hash>","tenant_key":"<b64>","timestamp":<unix ms>,"body_bytes":52}\n<body><padding>
 *
 * (authorization, organization, known_state and tenant_key optional; known_state is the plain calls'
 * x-tee-known-state header, which the sealed request carries inside instead; tenant_key is the
 * secret a tenant's memories are sealed under (docs/api.md, Tenant keys), which only ever
 * travels inside an envelope). The enclave answers 200, application/octet-stream:
 *
 *   nonce (24 bytes) ‖ box
 *
 * boxed to the client's key, whose plaintext has the same shape:
 *
 *   {"type":"agent-service/sealed-reply/v3","request_nonce":"<b64>","status":200,"headers":{…},"body_bytes":3172}\n<body><padding>
 *
 * (Both bodies travel as their bytes and the envelopes are bytes too: no base64 and no outer
 * JSON for any of the three processes to make, relay, parse and check.) JSON never holds a raw
 * newline, so the first one ends the head; `body_bytes` says where the body ends, and what
 * follows it must be zero bytes (nothing else can ride along unread).
 *
 * The `type` tags keep a request from being reflected back as its own reply, or a reply as a
 * request (both directions share one box key and one plaintext shape). Only the holder of the
 * client's key pair can open a reply, and `request_nonce` (the request envelope's nonce) binds
 * it to its request: the client's key serves many requests, so without it the host could hand
 * a reply (an older one, or another call's) back as the answer to another request sealed
 * under the same key.
 */
import { createHash } from 'node:crypto';
import {
  boxBefore, boxInPlace, boxKeyPair, boxOpenAfter, MAC_BYTES, NONCE_BYTES, PUBLIC_KEY_BYTES, uniqueNonce, SharedKeyCache, type BoxKeyPair,
} from './box.js';

export const SEALED_PATH = '/v1/sealed';
export const SEALED_REQUEST_TYPE = 'agent-service/sealed-request/v2';
export const SEALED_REPLY_TYPE = 'agent-service/sealed-reply/v3';
/** The Content-Type of both envelopes. */
export const SEALED_CONTENT_TYPE = 'application/octet-stream';
/** The shortest request envelope: the client's key, the nonce and an empty box's MAC. */
export const REQUEST_ENVELOPE_MIN_BYTES = PUBLIC_KEY_BYTES + NONCE_BYTES + MAC_BYTES;
/** The shortest reply envelope: the nonce and an empty box's MAC. */
export const REPLY_ENVELOPE_MIN_BYTES = NONCE_BYTES + MAC_BYTES;
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

/** A sealed request as sent, and what opens its reply. */
export interface SealedEnvelope {
  /** The request envelope: the body of POST /v1/sealed. */
  envelope: Buffer;
  /** The envelope's nonce: openReply checks the reply answers it; a sealed stream's key is derived from it. */
  nonce: Uint8Array;
  /** The key shared with the enclave (nacl.box.before): opens the reply. */
  replyKey: Uint8Array;
}

/** The head line of a request's plaintext (common/schemas.ts sealedRequestHeadSchema validates it). */
export interface SealedRequestHead {
  type: typeof SEALED_REQUEST_TYPE;
  method: string;
  target: string;
  authorization?: string;
  organization?: string;
  known_state?: string;
  /** Base64 of the tenant key. */
  tenant_key?: string;
  timestamp: number;
  /** How many bytes of body follow the head line (the rest, to the bucket's size, is zeros). */
  body_bytes: number;
}

/** An envelope or plaintext that is malformed, or a reply that cannot be opened. */
export class SealedFormatError extends Error {
  override name = 'SealedFormatError';
}

const b64 = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');

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

/**
 * An envelope in one buffer: `prefixBytes` left for the caller (key, nonce), then the box of
 * `head` as one JSON line ‖ `body` ‖ zeros up to paddedSize(), sealed in place.
 */
function sealPlaintext(head: object, body: Uint8Array, prefixBytes: number, nonce: Uint8Array, key: Uint8Array): Buffer {
  const headLine = Buffer.from(`${JSON.stringify(head)}\n`, 'utf8');
  const at = prefixBytes + MAC_BYTES;
  const used = headLine.length + body.length;
  const envelope = Buffer.allocUnsafe(at + paddedSize(used));
  headLine.copy(envelope, at);
  envelope.set(body, at + headLine.length);
  envelope.fill(0, at + used);
  boxInPlace(envelope, prefixBytes, nonce, key);
  return envelope;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** An opened plaintext's head line, parsed (not yet checked), and the bytes after it. */
function splitPlaintext(opened: Uint8Array, what: 'request' | 'reply', type: string): { head: Record<string, unknown>; rest: Uint8Array } {
  // JSON never holds a raw newline, so the first one ends the head.
  const headEnd = opened.indexOf(0x0a);
  if (headEnd < 0) throw new SealedFormatError(`the sealed ${what} is not an ${type} ${what} (it has no head line)`);
  let head: unknown;
  try {
    head = JSON.parse(strictUtf8.decode(opened.subarray(0, headEnd)));
  } catch {
    throw new SealedFormatError(`the sealed ${what}'s head is not JSON`);
  }
  if (typeof head !== 'object' || head === null || Array.isArray(head)) throw new SealedFormatError(`the sealed ${what}'s head is not a JSON object`);
  return { head: head as Record<string, unknown>, rest: opened.subarray(headEnd + 1) };
}

/** The first `bodyBytes` of `rest` (what follows the head line), which must be followed by zero bytes only. */
export function sealedBody(rest: Uint8Array, bodyBytes: unknown, what: 'request' | 'reply'): Uint8Array {
  if (!Number.isInteger(bodyBytes) || (bodyBytes as number) < 0 || (bodyBytes as number) > rest.length) {
    throw new SealedFormatError(`the sealed ${what}'s body_bytes is not the length of a body it holds`);
  }
  const end = bodyBytes as number;
  // Only padding may follow the body: anything else would travel unread (and unsigned).
  const junk = firstNonZero(rest, end);
  if (junk >= 0) throw new SealedFormatError(`the sealed ${what} has bytes other than zeros after its body (at byte ${junk} after the head line)`);
  return rest.subarray(0, end);
}

const ZEROS = Buffer.alloc(65536);

/**
 * Where the first byte other than zero is in `bytes` from `from` on, or -1. Compared with a
 * block of zeros 64 KiB at a time: a byte loop over a reply's padding (kilobytes) cost a
 * client several microseconds a call.
 */
function firstNonZero(bytes: Uint8Array, from: number): number {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = from; at < view.length; at += ZEROS.length) {
    const block = view.subarray(at, Math.min(at + ZEROS.length, view.length));
    if (block.equals(ZEROS.subarray(0, block.length))) continue;
    return at + block.findIndex((byte) => byte !== 0);
  }
  return -1;
}

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
): SealedEnvelope {
  const head: SealedRequestHead = {
    type: SEALED_REQUEST_TYPE,
    method: request.method,
    target: request.target,
    ...(request.authorization ? { authorization: request.authorization } : {}),
    ...(request.organization ? { organization: request.organization } : {}),
    ...(request.knownState ? { known_state: request.knownState } : {}),
    ...(request.tenantKey ? { tenant_key: b64(request.tenantKey) } : {}),
    timestamp: request.timestamp,
    body_bytes: request.body.length,
  };
  const nonce = uniqueNonce();
  const envelope = sealPlaintext(head, request.body, PUBLIC_KEY_BYTES + NONCE_BYTES, nonce, sharedKey);
  envelope.set(ephemeral.publicKey, 0);
  envelope.set(nonce, PUBLIC_KEY_BYTES);
  return { envelope, nonce, replyKey: sharedKey };
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
  seal(request: SealedRequest): SealedEnvelope {
    const now = this.now();
    if (!this.current || now >= this.current.renewAt) {
      const pair = boxKeyPair();
      this.current = { pair, shared: boxBefore(this.enclaveBoxKey, pair.secretKey), renewAt: now + this.lifetimeMs };
    }
    return sealRequest(this.enclaveBoxKey, request, this.current.pair, this.current.shared);
  }
}

/**
 * Opens the enclave's sealed reply (the body of its 200, as received) with the call's
 * replyKey, and checks that it answers the request whose envelope had `requestNonce`;
 * throws SealedFormatError when not.
 */
export function openReply(envelope: Uint8Array, replyKey: Uint8Array, requestNonce: Uint8Array): SealedReply {
  if (envelope.length < REPLY_ENVELOPE_MIN_BYTES) {
    throw new SealedFormatError(`the sealed reply is ${envelope.length} bytes, shorter than a nonce (${NONCE_BYTES}) and a box (at least ${MAC_BYTES})`);
  }
  const opened = boxOpenAfter(envelope.subarray(NONCE_BYTES), envelope.subarray(0, NONCE_BYTES), replyKey);
  if (!opened) throw new SealedFormatError('the sealed reply does not open with the enclave\'s box key: it was altered or not made by the enclave');
  // A request's plaintext has the same shape: its type tells it apart.
  const { head: reply, rest } = splitPlaintext(opened, 'reply', SEALED_REPLY_TYPE);
  if (reply.type !== SEALED_REPLY_TYPE) throw new SealedFormatError(`the sealed reply's type is not ${SEALED_REPLY_TYPE}`);
  if (reply.request_nonce !== b64(requestNonce)) {
    throw new SealedFormatError('the sealed reply answers another request (its request_nonce is not this request\'s): replayed or swapped on the way');
  }
  const { status, headers } = reply;
  if (!Number.isInteger(status) || (status as number) < 100 || (status as number) > 599) throw new SealedFormatError('the sealed reply has no valid status');
  if (typeof headers !== 'object' || headers === null || Object.values(headers).some((v) => typeof v !== 'string')) {
    throw new SealedFormatError('the sealed reply\'s headers are not strings');
  }
  return { status: status as number, headers: headers as Record<string, string>, body: sealedBody(rest, reply.body_bytes, 'reply') };
}

// ---------------------------------------------------------------------------------------
// Enclave side

export interface OpenedRequest {
  /** The head line, parsed, still to be validated (common/schemas.ts sealedRequestHeadSchema). */
  head: Record<string, unknown>;
  /** What follows the head line: the body and its padding (sealedBody cuts it at body_bytes). */
  rest: Uint8Array;
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
 * A request envelope's three parts (views of `envelope`), or SealedFormatError when it is
 * too short or the key is not one the enclave seals to. The proxy checks this much too: it is
 * all the host can check.
 */
export function splitRequestEnvelope(envelope: Uint8Array): { clientPublicKey: Uint8Array; nonce: Uint8Array; box: Uint8Array } {
  if (envelope.length < REQUEST_ENVELOPE_MIN_BYTES) {
    throw new SealedFormatError(
      `the sealed request is ${envelope.length} bytes, shorter than a client public key (${PUBLIC_KEY_BYTES}), a nonce (${NONCE_BYTES}) and a box (at least ${MAC_BYTES})`,
    );
  }
  const clientPublicKey = envelope.subarray(0, PUBLIC_KEY_BYTES);
  if (!isAcceptableX25519Key(clientPublicKey)) throw new SealedFormatError('the sealed request\'s client public key is not a canonical X25519 key of large order');
  return { clientPublicKey, nonce: envelope.subarray(PUBLIC_KEY_BYTES, PUBLIC_KEY_BYTES + NONCE_BYTES), box: envelope.subarray(PUBLIC_KEY_BYTES + NONCE_BYTES) };
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
 * Opens a request envelope (the body of POST /v1/sealed, as received) with the enclave's box
 * secret key, or the cache of keys it shares with recent clients. Returns undefined when the
 * box does not open, i.e. it was altered or sealed to another key; throws SealedFormatError
 * for an envelope or plaintext of the wrong shape.
 */
export function openRequest(envelope: Uint8Array, boxKey: Uint8Array | SharedKeyCache): OpenedRequest | undefined {
  const { clientPublicKey, nonce, box } = splitRequestEnvelope(envelope);
  const sharedKey = boxKey instanceof SharedKeyCache ? boxKey.get(clientPublicKey) : boxBefore(clientPublicKey, boxKey);
  const opened = boxOpenAfter(box, nonce, sharedKey);
  if (!opened) return undefined;
  const { head, rest } = splitPlaintext(opened, 'request', SEALED_REQUEST_TYPE);
  const replayId = createHash('sha256').update('sealed-replay/v2\0').update(sharedKey).update(nonce).digest('base64');
  return { head, rest, clientPublicKey, sharedKey, nonce, replayId };
}

/** Seals the reply to the client, with the key shared when its request was opened, bound to that request's nonce. */
export function sealReply(reply: SealedReply, sharedKey: Uint8Array, requestNonce: Uint8Array): Buffer {
  const head = { type: SEALED_REPLY_TYPE, request_nonce: b64(requestNonce), status: reply.status, headers: reply.headers, body_bytes: reply.body.length };
  const nonce = uniqueNonce();
  const envelope = sealPlaintext(head, reply.body, NONCE_BYTES, nonce, sharedKey);
  envelope.set(nonce, 0);
  return envelope;
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
