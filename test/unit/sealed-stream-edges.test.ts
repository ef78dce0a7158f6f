import { hkdfSync } from 'node:crypto';
import nacl from 'tweetnacl';
import sodium from 'sodium-native';
import { describe, expect, it } from 'vitest';
import {
  FrameOpener, FrameSealer, frameEvent, MAX_FRAME_BYTES, outerEvents, SealedStreamError, sealedStreamKey,
} from '../../protocol/sealed-stream.js';

/**
 * The edges of the sealed stream (protocol/sealed-stream.ts) that the host cannot reach but a
 * faulty or foreign writer can: frames that authenticate under the call's key yet break the
 * framing (kind, length, order, head), checked byte by byte with libsodium's own secretstream,
 * and the outer event reader's limits. sealed-stream.test.ts holds the host's moves.
 */
const ABYTES = sodium.crypto_secretstream_xchacha20poly1305_ABYTES;
const TAG_FINAL = sodium.crypto_secretstream_xchacha20poly1305_TAG_FINAL;
const TAG_MESSAGE = sodium.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE;
const key = () => new Uint8Array(nacl.randomBytes(32));

/** A secretstream under `k` that pushes any plaintext: frames no FrameSealer would make. */
function rawStream(k: Uint8Array) {
  const state = Buffer.alloc(sodium.crypto_secretstream_xchacha20poly1305_STATEBYTES);
  const header = Buffer.alloc(sodium.crypto_secretstream_xchacha20poly1305_HEADERBYTES);
  sodium.crypto_secretstream_xchacha20poly1305_init_push(state, header, k);
  const push = (plain: Uint8Array, tag = TAG_MESSAGE) => {
    const cipher = Buffer.alloc(plain.length + ABYTES);
    sodium.crypto_secretstream_xchacha20poly1305_push(state, cipher, plain, null, tag);
    return cipher;
  };
  return { header, push };
}

/** kind ‖ length (4 bytes BE) ‖ payload, zero-padded to `size`. */
function framePlain(kind: number, payload: Uint8Array | string, length?: number, size = 64): Buffer {
  const bytes = Buffer.from(payload);
  const plain = Buffer.alloc(Math.max(size, 5 + bytes.length));
  plain[0] = kind;
  plain.writeUInt32BE(length ?? bytes.length, 1);
  bytes.copy(plain, 5);
  return plain;
}

/** Opens `frames` in order and returns the first refusal's message. */
function refusal(k: Uint8Array, header: Uint8Array, frames: Uint8Array[]): string {
  const opener = new FrameOpener(k, header);
  try {
    for (const frame of frames) opener.open(frame);
  } catch (error) {
    expect(error).toBeInstanceOf(SealedStreamError);
    return (error as Error).message;
  }
  throw new Error('every frame opened');
}

const head = framePlain(1, '{"status":200,"headers":{}}');

