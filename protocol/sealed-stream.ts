/**
 * Sealed streams: the answer to a sealed request, streamed as frames the host can neither
 * read nor rearrange. The one definition, used by the enclave to seal
 * (enclave/api/sealed-stream-route.ts) and by the sdk to open (sdk/sealed-stream.ts).
 *
 * Request: the same envelope as POST /v1/sealed (protocol/sealed.ts), POSTed to
 * /v1/sealed/stream. Both ends then derive the call's stream key:
 *
 *   key = HKDF-SHA256(ikm  = nacl.box.before(enclave box key, client key)   (X25519, then HSalsa20)
 *                     salt = the envelope's 24-byte nonce
 *                     info = "agent-service/sealed-stream/v1", 32 bytes)
 *
 * The nonce, fresh for every request, makes the key the call's own, also when the client
 * seals many requests with one key pair (protocol/sealed.ts ClientSealingKey); the info keeps
 * it apart from the box key that sealed the request.
 *
 * Answer: 200 `text/event-stream`, every event `data: <base64>\n\n`. The first holds the
 * 24-byte header of a libsodium crypto_secretstream_xchacha20poly1305 stream under that key;
 * each later one is one message of that stream, whose plaintext is
 *
 *   kind (1 byte) ‖ length (4 bytes, big-endian) ‖ payload ‖ zero bytes up to paddedSize()
 *
 *   kind 1 head  payload: UTF-8 JSON {"status":200,"headers":{…}}: the inner answer's status and headers
 *   kind 2 data  payload: the next bytes of the inner answer's body (its SSE events, as the enclave wrote them)
 *   kind 3 end   empty; pushed with TAG_FINAL
 *
 * Why secretstream: each message's nonce is derived from the stream's state, which every
 * message advances, so a message opens only in its own place: a frame reordered, dropped,
 * repeated or taken from another call fails authentication, and a stream that ends before
 * its TAG_FINAL message was cut. Padding hides each frame's exact length (token lengths of a
 * streamed answer say much about its text). The outer 200 is not signed (the box
 * authenticates every frame; the inner answer is signed inside), and anything after the end
 * is not part of the sealed answer.
 */
import { createHmac } from 'node:crypto';
import sodium from 'sodium-native';
import { paddedSize } from './sealed.js';

export const SEALED_STREAM_PATH = '/v1/sealed/stream';
const KDF_INFO = 'agent-service/sealed-stream/v1';
const HEADER_BYTES = sodium.crypto_secretstream_xchacha20poly1305_HEADERBYTES;
const ABYTES = sodium.crypto_secretstream_xchacha20poly1305_ABYTES;
const TAG_MESSAGE = sodium.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE;
const TAG_FINAL = sodium.crypto_secretstream_xchacha20poly1305_TAG_FINAL;
const PREFIX_BYTES = 5;
/** Largest frame a reader accepts: a whole non-streamed answer fits; a host sending more is refused, not buffered. */
export const MAX_FRAME_BYTES = 8 * 1024 * 1024;

const HEAD = 1;
const DATA = 2;
const END = 3;

export type OpenedFrame =
  | { kind: 'head'; status: number; headers: Record<string, string> }
  | { kind: 'data'; bytes: Uint8Array }
  | { kind: 'end' };

/** A sealed stream that cannot be opened as sent: altered, reordered, cut, or not the enclave's. */
export class SealedStreamError extends Error {
  override name = 'SealedStreamError';
}

/**
 * The call's stream key (see above): HKDF-SHA256 (RFC 5869) written out with two HMACs, since
 * one block is all it needs and node's hkdfSync costs several times more per call (it builds
 * a key object and a job); test/unit/sealed-stream-edges.test.ts checks it against hkdfSync.
 */
export function sealedStreamKey(sharedKey: Uint8Array, requestNonce: Uint8Array): Buffer {
  const prk = createHmac('sha256', requestNonce).update(sharedKey).digest();
  return createHmac('sha256', prk).update(KDF_INFO).update(ONE).digest().subarray(0, sodium.crypto_secretstream_xchacha20poly1305_KEYBYTES);
}
const ONE = Buffer.from([1]);

/** One outer event carrying `bytes`. */
export const frameEvent = (bytes: Uint8Array): Buffer =>
  Buffer.from(`data: ${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64')}\n\n`);

/** The enclave's end: seals frames in the order they are made. */
export class FrameSealer {
  readonly header = Buffer.alloc(HEADER_BYTES);
  private readonly state = Buffer.alloc(sodium.crypto_secretstream_xchacha20poly1305_STATEBYTES);
  private ended = false;

  constructor(key: Uint8Array) {
    sodium.crypto_secretstream_xchacha20poly1305_init_push(this.state, this.header, key);
  }

  head(status: number, headers: Record<string, string>): Buffer {
    return this.push(HEAD, Buffer.from(JSON.stringify({ status, headers }), 'utf8'));
  }

  data(bytes: Uint8Array): Buffer {
    return this.push(DATA, bytes);
  }

  end(): Buffer {
    return this.push(END, new Uint8Array(), TAG_FINAL);
  }

