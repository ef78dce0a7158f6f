import nacl from 'tweetnacl';
import { describe, expect, it } from 'vitest';
import {
  decodeBase64, isAcceptableX25519Key, openReply, openRequest, paddedSize, sealedBody, sealReply, sealRequest, SealedFormatError, splitRequestEnvelope,
} from '../../protocol/sealed.js';

/**
 * The edges of sealed envelopes (protocol/sealed.ts): envelopes of the wrong shape, replies
 * and requests that open under the call's key but are not one, strict base64, the X25519
 * keys refused, and what makes two requests count as one for replay.
 * sealed-requests.test.ts holds the round trip and the host's moves.
 */
const enclave = nacl.box.keyPair();
const utf8 = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'));
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const request = { method: 'POST', target: '/v1/memory', body: utf8('{}'), timestamp: 1_731_000_000_000 };

/** A reply envelope (nonce ‖ box) whose plaintext is `text`, boxed with the call's key (what only the enclave could make). */
function boxedReply(text: string | Uint8Array, replyKey: Uint8Array): Uint8Array {
  const nonce = nacl.randomBytes(24);
  return new Uint8Array(Buffer.concat([nonce, nacl.box.after(typeof text === 'string' ? utf8(text) : text, nonce, replyKey)]));
}

/** A request envelope (key ‖ nonce ‖ box) whose plaintext is `plain`, sealed by `client` to the enclave. */
function boxedRequest(plain: Uint8Array, client = nacl.box.keyPair(), nonce = nacl.randomBytes(24)): Uint8Array {
  return new Uint8Array(Buffer.concat([client.publicKey, nonce, nacl.box(plain, nonce, enclave.publicKey, client.secretKey)]));
}

/** The parts of a request envelope, opened with the enclave's key (as a test sees them). */
function parts(envelope: Uint8Array) {
  const key = envelope.subarray(0, 32);
  const nonce = envelope.subarray(32, 56);
  const plain = nacl.box.open(envelope.subarray(56), nonce, key, enclave.secretKey)!;
  const headEnd = plain.indexOf(0x0a);
  return { key, nonce, plain, head: JSON.parse(Buffer.from(plain.subarray(0, headEnd)).toString()) as Record<string, unknown>, rest: plain.subarray(headEnd + 1) };
}