describe('sealed stream framing, under the call\'s own key', () => {
  it('the key is HKDF-SHA256 of the shared key, salted with the request nonce, info agent-service/sealed-stream/v1 (what another client must derive)', () => {
    const shared = Buffer.alloc(32, 0x11);
    const nonce = Buffer.alloc(24, 0x22);
    const expected = Buffer.from(hkdfSync('sha256', shared, nonce, 'agent-service/sealed-stream/v1', 32));
    expect(sealedStreamKey(shared, nonce)).toEqual(expected);
    expect(sealedStreamKey(shared, nonce)).toHaveLength(32);
    expect(sealedStreamKey(shared, Buffer.alloc(24, 0x23))).not.toEqual(expected);
  });

  it('refuses a header that is not 24 bytes, naming its length', () => {
    expect(() => new FrameOpener(key(), new Uint8Array(23))).toThrow(new SealedStreamError('the sealed stream\'s header is 23 bytes, not 24'));
    expect(() => new FrameOpener(key(), new Uint8Array(25))).toThrow(SealedStreamError);
    // Named as itself wherever it is printed or told apart from other errors.
    expect(new SealedStreamError('x').name).toBe('SealedStreamError');
  });

  it('calls a frame shorter than tag and prefix too short, and one just long enough a frame that does not open', () => {
    const k = key();
    const { header } = rawStream(k);
    expect(refusal(k, header, [new Uint8Array(ABYTES + 4)])).toBe('frame 0 is too short to be a sealed frame');
    expect(refusal(k, header, [new Uint8Array(ABYTES + 5)])).toMatch(/^frame 0 does not open in its place/);
  });

  it('opens a frame of exactly tag and prefix: an empty payload', () => {
    const k = key();
    const { header, push } = rawStream(k);
    const opener = new FrameOpener(k, header);
    opener.open(push(head));
    expect(opener.open(push(framePlain(2, '', 0, 5)))).toEqual({ kind: 'data', bytes: new Uint8Array() });
  });

  it('refuses a frame whose length claims more than it holds, and takes one that claims exactly what it holds', () => {
    const k = key();
    const { header, push } = rawStream(k);
    expect(refusal(k, header, [push(head), push(framePlain(2, 'abc', 60, 64))])).toBe('frame 1 claims more bytes than it holds');
    const ok = rawStream(k);
    const opener = new FrameOpener(k, ok.header);
    opener.open(ok.push(head));
    const full = opener.open(ok.push(framePlain(2, 'x'.repeat(59), 59, 64)));
    expect(full.kind === 'data' && Buffer.from(full.bytes).toString()).toBe('x'.repeat(59));
  });

  it('returns the payload only, not the padding after it', () => {
    const k = key();
    const sealer = new FrameSealer(k);
    const opener = new FrameOpener(k, sealer.header);
    opener.open(sealer.head(200, {}));
    const frame = opener.open(sealer.data(Buffer.from('data: x\n\n')));
    expect(frame).toEqual({ kind: 'data', bytes: new Uint8Array(Buffer.from('data: x\n\n')) });
  });

  it('refuses an end frame not marked final, and a final frame that is not the end', () => {
    const k = key();
    const a = rawStream(k);
    expect(refusal(k, a.header, [a.push(head), a.push(framePlain(3, ''))])).toBe('frame 1 has kind 3 but is not marked final');
    const b = rawStream(k);
    expect(refusal(k, b.header, [b.push(head), b.push(framePlain(2, 'x'), TAG_FINAL)])).toBe('frame 1 has kind 2 but is marked final');
  });

  it('refuses a stream that does not begin with its head, or has a second head', () => {
    const k = key();
    const sealer = new FrameSealer(k);
    expect(refusal(k, sealer.header, [sealer.data(Buffer.from('x'))])).toBe('frame 0 is not the head');
    const twice = new FrameSealer(k);
    expect(refusal(k, twice.header, [twice.head(200, {}), twice.head(200, {})])).toBe('frame 1 is the head');
    const ended = rawStream(k);
    expect(refusal(k, ended.header, [ended.push(framePlain(3, ''), TAG_FINAL)])).toBe('frame 0 is not the head');
  });

  it('refuses a frame of a kind the protocol does not have', () => {
    const k = key();
    const { header, push } = rawStream(k);
    expect(refusal(k, header, [push(head), push(framePlain(4, 'x'))])).toBe('frame 1 has unknown kind 4');
    const zero = rawStream(k);
    expect(refusal(k, zero.header, [zero.push(head), zero.push(framePlain(0, 'x'))])).toBe('frame 1 has unknown kind 0');
  });

  it('refuses any frame after the final one before trying to open it, and the sealer makes none', () => {
    const k = key();
    const sealer = new FrameSealer(k);
    const frames = [sealer.head(200, {}), sealer.end()];
    expect(() => sealer.data(Buffer.from('late'))).toThrow('the sealed stream has ended');
    expect(() => sealer.end()).toThrow('the sealed stream has ended');
    const raw = rawStream(k);
    const late = [raw.push(head), raw.push(framePlain(3, ''), TAG_FINAL), raw.push(framePlain(2, 'late'))];
    expect(refusal(k, sealer.header, [...frames, frames[1]])).toBe('frame 2 came after the sealed stream\'s final frame');
    expect(refusal(k, raw.header, late)).toBe('frame 2 came after the sealed stream\'s final frame');
  });

  it('a sealer goes on after head and data frames: only the end is final', () => {
    const k = key();
    const sealer = new FrameSealer(k);
    const frames = [sealer.head(200, {}), sealer.data(Buffer.from('a')), sealer.data(Buffer.from('b')), sealer.end()];
    const opener = new FrameOpener(k, sealer.header);
    expect(frames.map((f) => opener.open(f).kind)).toEqual(['head', 'data', 'data', 'end']);
    expect(opener.ended).toBe(true);
  });

  it.each([
    ['not JSON', framePlain(1, '{"status":'), 'the sealed stream\'s head is not JSON'],
    ['JSON null', framePlain(1, 'null'), 'the sealed stream\'s head has no valid status'],
    ['no status', framePlain(1, '{"headers":{}}'), 'the sealed stream\'s head has no valid status'],
    ['status 99', framePlain(1, '{"status":99,"headers":{}}'), 'the sealed stream\'s head has no valid status'],
    ['status 600', framePlain(1, '{"status":600,"headers":{}}'), 'the sealed stream\'s head has no valid status'],
    ['status 200.5', framePlain(1, '{"status":200.5,"headers":{}}'), 'the sealed stream\'s head has no valid status'],
    ['status "200"', framePlain(1, '{"status":"200","headers":{}}'), 'the sealed stream\'s head has no valid status'],
    ['no headers', framePlain(1, '{"status":200}'), 'the sealed stream\'s head headers are not strings'],
    ['null headers', framePlain(1, '{"status":200,"headers":null}'), 'the sealed stream\'s head headers are not strings'],
    ['headers a string', framePlain(1, '{"status":200,"headers":"x"}'), 'the sealed stream\'s head headers are not strings'],
    ['a header that is a number', framePlain(1, '{"status":200,"headers":{"a":"b","n":1}}'), 'the sealed stream\'s head headers are not strings'],
  ])('refuses a head that is %s', (_name, plain, message) => {
    const k = key();
    const { header, push } = rawStream(k);
    expect(refusal(k, header, [push(plain)])).toBe(message);
  });

  it('takes a head at the edges of the status range', () => {
    const k = key();
    for (const status of [100, 599]) {
      const { header, push } = rawStream(k);
      expect(new FrameOpener(k, header).open(push(framePlain(1, `{"status":${status},"headers":{"a":"b"}}`)))).toEqual({ kind: 'head', status, headers: { a: 'b' } });
    }
  });
});

