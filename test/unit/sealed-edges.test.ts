import nacl from 'tweetnacl';
import { describe, expect, it } from 'vitest';
import {
  decodeBase64, isAcceptableX25519Key, openReply, openRequest, paddedSize, sealReply, sealRequest, SealedFormatError,
} from '../../protocol/sealed.js';

/**
 * The edges of sealed envelopes (protocol/sealed.ts): replies that open under the call's key
 * but are not a reply, strict base64, the X25519 keys refused, and what makes two requests
 * count as one for replay. sealed-requests.test.ts holds the round trip and the host's moves.
 */
const enclave = nacl.box.keyPair();
const utf8 = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'));
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const request = { method: 'POST', target: '/v1/memory', body: utf8('{}'), timestamp: 1_731_000_000_000 };

/** A reply envelope whose plaintext is `text`, boxed with the call's key (what only the enclave could make). */
function boxedReply(text: string | Uint8Array, replyKey: Uint8Array) {
  const nonce = nacl.randomBytes(24);
  return { nonce: b64(nonce), ciphertext: b64(nacl.box.after(typeof text === 'string' ? utf8(text) : text, nonce, replyKey)) };
}

describe('sealed requests carry what the client set, and nothing it did not', () => {
  it('carries the known state inside the box, and leaves out empty optional fields', () => {
    const known = `5:${'cd'.repeat(32)}`;
    const tenantKey = new Uint8Array(32).fill(5);
    const opened = openRequest(sealRequest(enclave.publicKey, { ...request, knownState: known, tenantKey }).envelope, enclave.secretKey)!;
    expect(opened.plaintext).toMatchObject({ known_state: known, tenant_key: b64(tenantKey) });
    const bare = openRequest(sealRequest(enclave.publicKey, { ...request, authorization: '', organization: '', knownState: '' }).envelope, enclave.secretKey)!;
    expect(Object.keys(bare.plaintext as object).sort()).toEqual(['body', 'method', 'pad', 'target', 'timestamp', 'type']);
  });

  it('pads the plaintext to exactly its bucket: the box is the bucket plus the 16-byte MAC', () => {
    for (const size of [0, 900, 1500, 70_000]) {
      const { envelope } = sealRequest(enclave.publicKey, { ...request, body: new Uint8Array(size) });
      const boxed = Buffer.from(envelope.ciphertext, 'base64');
      const plain = nacl.box.open(boxed, Buffer.from(envelope.nonce, 'base64'), Buffer.from(envelope.client_public_key, 'base64'), enclave.secretKey)!;
      const bare = Buffer.byteLength(JSON.stringify({ ...JSON.parse(Buffer.from(plain).toString()), pad: '' }));
      expect(plain.length).toBe(paddedSize(bare));
      expect(boxed.length).toBe(plain.length + 16);
    }
    const { replyKey, envelope } = sealRequest(enclave.publicKey, request);
    // A reply: its head line and the body's bytes (1,500 + about 130), padded to 2 KiB.
    const reply = sealReply({ status: 200, headers: {}, body: new Uint8Array(1500) }, replyKey, Buffer.from(envelope.nonce, 'base64'));
    expect(Buffer.from(reply.ciphertext, 'base64').length).toBe(2048 + 16);
    expect(openReply(reply, replyKey, envelope.nonce).body).toEqual(new Uint8Array(1500));
    const full = sealReply({ status: 200, headers: {}, body: new Uint8Array(2000) }, replyKey, Buffer.from(envelope.nonce, 'base64'));
    expect(Buffer.from(full.ciphertext, 'base64').length).toBe(4096 + 16);
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
    const other = nacl.box.keyPair();
    const nonce = Buffer.from(a.nonce, 'base64');
    const sameNonce = { client_public_key: b64(other.publicKey), nonce: a.nonce, ciphertext: b64(nacl.box(utf8('{}'), nonce, enclave.publicKey, other.secretKey)) };
    expect(openRequest(sameNonce, enclave.secretKey)!.replayId).not.toBe(first.replayId);
    expect(openRequest(a, enclave.secretKey)!.replayId).toBe(first.replayId);
    expect(first.nonce).toEqual(new Uint8Array(nonce));
    expect(first.clientPublicKey).toEqual(client.publicKey);
  });

  it('opens a box that is not UTF-8 or not JSON to no plaintext (the route refuses it)', () => {
    const client = nacl.box.keyPair();
    const nonce = nacl.randomBytes(24);
    const envelope = (plain: Uint8Array) => ({ client_public_key: b64(client.publicKey), nonce: b64(nonce), ciphertext: b64(nacl.box(plain, nonce, enclave.publicKey, client.secretKey)) });
    const notUtf8 = openRequest(envelope(new Uint8Array([0x22, 0xff, 0x22])), enclave.secretKey)!;
    expect(notUtf8).toBeDefined();
    expect(notUtf8.plaintext).toBeUndefined();
    expect(openRequest(envelope(utf8('{"a":')), enclave.secretKey)!.plaintext).toBeUndefined();
    expect(openRequest(envelope(utf8('"\u00e9"')), enclave.secretKey)!.plaintext).toBe('\u00e9');
  });

  it('refuses a client key that is not a canonical X25519 key before any X25519', () => {
    const { envelope } = sealRequest(enclave.publicKey, request);
    expect(() => openRequest({ ...envelope, client_public_key: b64(Buffer.alloc(32)) }, enclave.secretKey))
      .toThrow(new SealedFormatError('client_public_key is not a canonical X25519 key of large order'));
    expect(() => openRequest({ ...envelope, nonce: b64(Buffer.alloc(23)) }, enclave.secretKey)).toThrow('nonce must be 24 bytes, got 23');
    expect(() => openRequest({ ...envelope, client_public_key: b64(Buffer.alloc(31)) }, enclave.secretKey)).toThrow('client_public_key must be 32 bytes, got 31');
    expect(() => openRequest({ ...envelope, ciphertext: 'not base64!' }, enclave.secretKey)).toThrow(new SealedFormatError('ciphertext is not base64'));
    expect(new SealedFormatError('x').name).toBe('SealedFormatError');
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
  const NONCE = b64(new Uint8Array(24).fill(7));
  /** A v3 reply's plaintext: the head line, then the body's bytes, then what follows (padding). */
  const reply = (fields: Record<string, unknown>, body = 'ab', after = '') => Buffer.concat([
    Buffer.from(`${JSON.stringify({ type: 'agent-service/sealed-reply/v3', request_nonce: NONCE, status: 200, headers: {}, body_bytes: Buffer.byteLength(body), ...fields })}\n`),
    Buffer.from(body),
    Buffer.from(after),
  ]);

  it.each([
    ['not an object', null, 'nonce is not base64'],
    ['a string', 'sealed', 'nonce is not base64'],
    ['with a short nonce', { nonce: b64(new Uint8Array(23)), ciphertext: '' }, 'nonce must be 24 bytes, got 23'],
    ['with no ciphertext', { nonce: b64(new Uint8Array(24)) }, 'ciphertext is not base64'],
  ])('refuses an envelope %s', (_name, envelope, message) => {
    expect(() => openReply(envelope, call(), NONCE)).toThrow(new SealedFormatError(message));
  });

  const NOT_V3 = 'the sealed reply is not an agent-service/sealed-reply/v3 reply (it has no head line)';
  it.each([
    ['one line with no newline', '{"type":', NOT_V3],
    ['of the format before the body went as bytes (JSON, the body in base64, padded with spaces)', `${JSON.stringify({ type: 'agent-service/sealed-reply/v2', request_nonce: NONCE, status: 200, headers: {}, body: 'YWI=' })}   `, NOT_V3],
    ['a head that is not JSON', '{"type":\nab', 'the sealed reply\'s head is not JSON'],
    ['an empty head line', '\n{}', 'the sealed reply\'s head is not JSON'],
    ['a head of JSON null', 'null\n', 'the sealed reply\'s type is not agent-service/sealed-reply/v3'],
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
  ])('refuses a reply that is %s', (_name, text, message) => {
    const replyKey = call();
    expect(() => openReply(boxedReply(text, replyKey), replyKey, NONCE)).toThrow(new SealedFormatError(message));
  });

  it('takes statuses at the edges of the range, and ignores the padding', () => {
    const replyKey = call();
    for (const status of [100, 599]) {
      expect(openReply(boxedReply(reply({ status, headers: { a: 'b' } }, 'ab', '\0\0\0'), replyKey), replyKey, NONCE))
        .toEqual({ status, headers: { a: 'b' }, body: new Uint8Array([0x61, 0x62]) });
    }
    // A body holding newlines and the whole plaintext's end: the head ends at the first newline.
    const body = '{"a":\n"b"}\n';
    expect(openReply(boxedReply(reply({}, body), replyKey), replyKey, NONCE).body).toEqual(new Uint8Array(Buffer.from(body)));
    expect(openReply(boxedReply(reply({}, ''), replyKey), replyKey, NONCE).body).toEqual(new Uint8Array());
  });
});