describe('sealed requests carry what the client set, and nothing it did not', () => {
  it('carries the known state inside the box, and leaves out empty optional fields', () => {
    const known = `5:${'cd'.repeat(32)}`;
    const tenantKey = new Uint8Array(32).fill(5);
    const opened = openRequest(sealRequest(enclave.publicKey, { ...request, knownState: known, tenantKey }).envelope, enclave.secretKey)!;
    expect(opened.head).toMatchObject({ known_state: known, tenant_key: b64(tenantKey) });
    const bare = openRequest(sealRequest(enclave.publicKey, { ...request, authorization: '', organization: '', knownState: '' }).envelope, enclave.secretKey)!;
    expect(Object.keys(bare.head).sort()).toEqual(['body_bytes', 'method', 'target', 'timestamp', 'type']);
  });

  it('sends the envelope as key ‖ nonce ‖ box, the body as its bytes after the head line, then zeros', () => {
    const body = utf8('{"content":"caf\u00e9 \\n"}\n');
    const sealed = sealRequest(enclave.publicKey, { ...request, body });
    const { key, nonce, head, rest } = parts(sealed.envelope);
    expect(head).toEqual({ type: 'agent-service/sealed-request/v2', method: 'POST', target: '/v1/memory', timestamp: request.timestamp, body_bytes: body.length });
    expect(rest.subarray(0, body.length)).toEqual(body);
    expect(rest.subarray(body.length).every((byte) => byte === 0)).toBe(true);
    expect(new Uint8Array(nonce)).toEqual(sealed.nonce);
    const opened = openRequest(sealed.envelope, enclave.secretKey)!;
    expect(opened.clientPublicKey).toEqual(key);
    expect(sealedBody(opened.rest, head.body_bytes, 'request')).toEqual(body);
  });

  it('pads the plaintext to exactly its bucket: the envelope is key, nonce, the 16-byte MAC and the bucket', () => {
    for (const size of [0, 900, 1500, 70_000]) {
      const { envelope } = sealRequest(enclave.publicKey, { ...request, body: new Uint8Array(size) });
      const { plain } = parts(envelope);
      const headLine = plain.indexOf(0x0a) + 1;
      expect(plain.length).toBe(paddedSize(headLine + size));
      expect(envelope.length).toBe(32 + 24 + 16 + plain.length);
    }
    const { replyKey, envelope, nonce } = sealRequest(enclave.publicKey, request);
    expect(envelope.length).toBe(72 + 1024);
    // A reply: its head line and the body's bytes (1,500 + about 130), padded to 2 KiB.
    const reply = sealReply({ status: 200, headers: {}, body: new Uint8Array(1500) }, replyKey, nonce);
    expect(reply.length).toBe(24 + 16 + 2048);
    expect(openReply(reply, replyKey, nonce).body).toEqual(new Uint8Array(1500));
    const full = sealReply({ status: 200, headers: {}, body: new Uint8Array(2000) }, replyKey, nonce);
    expect(full.length).toBe(24 + 16 + 4096);
  });

  it('sizes the buckets at their edges', () => {
    expect([0, 1023, 1024, 1025, 2048, 2049, 65535, 65536, 65537, 131072, 131073].map(paddedSize))
      .toEqual([1024, 1024, 1024, 2048, 2048, 4096, 65536, 65536, 131072, 131072, 196608]);
  });

  it('counts the same envelope as one however it is respelled, and different key or nonce as different requests', () => {
    const client = nacl.box.keyPair();
    const a = sealRequest(enclave.publicKey, request, client).envelope;
    const b = sealRequest(enclave.publicKey, request, client).envelope;
    const first = openRequest(a, enclave.secretKey)!;
    // The same client key with a fresh nonce is a new request.
    expect(openRequest(b, enclave.secretKey)!.replayId).not.toBe(first.replayId);
    // Another client key with the same nonce is a new request too.
    const nonce = a.subarray(32, 56);
    const sameNonce = boxedRequest(parts(a).plain, nacl.box.keyPair(), nonce);
    expect(openRequest(sameNonce, enclave.secretKey)!.replayId).not.toBe(first.replayId);
    expect(openRequest(a, enclave.secretKey)!.replayId).toBe(first.replayId);
    expect(new Uint8Array(first.nonce)).toEqual(new Uint8Array(nonce));
    expect(new Uint8Array(first.clientPublicKey)).toEqual(client.publicKey);
  });

  it.each([
    ['not UTF-8', new Uint8Array([0x22, 0xff, 0x22, 0x0a]), 'the sealed request\'s head is not JSON'],
    ['a head that is not JSON', utf8('{"a":\n'), 'the sealed request\'s head is not JSON'],
    ['a head that is a string', utf8('"\u00e9"\n'), 'the sealed request\'s head is not a JSON object'],
    ['a head that is an array', utf8('[]\n'), 'the sealed request\'s head is not a JSON object'],
    ['no head line (the JSON plaintext of a request before the body went as bytes)', utf8('{"type":"agent-service/sealed-request/v1","body":""}    '), 'the sealed request is not an agent-service/sealed-request/v2 request (it has no head line)'],
  ])('opens a box whose plaintext has %s, and refuses it', (_name, plain, message) => {
    expect(() => openRequest(boxedRequest(plain), enclave.secretKey)).toThrow(new SealedFormatError(message));
  });

  it('refuses a client key that is not a canonical X25519 key before any X25519', () => {
    const { envelope } = sealRequest(enclave.publicKey, request);
    const zeroKey = Buffer.concat([Buffer.alloc(32), envelope.subarray(32)]);
    expect(() => openRequest(zeroKey, enclave.secretKey))
      .toThrow(new SealedFormatError('the sealed request\'s client public key is not a canonical X25519 key of large order'));
    expect(new SealedFormatError('x').name).toBe('SealedFormatError');
  });
});