  private push(kind: number, payload: Uint8Array, tag = TAG_MESSAGE): Buffer {
    if (this.ended) throw new Error('the sealed stream has ended');
    if (tag === TAG_FINAL) this.ended = true;
    const plain = Buffer.alloc(paddedSize(PREFIX_BYTES + payload.length));
    plain[0] = kind;
    plain.writeUInt32BE(payload.length, 1);
    plain.set(payload, PREFIX_BYTES);
    const cipher = Buffer.allocUnsafe(plain.length + ABYTES);
    sodium.crypto_secretstream_xchacha20poly1305_push(this.state, cipher, plain, null, tag);
    return cipher;
  }
}

/** The client's end: opens frames in order, and knows whether the stream was ended by the enclave. */
export class FrameOpener {
  private readonly state = Buffer.alloc(sodium.crypto_secretstream_xchacha20poly1305_STATEBYTES);
  private frames = 0;
  private done = false;

  constructor(key: Uint8Array, header: Uint8Array) {
    if (header.length !== HEADER_BYTES) throw new SealedStreamError(`the sealed stream's header is ${header.length} bytes, not ${HEADER_BYTES}`);
    sodium.crypto_secretstream_xchacha20poly1305_init_pull(this.state, header, key);
  }

  /** True once the enclave's final frame has been opened. */
  get ended(): boolean {
    return this.done;
  }

  open(frame: Uint8Array): OpenedFrame {
    const index = this.frames++;
    if (this.done) throw new SealedStreamError(`frame ${index} came after the sealed stream's final frame`);
    if (frame.length < ABYTES + PREFIX_BYTES) throw new SealedStreamError(`frame ${index} is too short to be a sealed frame`);
    const plain = Buffer.alloc(frame.length - ABYTES);
    const tag = Buffer.alloc(1);
    try {
      sodium.crypto_secretstream_xchacha20poly1305_pull(this.state, plain, tag, frame, null);
    } catch {
      throw new SealedStreamError(
        `frame ${index} does not open in its place: the stream was altered, reordered, replayed or cut, or is not this call's`,
      );
    }
    const length = plain.readUInt32BE(1);
    if (PREFIX_BYTES + length > plain.length) throw new SealedStreamError(`frame ${index} claims more bytes than it holds`);
    const payload = plain.subarray(PREFIX_BYTES, PREFIX_BYTES + length);
    const final = tag[0] === TAG_FINAL;
    const kind = plain[0];
    // The kind is inside the authenticated plaintext; the order is the protocol's: head, data…, end.
    if (final !== (kind === END)) throw new SealedStreamError(`frame ${index} has kind ${kind} but ${final ? 'is' : 'is not'} marked final`);
    if ((index === 0) !== (kind === HEAD)) throw new SealedStreamError(`frame ${index} ${index === 0 ? 'is not' : 'is'} the head`);
    switch (kind) {
      case HEAD:
        return { kind: 'head', ...parseHead(payload) };
      case DATA:
        return { kind: 'data', bytes: new Uint8Array(payload) };
      case END:
        this.done = true;
        return { kind: 'end' };
      default:
        throw new SealedStreamError(`frame ${index} has unknown kind ${kind}`);
    }
  }
}

function parseHead(payload: Uint8Array): { status: number; headers: Record<string, string> } {
  let head: { status?: unknown; headers?: unknown };
  try {
    head = JSON.parse(Buffer.from(payload).toString('utf8')) as typeof head;
  } catch {
    throw new SealedStreamError('the sealed stream\'s head is not JSON');
  }
  const { status, headers } = head ?? {};
  if (!Number.isInteger(status) || (status as number) < 100 || (status as number) > 599) throw new SealedStreamError('the sealed stream\'s head has no valid status');
  if (typeof headers !== 'object' || headers === null || Object.values(headers).some((v) => typeof v !== 'string')) {
    throw new SealedStreamError('the sealed stream\'s head headers are not strings');
  }
  return { status: status as number, headers: headers as Record<string, string> };
}

/**
 * The data of each outer event, as bytes: only `data: <base64>` events (what the enclave
 * sends) decode; anything else (e.g. a JSON error event the proxy writes when the enclave
 * goes away) is returned as `{ text }` for the caller to report. Bounded: an event longer
 * than MAX_FRAME_BYTES of base64 is refused rather than held.
 */
export async function* outerEvents(source: AsyncIterable<Uint8Array>): AsyncGenerator<{ frame: Uint8Array } | { text: string }> {
  let buffer = '';
  const maxChars = Math.ceil(MAX_FRAME_BYTES / 3) * 4 + 64;
  for await (const chunk of source) {
    buffer += Buffer.from(chunk).toString('latin1'); // the frames are ASCII; anything else is not ours
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      yield decodeEvent(event);
    }
    if (buffer.length > maxChars) throw new SealedStreamError('an event of the sealed stream is larger than any sealed frame');
  }
  if (buffer.trim() !== '') yield { text: Buffer.from(buffer, 'latin1').toString('utf8') };
}

function decodeEvent(event: string): { frame: Uint8Array } | { text: string } {
  const data = event.startsWith('data: ') ? event.slice(6) : undefined;
  // Canonical base64 only (Buffer.from skips junk): the bytes must encode back to the text.
  const frame = data === undefined ? undefined : Buffer.from(data, 'base64');
  if (frame !== undefined && frame.toString('base64') === data) return { frame: new Uint8Array(frame.buffer, frame.byteOffset, frame.byteLength) };
  return { text: Buffer.from(data ?? event, 'latin1').toString('utf8') };
}
