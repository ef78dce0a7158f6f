/**
 * Sealed requests: the one definition of the envelopes, used by the sdk to seal and by
 * the enclave to open (enclave/api/sealed-route.ts).
 *
 * The client makes a fresh X25519 key pair per request and encrypts with nacl.box
 * (X25519 + XSalsa20-Poly1305) to the enclave's `tee_box_public_key`, which the
 * attestation document binds in user_data. It POSTs to /v1/sealed:
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
 * boxed to the client's key, whose plaintext is
 *
 *   {"type":"agent-service/sealed-reply/v1","status":200,"headers":{…},"body":"<b64>"}
 *
 * The `type` tags keep a request from being reflected back as its own reply (both
 * directions share one box key). A fresh client key per request means a reply can be
 * opened only by the request's sender, and never as the answer to another request.
 */
import { createHash } from 'node:crypto';
import { boxAfter, boxBefore, boxKeyPair, boxOpenAfter, NONCE_BYTES, PUBLIC_KEY_BYTES, randomNonce, type BoxKeyPair } from './box.js';

export const SEALED_PATH = '/v1/sealed';
export const SEALED_REQUEST_TYPE = 'agent-service/sealed-request/v1';
export const SEALED_REPLY_TYPE = 'agent-service/sealed-reply/v1';
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
 * Seals a request to the enclave's box key with a fresh key pair (or the one given, for
 * tests). `replyKey` (the shared key, nacl.box.before) is what opens the reply; keep it
 * only for this call.
 */
export function sealRequest(
  enclaveBoxKey: Uint8Array,
  request: SealedRequest,
  ephemeral: BoxKeyPair = boxKeyPair(),
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
  // One X25519 multiplication serves both directions.
  const sharedKey = boxBefore(enclaveBoxKey, ephemeral.secretKey);
  const nonce = randomNonce();
  const ciphertext = boxAfter(utf8(plaintext as unknown as Record<string, unknown>), nonce, sharedKey);
  return {
    envelope: { client_public_key: b64(ephemeral.publicKey), nonce: b64(nonce), ciphertext: b64(ciphertext) },
    replyKey: sharedKey,
  };
}

/** Opens the enclave's sealed reply with the call's replyKey; throws SealedFormatError when it cannot. */
export function openReply(envelope: unknown, replyKey: Uint8Array): SealedReply {
  const { nonce, ciphertext } = (typeof envelope === 'object' && envelope !== null ? envelope : {}) as Record<string, unknown>;
  const nonceBytes = decodeBase64(nonce, 'nonce', NONCE_BYTES);
  const boxed = decodeBase64(ciphertext, 'ciphertext');
  const opened = boxOpenAfter(boxed, nonceBytes, replyKey);
  if (!opened) throw new SealedFormatError('the sealed reply does not open with the enclave\'s box key: it was altered or not made by the enclave');
  let reply: Record<string, unknown>;
  try {
    reply = JSON.parse(Buffer.from(opened).toString('utf8')) as Record<string, unknown>;
  } catch {
    throw new SealedFormatError('the sealed reply is not JSON');
  }
  if (reply?.type !== SEALED_REPLY_TYPE) throw new SealedFormatError(`the sealed reply's type is not ${SEALED_REPLY_TYPE}`);
  const { status, headers, body } = reply;
  if (!Number.isInteger(status) || (status as number) < 100 || (status as number) > 599) throw new SealedFormatError('the sealed reply has no valid status');
  if (typeof headers !== 'object' || headers === null || Object.values(headers).some((v) => typeof v !== 'string')) {
    throw new SealedFormatError('the sealed reply\'s headers are not strings');
  }
  return { status: status as number, headers: headers as Record<string, string>, body: decodeBase64(body, 'body') };
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

export function isAcceptableX25519Key(key: Uint8Array): boolean {
  if (key.length !== 32 || LOW_ORDER.includes(Buffer.from(key).toString('hex'))) return false;
  // Canonical: as a little-endian number, below p = 2^255 - 19.
  let u = 0n;
  for (let i = 31; i >= 0; i--) u = (u << 8n) | BigInt(key[i]);
  return u < 2n ** 255n - 19n;
}

/**
 * Opens a request envelope whose fields are already known to be base64 strings of the
 * right lengths (the schema). Returns undefined when the box does not open, i.e. it was
 * altered or sealed to another key.
 */
export function openRequest(envelope: RequestEnvelope, boxSecretKey: Uint8Array): OpenedRequest | undefined {
  const clientPublicKey = decodeBase64(envelope.client_public_key, 'client_public_key', PUBLIC_KEY_BYTES);
  const nonce = decodeBase64(envelope.nonce, 'nonce', NONCE_BYTES);
  if (!isAcceptableX25519Key(clientPublicKey)) throw new SealedFormatError('client_public_key is not a canonical X25519 key of large order');
  const sharedKey = boxBefore(clientPublicKey, boxSecretKey);
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

/** Seals the reply to the client, with the key shared when its request was opened. */
export function sealReply(reply: SealedReply, sharedKey: Uint8Array): ReplyEnvelope {
  const plaintext = { type: SEALED_REPLY_TYPE, status: reply.status, headers: reply.headers, body: b64(reply.body) };
  const nonce = randomNonce();
  return { nonce: b64(nonce), ciphertext: b64(boxAfter(utf8(plaintext), nonce, sharedKey)) };
}

/** Strict base64 (Buffer.from skips junk); optionally of an exact decoded length. */
export function decodeBase64(value: unknown, what: string, length?: number): Uint8Array {
  if (typeof value !== 'string' || value.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) {
    throw new SealedFormatError(`${what} is not base64`);
  }
  const bytes = new Uint8Array(Buffer.from(value, 'base64'));
  if (length !== undefined && bytes.length !== length) throw new SealedFormatError(`${what} must be ${length} bytes, got ${bytes.length}`);
  return bytes;
}