describe('request envelopes of the wrong shape', () => {
  const SHORT = (n: number) => `the sealed request is ${n} bytes, shorter than a client public key (32), a nonce (24) and a box (at least 16)`;

  it.each([0, 1, 32, 56, 71])('refuses an envelope of %i bytes as too short', (length) => {
    const { envelope } = sealRequest(enclave.publicKey, request);
    expect(() => splitRequestEnvelope(envelope.subarray(0, length))).toThrow(new SealedFormatError(SHORT(length)));
    expect(() => openRequest(envelope.subarray(0, length), enclave.secretKey)).toThrow(new SealedFormatError(SHORT(length)));
  });

  it('takes 72 bytes (an empty box) as the shape, which then does not open', () => {
    const { envelope } = sealRequest(enclave.publicKey, request);
    expect(splitRequestEnvelope(envelope.subarray(0, 72)).box.length).toBe(16);
    expect(openRequest(envelope.subarray(0, 72), enclave.secretKey)).toBeUndefined();
  });

  it('does not open an envelope with junk after its box, or with its last byte cut', () => {
    const { envelope } = sealRequest(enclave.publicKey, request);
    expect(openRequest(Buffer.concat([envelope, Buffer.from([0])]), enclave.secretKey)).toBeUndefined();
    expect(openRequest(envelope.subarray(0, envelope.length - 1), enclave.secretKey)).toBeUndefined();
  });

  it.each([
    ['body_bytes past the plaintext', 2000, 'the sealed request\'s body_bytes is not the length of a body it holds'],
    ['body_bytes -1', -1, 'the sealed request\'s body_bytes is not the length of a body it holds'],
    ['body_bytes 1.5', 1.5, 'the sealed request\'s body_bytes is not the length of a body it holds'],
    ['body_bytes "2"', '2', 'the sealed request\'s body_bytes is not the length of a body it holds'],
    ['body_bytes shorter than the body (the rest is not zeros)', 1, 'the sealed request has bytes other than zeros after its body (at byte 1 after the head line)'],
  ])('cuts the body at body_bytes, and refuses %s', (_name, bodyBytes, message) => {
    const { rest } = parts(sealRequest(enclave.publicKey, { ...request, body: utf8('{}') }).envelope);
    expect(sealedBody(rest, 2, 'request')).toEqual(utf8('{}'));
    expect(() => sealedBody(rest, bodyBytes, 'request')).toThrow(new SealedFormatError(message));
  });

  it('refuses junk in the padding after the body, at its first byte or its last', () => {
    const { rest } = parts(sealRequest(enclave.publicKey, { ...request, body: utf8('{}') }).envelope);
    for (const at of [2, rest.length - 1]) {
      const junk = new Uint8Array(rest);
      junk[at] = 0x20;
      expect(() => sealedBody(junk, 2, 'request')).toThrow(new SealedFormatError(`the sealed request has bytes other than zeros after its body (at byte ${at} after the head line)`));
    }
    // No padding at all: a body that ends the plaintext.
    expect(sealedBody(utf8('ab'), 2, 'request')).toEqual(utf8('ab'));
    // An empty body whose first byte of padding is not zero.
    expect(() => sealedBody(Uint8Array.of(1, 0, 0), 0, 'request'))
      .toThrow(new SealedFormatError('the sealed request has bytes other than zeros after its body (at byte 0 after the head line)'));
    expect(sealedBody(Uint8Array.of(0, 0, 0), 0, 'request')).toEqual(new Uint8Array());
  });

  it('checks padding of any length, 64 KiB at a time: junk in a later block, at a block\'s edge, or at the very end is found', () => {
    const rest = new Uint8Array(2 + 200_000);
    rest.set(utf8('ab'));
    expect(sealedBody(rest, 2, 'request')).toEqual(utf8('ab'));
    for (const at of [2 + 65535, 2 + 65536, 2 + 131_072 + 5, rest.length - 1]) {
      const junk = new Uint8Array(rest);
      junk[at] = 1;
      expect(() => sealedBody(junk, 2, 'request')).toThrow(new SealedFormatError(`the sealed request has bytes other than zeros after its body (at byte ${at} after the head line)`));
    }
    // A view into a larger buffer: only its own bytes count.
    const outer = new Uint8Array(10);
    outer.set([9, 0x61, 0x62, 0, 0, 0, 9], 0);
    expect(sealedBody(outer.subarray(1, 6), 2, 'request')).toEqual(utf8('ab'));
  });
});