describe('the outer event reader', () => {
  async function* chunks(...parts: (string | Uint8Array)[]) {
    for (const p of parts) yield typeof p === 'string' ? new Uint8Array(Buffer.from(p, 'latin1')) : p;
  }
  const collect = async (source: AsyncIterable<Uint8Array>) => {
    const out: unknown[] = [];
    for await (const e of outerEvents(source)) out.push('frame' in e ? { frame: Buffer.from(e.frame).toString('hex') } : e);
    return out;
  };

  it('encodes exactly the bytes of a view, not the buffer under it', () => {
    const under = Buffer.from('xxabcyy');
    expect(frameEvent(under.subarray(2, 5)).toString()).toBe(`data: ${Buffer.from('abc').toString('base64')}\n\n`);
  });

  it('decodes only `data: <base64>` events as frames; anything else is text', async () => {
    expect(await collect(chunks('data: YWJj\n\n', 'data: YWI=\n\n', 'data: \n\n'))).toEqual([
      { frame: '616263' }, { frame: '6162' }, { frame: '' },
    ]);
    expect(await collect(chunks('data: YWJ\n\n', 'data: YW!j\n\n', 'event: x\n\n', 'data:YWJj\n\n', 'data: YWJj=\n\n', 'data: YWJjZA===\n\n'))).toEqual([
      { text: 'YWJ' }, { text: 'YW!j' }, { text: 'event: x' }, { text: 'data:YWJj' }, { text: 'YWJj=' }, { text: 'YWJjZA===' },
    ]);
    expect(await collect(chunks(new Uint8Array(Buffer.from('data: {"error":"h\u00e9"}\n\n', 'utf8'))))).toEqual([{ text: '{"error":"h\u00e9"}' }]);
  });

  it('reports what is left after the last event as text, and nothing when only blank space is left', async () => {
    expect(await collect(chunks('data: YWJj\n\n', 'data: {"cut'))).toEqual([{ frame: '616263' }, { text: 'data: {"cut' }]);
    expect(await collect(chunks('data: YWJj\n\n', ' \n'))).toEqual([{ frame: '616263' }]);
    expect(await collect(chunks('data: YWJj\n\n'))).toEqual([{ frame: '616263' }]);
  });

  it('reports a blank event as empty text, and reads the frame after it', async () => {
    expect(await collect(chunks('\n\n', 'data: YWJj\n\n'))).toEqual([{ text: '' }, { frame: '616263' }]);
  });

  it('splits several events out of one chunk', async () => {
    expect(await collect(chunks('data: YQ==\n\ndata: Yg==\n\ndata: Yw==\n\n'))).toEqual([{ frame: '61' }, { frame: '62' }, { frame: '63' }]);
  });

  it('refuses an event longer than any sealed frame instead of holding it, and holds one of the largest size', async () => {
    const maxChars = Math.ceil(MAX_FRAME_BYTES / 3) * 4 + 64;
    const big = new Uint8Array(maxChars).fill(0x41);
    await expect(collect(chunks(big))).resolves.toEqual([{ text: 'A'.repeat(maxChars) }]);
    await expect(collect(chunks(big, 'A'))).rejects.toThrow(new SealedStreamError('an event of the sealed stream is larger than any sealed frame'));
  });
});
