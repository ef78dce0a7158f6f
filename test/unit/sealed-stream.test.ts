import nacl from 'tweetnacl';
import { describe, expect, it } from 'vitest';
import { openRequest, paddedSize, sealRequest } from '../../protocol/sealed.js';
import {
  FrameOpener, FrameSealer, frameEvent, outerEvents, SealedStreamError, sealedStreamKey, type OpenedFrame,
} from '../../protocol/sealed-stream.js';

/**
 * The sealed stream's frames (protocol/sealed-stream.ts) against every move a host in
 * the middle can make on them: each must be refused, naming the frame, never opened.
 */
const key = () => new Uint8Array(nacl.randomBytes(32));
const text = (frame: OpenedFrame) => (frame.kind === 'data' ? Buffer.from(frame.bytes).toString('utf8') : frame.kind);

/** A stream as the enclave makes it: header, head, three data frames, end. */
function makeStream(k = key()) {
  const sealer = new FrameSealer(k);
  const frames = [
    sealer.head(200, { 'content-type': 'text/event-stream' }),
    sealer.data(Buffer.from('data: one\n\n')),
    sealer.data(Buffer.from('data: two\n\n')),
    sealer.data(Buffer.from('data: three\n\n')),
    sealer.end(),
  ];
  return { k, header: sealer.header, frames };
}

/** Opens frames in the order given; returns what opened or the error. */
function openAll(k: Uint8Array, header: Uint8Array, frames: Uint8Array[]): { opened: string[]; ended: boolean; error?: Error } {
  const opener = new FrameOpener(k, header);
  const opened: string[] = [];
  try {
    for (const f of frames) opened.push(text(opener.open(f)));
  } catch (error) {
    return { opened, ended: opener.ended, error: error as Error };
  }
  return { opened, ended: opener.ended };
}

describe('sealed stream frames', () => {
  it('open in order: head, data, end', () => {
    const { k, header, frames } = makeStream();
    const result = openAll(k, header, frames);
    expect(result.error).toBeUndefined();
    expect(result.opened).toEqual(['head', 'data: one\n\n', 'data: two\n\n', 'data: three\n\n', 'end']);
    expect(result.ended).toBe(true);
  });

  it('the head carries the inner status and headers', () => {
    const { k, header, frames } = makeStream();
    expect(new FrameOpener(k, header).open(frames[0])).toEqual({ kind: 'head', status: 200, headers: { 'content-type': 'text/event-stream' } });
  });

  const attacks: [string, (f: Uint8Array[]) => Uint8Array[]][] = [
    ['two frames swapped', (f) => [f[0], f[2], f[1], f[3], f[4]]],
    ['a frame dropped', (f) => [f[0], f[1], f[3], f[4]]],
    ['a frame repeated', (f) => [f[0], f[1], f[1], f[2], f[3], f[4]]],
    ['the head dropped', (f) => f.slice(1)],
    ['a byte flipped', (f) => f.map((x, i) => (i === 2 ? Buffer.from(x.map((b, j) => (j === 9 ? b ^ 1 : b))) : x))],
    ['a frame shortened', (f) => f.map((x, i) => (i === 2 ? x.subarray(0, x.length - 1) : x))],
    ['the end repeated', (f) => [...f, f[4]]],
  ];
  for (const [name, attack] of attacks) {
    it(`refuses ${name}`, () => {
      const { k, header, frames } = makeStream();
      const result = openAll(k, header, attack(frames));
      expect(result.error).toBeInstanceOf(SealedStreamError);
      expect(result.error!.message).toMatch(/^frame \d+ /);
    });
  }

  it('a stream cut before its final frame never reports an end (the reader must refuse it)', () => {
    const { k, header, frames } = makeStream();
    const result = openAll(k, header, frames.slice(0, 4));
    expect(result.error).toBeUndefined();
    expect(result.ended).toBe(false);
  });

  it('frames of another call (another key), or replayed from an earlier call under the same key with another header, do not open', () => {
    const a = makeStream();
    const b = makeStream();
    expect(openAll(a.k, a.header, [a.frames[0], b.frames[1]]).error).toBeInstanceOf(SealedStreamError);
    const again = makeStream(a.k); // same key, fresh header: a new stream
    expect(openAll(a.k, a.header, [again.frames[0]]).error).toBeInstanceOf(SealedStreamError);
  });

  it('frames are padded to the sealed buckets: different small chunks look alike', () => {
    const sealer = new FrameSealer(key());
    const short = sealer.data(Buffer.from('a'));
    const longer = sealer.data(Buffer.alloc(900, 0x61));
    expect(short.length).toBe(longer.length);
    expect(sealer.data(Buffer.alloc(3000)).length).toBe(paddedSize(3005) + 17);
  });

  it('both ends derive the same key from the envelope, and no one else can', () => {
    const enclave = nacl.box.keyPair();
    const { envelope, nonce, replyKey } = sealRequest(enclave.publicKey, { method: 'GET', target: '/v1/models', body: new Uint8Array(), timestamp: Date.now() });
    const opened = openRequest(envelope, enclave.secretKey)!;
    const clientKey = sealedStreamKey(replyKey, nonce);
    expect(sealedStreamKey(opened.sharedKey, opened.nonce)).toEqual(clientKey);
    // Not the box key itself: the stream's key is apart from the one that sealed the request.
    expect(Buffer.from(clientKey)).not.toEqual(Buffer.from(replyKey));
  });
});

describe('the outer event stream', () => {
  async function* chunks(...parts: (string | Buffer)[]) {
    for (const p of parts) yield new Uint8Array(Buffer.from(p));
  }
  const collect = async (source: AsyncIterable<Uint8Array>) => {
    const out: unknown[] = [];
    for await (const e of outerEvents(source)) out.push('frame' in e ? Buffer.from(e.frame).toString('hex') : e);
    return out;
  };

  it('reassembles events split anywhere, and reports anything that is not a frame as text', async () => {
    const event = frameEvent(Buffer.from('abc')).toString();
    expect(await collect(chunks(event.slice(0, 5), event.slice(5), 'data: {"error":{"message":"gone"}}\n\n'))).toEqual([
      Buffer.from('abc').toString('hex'),
      { text: '{"error":{"message":"gone"}}' },
    ]);
  });
});