describe('X25519 client keys', () => {
  const le = (u: bigint) => {
    const bytes = new Uint8Array(32);
    for (let i = 0; i < 32; i++) bytes[i] = Number((u >> BigInt(8 * i)) & 0xffn);
    return bytes;
  };
  const p = 2n ** 255n - 19n;

  it('takes a canonical key of large order, up to p - 2', () => {
    expect(isAcceptableX25519Key(nacl.box.keyPair().publicKey)).toBe(true);
    expect(isAcceptableX25519Key(le(9n))).toBe(true);
    expect(isAcceptableX25519Key(le(p - 2n))).toBe(true);
    // A key whose lowest byte alone is large: every byte counts, the first one too.
    expect(isAcceptableX25519Key(le(0xffn))).toBe(true);
  });

  it('refuses p - 1 and the other small-order points, p and above, bit 255, and other lengths', () => {
    for (const u of [0n, 1n, p - 1n, p, p + 1n, 2n ** 255n - 1n]) expect(isAcceptableX25519Key(le(u)), String(u)).toBe(false);
    const high = le(9n);
    high[31] |= 0x80;
    expect(isAcceptableX25519Key(high)).toBe(false);
    for (const hex of ['e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800', '5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157']) {
      expect(isAcceptableX25519Key(Buffer.from(hex, 'hex'))).toBe(false);
    }
    expect(isAcceptableX25519Key(nacl.box.keyPair().publicKey.subarray(0, 31))).toBe(false);
    expect(isAcceptableX25519Key(new Uint8Array([...nacl.box.keyPair().publicKey, 0]))).toBe(false);
  });
});

describe('strict base64', () => {
  it.each([
    ['not a string', 42],
    ['a length not a multiple of 4', 'YWJ'],
    ['a character outside the alphabet', 'YW-j'],
    ['URL-safe base64', 'YW_j'],
    ['whitespace', 'YW j'],
    ['padding in the middle', 'YQ==YWJj'],
    ['three padding characters', 'YQ==='.padEnd(8, '=')],
  ])('refuses %s', (_name, value) => {
    expect(() => decodeBase64(value, 'field')).toThrow(new SealedFormatError('field is not base64'));
  });

  it('decodes standard base64, empty included, and checks the decoded length when asked', () => {
    expect(decodeBase64('', 'field')).toEqual(new Uint8Array());
    expect(decodeBase64('YWI=', 'field')).toEqual(new Uint8Array([0x61, 0x62]));
    expect(decodeBase64('+/+/', 'field', 3)).toEqual(new Uint8Array([0xfb, 0xff, 0xbf]));
    expect(() => decodeBase64('YWI=', 'field', 3)).toThrow(new SealedFormatError('field must be 3 bytes, got 2'));
  });
});

describe('sealed replies that open under the call\'s key but are not a reply', () => {
  const call = () => sealRequest(enclave.publicKey, request).replyKey;
  const NONCE_BYTES = new Uint8Array(24).fill(7);
  const NONCE = b64(NONCE_BYTES);
  /** A v3 reply's plaintext: the head line, then the body's bytes, then what follows (padding). */
  const reply = (fields: Record<string, unknown>, body = 'ab', after = '') => Buffer.concat([
    Buffer.from(`${JSON.stringify({ type: 'agent-service/sealed-reply/v3', request_nonce: NONCE, status: 200, headers: {}, body_bytes: Buffer.byteLength(body), ...fields })}\n`),
    Buffer.from(body),
    Buffer.from(after),
  ]);

  it.each([0, 23, 24, 39])('refuses an envelope of %i bytes as too short', (length) => {
    expect(() => openReply(new Uint8Array(length), call(), NONCE_BYTES))
      .toThrow(new SealedFormatError(`the sealed reply is ${length} bytes, shorter than a nonce (24) and a box (at least 16)`));
  });

  it('does not open a reply with junk after its box, cut short, or as JSON of the earlier envelope', () => {
    const replyKey = call();
    const good = boxedReply(reply({}), replyKey);
    expect(openReply(good, replyKey, NONCE_BYTES).body).toEqual(utf8('ab'));
    const OPEN = 'the sealed reply does not open with the enclave\'s box key: it was altered or not made by the enclave';
    expect(() => openReply(Buffer.concat([good, Buffer.from([0])]), replyKey, NONCE_BYTES)).toThrow(new SealedFormatError(OPEN));
    expect(() => openReply(good.subarray(0, good.length - 1), replyKey, NONCE_BYTES)).toThrow(new SealedFormatError(OPEN));
    expect(() => openReply(good.subarray(0, 40), replyKey, NONCE_BYTES)).toThrow(new SealedFormatError(OPEN));
    const json = utf8(JSON.stringify({ nonce: b64(good.subarray(0, 24)), ciphertext: b64(good.subarray(24)) }));
    expect(() => openReply(json, replyKey, NONCE_BYTES)).toThrow(new SealedFormatError(OPEN));
  });

  const NOT_V3 = 'the sealed reply is not an agent-service/sealed-reply/v3 reply (it has no head line)';
  it.each([
    ['one line with no newline', '{"type":', NOT_V3],
    ['of the format before the body went as bytes (JSON, the body in base64, padded with spaces)', `${JSON.stringify({ type: 'agent-service/sealed-reply/v2', request_nonce: NONCE, status: 200, headers: {}, body: 'YWI=' })}   `, NOT_V3],
    ['a head that is not JSON', '{"type":\nab', 'the sealed reply\'s head is not JSON'],
    ['an empty head line', '\n{}', 'the sealed reply\'s head is not JSON'],
    ['a head of JSON null', 'null\n', 'the sealed reply\'s head is not a JSON object'],
    ['a head that is not UTF-8', Buffer.concat([Buffer.from('{"type":"'), Buffer.from([0xff]), Buffer.from('"}\n')]), 'the sealed reply\'s head is not JSON'],
    ['a request\'s plaintext (reflected)', reply({ type: 'agent-service/sealed-request/v2', request_nonce: undefined }), 'the sealed reply\'s type is not agent-service/sealed-reply/v3'],
    ['of the format before replies were bound to their request', reply({ type: 'agent-service/sealed-reply/v1', request_nonce: undefined }), 'the sealed reply\'s type is not agent-service/sealed-reply/v3'],
    ['bound to no request', reply({ request_nonce: undefined }), 'the sealed reply answers another request (its request_nonce is not this request\'s): replayed or swapped on the way'],
    ['bound to another request', reply({ request_nonce: b64(new Uint8Array(24).fill(8)) }), 'the sealed reply answers another request (its request_nonce is not this request\'s): replayed or swapped on the way'],
    ['status 99', reply({ status: 99 }), 'the sealed reply has no valid status'],
    ['status 600', reply({ status: 600 }), 'the sealed reply has no valid status'],
    ['status 200.5', reply({ status: 200.5 }), 'the sealed reply has no valid status'],
    ['status "200"', reply({ status: '200' }), 'the sealed reply has no valid status'],
    ['no headers', reply({ headers: undefined }), 'the sealed reply\'s headers are not strings'],
    ['null headers', reply({ headers: null }), 'the sealed reply\'s headers are not strings'],
    ['headers a string', reply({ headers: 'a' }), 'the sealed reply\'s headers are not strings'],
    ['a header that is a number', reply({ headers: { a: 'b', n: 1 } }), 'the sealed reply\'s headers are not strings'],
    ['no body_bytes', reply({ body_bytes: undefined }), 'the sealed reply\'s body_bytes is not the length of a body it holds'],
    ['body_bytes "2"', reply({ body_bytes: '2' }), 'the sealed reply\'s body_bytes is not the length of a body it holds'],
    ['body_bytes 1.5', reply({ body_bytes: 1.5 }), 'the sealed reply\'s body_bytes is not the length of a body it holds'],
    ['body_bytes -1', reply({ body_bytes: -1 }), 'the sealed reply\'s body_bytes is not the length of a body it holds'],
    ['a body shorter than its body_bytes', reply({ body_bytes: 3 }), 'the sealed reply\'s body_bytes is not the length of a body it holds'],
    ['junk after its body', reply({}, 'ab', '\0\0x\0'), 'the sealed reply has bytes other than zeros after its body (at byte 4 after the head line)'],
    ['a body longer than its body_bytes', reply({ body_bytes: 1 }), 'the sealed reply has bytes other than zeros after its body (at byte 1 after the head line)'],
  ])('refuses a reply that is %s', (_name, text, message) => {
    const replyKey = call();
    expect(() => openReply(boxedReply(text, replyKey), replyKey, NONCE_BYTES)).toThrow(new SealedFormatError(message));
  });

  it('takes statuses at the edges of the range, and zero padding', () => {
    const replyKey = call();
    for (const status of [100, 599]) {
      expect(openReply(boxedReply(reply({ status, headers: { a: 'b' } }, 'ab', '\0\0\0'), replyKey), replyKey, NONCE_BYTES))
        .toEqual({ status, headers: { a: 'b' }, body: new Uint8Array([0x61, 0x62]) });
    }
    // A body holding newlines and the whole plaintext's end: the head ends at the first newline.
    const body = '{"a":\n"b"}\n';
    expect(openReply(boxedReply(reply({}, body), replyKey), replyKey, NONCE_BYTES).body).toEqual(new Uint8Array(Buffer.from(body)));
    expect(openReply(boxedReply(reply({}, ''), replyKey), replyKey, NONCE_BYTES).body).toEqual(new Uint8Array());
  });
});
