import nacl from 'tweetnacl';
import { describe, expect, it } from 'vitest';
import {
  checkSignature, ed25519Verify, isAncestry, keyId, parseState, responseStatement, sha256Hex, signAnswer, signedFinalEvent,
  splitSignedStream, StateTracker, streamSignatureEvent, DEFAULT_MAX_SKEW_MS, type ResponseSignature, type SignedRequest,
} from '../../protocol/response-signature.js';

/**
 * The edges of signed answers (protocol/response-signature.ts): the statement's fields at
 * their limits, the checks a client makes in the order it makes them, the clock-skew bounds,
 * streams whose signature is not where or what it must be, and the rollback tracker's
 * saved form. response-signature.test.ts holds the round trips and the host's moves.
 */
const utf8 = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'));
const STATE = `7:${'ab'.repeat(32)}`;
const STORE = '5e'.repeat(16);
const EMPTY_SHA256 = sha256Hex(new Uint8Array());
const NOW = 1_731_000_000_000;
const request: SignedRequest = { method: 'POST', target: '/v1/memory', body: utf8('{}') };
const answer = { status: 200, bodySha256: sha256Hex(utf8('{"id":"mem_1"}')) };
const fields = { ...answer, timestamp: '1', state: STATE, store: STORE, shard: '0/1' };

function signer() {
  const keys = nacl.sign.keyPair();
  return { publicKey: keys.publicKey, sign: (m: Uint8Array) => nacl.sign.detached(m, keys.secretKey) };
}

describe('the statement at its limits', () => {
  it('names a key by a domain-separated SHA-256 of the whole header, and no key by nothing', () => {
    expect(keyId('Bearer x')).toBe('cbc7246e16770d9ecd36b8cc5f8c421a');
    expect(keyId('')).toBe('');
    expect(keyId(undefined)).toBe('');
  });

  it('takes statuses 100 to 599, whole numbers only', () => {
    for (const status of [100, 599]) expect(responseStatement(request, { ...fields, status })).toContain(`\nstatus ${status}\n`);
    for (const status of [99, 600, 200.5, Number.NaN]) expect(() => responseStatement(request, { ...fields, status })).toThrow(`not an HTTP status: ${status}`);
  });

  it('takes methods of 1 to 16 capitals and timestamps of 1 to 16 digits', () => {
    expect(responseStatement({ ...request, method: 'A'.repeat(16) }, fields)).toContain(`method ${'A'.repeat(16)}`);
    expect(() => responseStatement({ ...request, method: 'A'.repeat(17) }, fields)).toThrow(`not an HTTP method: "${'A'.repeat(17)}"`);
    expect(() => responseStatement({ ...request, method: '' }, fields)).toThrow('not an HTTP method: ""');
    expect(() => responseStatement({ ...request, method: 'xPOST' }, fields)).toThrow(/not an HTTP method/);
    expect(() => responseStatement({ ...request, method: 'POSTx' }, fields)).toThrow(/not an HTTP method/);
    expect(responseStatement(request, { ...fields, timestamp: '9'.repeat(16) })).toContain(`timestamp ${'9'.repeat(16)}`);
    expect(() => responseStatement(request, { ...fields, timestamp: '9'.repeat(17) })).toThrow(`not a timestamp in milliseconds: "${'9'.repeat(17)}"`);
    expect(() => responseStatement(request, { ...fields, timestamp: '' })).toThrow(/not a timestamp/);
    expect(() => responseStatement(request, { ...fields, timestamp: 'x1' })).toThrow(/not a timestamp/);
    expect(() => responseStatement(request, { ...fields, timestamp: '1x' })).toThrow(/not a timestamp/);
  });

  it('takes only 64 lowercase hex digits as the body hash, and only 32 as the store', () => {
    for (const bodySha256 of [`x${EMPTY_SHA256}`, `${EMPTY_SHA256}x`, EMPTY_SHA256.toUpperCase(), EMPTY_SHA256.slice(1)]) {
      expect(() => responseStatement(request, { ...fields, bodySha256 })).toThrow('response body hash must be 64 lowercase hex digits');
    }
    for (const store of [`x${STORE}`, `${STORE}x`, STORE.slice(1), STORE.toUpperCase()]) {
      expect(() => responseStatement(request, { ...fields, store })).toThrow(`not a store id: ${JSON.stringify(store)}`);
    }
  });

  it('reads a state head of up to 15 digits and 64 lowercase hex, and nothing around it', () => {
    const hash = 'ab'.repeat(32);
    expect(parseState(`${'9'.repeat(15)}:${hash}`)).toEqual({ seq: 999_999_999_999_999, hash });
    expect(parseState(`0:${hash}`)).toEqual({ seq: 0, hash });
    for (const text of [`${'9'.repeat(16)}:${hash}`, `:${hash}`, `7:${hash}x`, `x7:${hash}`, `7:${hash.toUpperCase()}`, `7:${hash.slice(1)}`, '', undefined]) {
      expect(parseState(text), String(text)).toBeUndefined();
    }
  });

  it('refuses a known state or ancestry or upstream that is not one, naming it', () => {
    expect(() => responseStatement({ ...request, knownState: '5:ab' }, fields)).toThrow('not known state heads: "5:ab"');
    expect(() => responseStatement(request, { ...fields, ancestor: 'maybe' as never })).toThrow('not an ancestry: "maybe"');
    expect(() => responseStatement(request, { ...fields, upstream: 'ftp://x' })).toThrow('not an upstream: "ftp://x"');
    expect(responseStatement(request, { ...fields, upstream: 'local' })).toContain('\nupstream "local"\n');
    expect(responseStatement(request, { ...fields, ancestor: 'unknown' })).toMatch(/\nancestor unknown$/);
    expect(responseStatement({ ...request, knownState: '' }, fields)).toContain('\nknown-state \n');
    expect(['yes', 'no', 'unknown', '', 'Yes', undefined].map(isAncestry)).toEqual([true, true, true, false, false, false]);
  });
});

describe('signing', () => {
  it('stamps the whole millisecond, and adds the optional headers only when they have a value', () => {
    const { sign } = signer();
    const plain = signAnswer(sign, request, { ...answer, state: STATE, store: STORE, shard: '0/1', ancestor: undefined, tenant: '', upstream: '' }, NOW + 0.9);
    expect(plain.timestamp).toBe(String(NOW));
    expect(Object.keys(plain).sort()).toEqual(['shard', 'signature', 'state', 'store', 'timestamp']);
    const full = signAnswer(sign, request, { ...answer, state: STATE, store: STORE, shard: '0/1', ancestor: 'yes', tenant: 't1', upstream: 'local' }, NOW);
    expect(full).toMatchObject({ ancestor: 'yes', tenant: 't1', upstream: 'local' });
  });

  it('encodes exactly the signature\'s bytes, from a view into a larger buffer', () => {
    const { sign, publicKey } = signer();
    const viewed = (m: Uint8Array) => {
      const under = new Uint8Array(80);
      under.set(sign(m), 8);
      return under.subarray(8, 72);
    };
    const signature = signAnswer(viewed, request, { ...answer, state: STATE, store: STORE, shard: '0/1' }, NOW);
    expect(Buffer.from(signature.signature, 'base64')).toHaveLength(64);
    expect(checkSignature(publicKey, request, answer, signature, { now: NOW }).ok).toBe(true);
  });
});

describe('checking, in order', () => {
  const { sign, publicKey } = signer();
  const signed = () => signAnswer(sign, request, { ...answer, state: STATE, store: STORE, shard: '0/1' }, NOW);
  const check = (signature: Partial<ResponseSignature>, options: { now?: number; maxSkewMs?: number } = { now: NOW }, key = publicKey) =>
    checkSignature(key, request, answer, signature, options);

  it('refuses a timestamp that is not 1 to 16 digits, and a store that is not an id, before the signature', () => {
    expect(check({ ...signed(), timestamp: '1.5' })).toEqual({ ok: false, reason: 'the reply\'s x-tee-timestamp header is missing or not unix milliseconds' });
    expect(check({ ...signed(), timestamp: '9'.repeat(17) })).toEqual({ ok: false, reason: 'the reply\'s x-tee-timestamp header is missing or not unix milliseconds' });
    expect(check({ ...signed(), timestamp: '' })).toEqual({ ok: false, reason: 'the reply\'s x-tee-timestamp header is missing or not unix milliseconds' });
    expect(check({ ...signed(), store: 'x' })).toEqual({ ok: false, reason: 'the reply\'s x-tee-store header is missing or not a store id' });
    expect(check({ ...signed(), store: '' })).toEqual({ ok: false, reason: 'the reply\'s x-tee-store header is missing or not a store id' });
    expect(check({ ...signed(), state: '7:ab' })).toEqual({ ok: false, reason: 'the reply\'s x-tee-state header is missing or not <seq>:<sha256 hex>' });
    expect(check({ ...signed(), ancestor: '' as never })).toMatchObject({ ok: true });
  });

  it('refuses a signature that is not exactly 64 bytes in canonical base64', () => {
    const signature = signed();
    const reason = 'x-tee-signature is not a base64 Ed25519 signature';
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const respelled = `${signature.signature.slice(0, -3)}${alphabet[alphabet.indexOf(signature.signature.at(-3)!) ^ 1]}==`;
    expect(Buffer.from(respelled, 'base64')).toEqual(Buffer.from(signature.signature, 'base64'));
    expect(check({ ...signature, signature: respelled })).toEqual({ ok: false, reason });
    expect(check({ ...signature, signature: Buffer.alloc(63).toString('base64') })).toEqual({ ok: false, reason });
    expect(check({ ...signature, signature: Buffer.alloc(65).toString('base64') })).toEqual({ ok: false, reason });
  });

  it('refuses an ancestry that is not yes, no or unknown, before the signature', () => {
    expect(check({ ...signed(), ancestor: 'perhaps' as never })).toEqual({ ok: false, reason: 'the reply\'s x-tee-ancestor header is not yes, no or unknown' });
  });

  it('says which request and answer a signature failed for', () => {
    expect(checkSignature(publicKey, request, { ...answer, status: 201 }, signed(), { now: NOW })).toEqual({
      ok: false,
      reason: `x-tee-signature does not verify with the enclave's key for POST /v1/memory (status 201, response body sha256 ${answer.bodySha256}): ` +
        'the status or body was altered, or the reply belongs to another request (another target, body, organization, API key or known state)',
    });
  });

  it('refuses, without throwing, values the statement has no place for', () => {
    expect(checkSignature(publicKey, { ...request, method: 'get' }, answer, signed(), { now: NOW })).toEqual({ ok: false, reason: 'not an HTTP method: "get"' });
    expect(check({ ...signed(), upstream: 'x\ny' })).toEqual({ ok: false, reason: 'not an upstream: "x\\ny"' });
    // A long one is named by its first 200 characters only.
    expect(check({ ...signed(), upstream: 'u'.repeat(300) })).toEqual({ ok: false, reason: `not an upstream: "${'u'.repeat(200)}"` });
  });

  it('does not verify with a key that is not 32 bytes, nor with a key it verified with before', () => {
    const signature = signed();
    expect(check(signature, { now: NOW }, publicKey.subarray(0, 31))).toMatchObject({ ok: false, reason: /does not verify with the enclave's key for POST \/v1\/memory/ });
    expect(ed25519Verify(new Uint8Array(33), utf8('m'), new Uint8Array(64))).toBe(false);
    const other = signer();
    const theirs = signAnswer(other.sign, request, { ...answer, state: STATE, store: STORE, shard: '0/1' }, NOW);
    // Alternating keys: each check uses its own key, never the one it last verified with.
    expect(check(signature).ok).toBe(true);
    expect(check(theirs, { now: NOW }, other.publicKey).ok).toBe(true);
    expect(check(signature, { now: NOW }, other.publicKey).ok).toBe(false);
    expect(check(theirs).ok).toBe(false);
    expect(check(signature).ok).toBe(true);
  });

  it('accepts a signature exactly at the allowed skew either way, and refuses one a millisecond past it', () => {
    const signature = signed();
    expect(check(signature, { now: NOW + DEFAULT_MAX_SKEW_MS }).ok).toBe(true);
    expect(check(signature, { now: NOW - DEFAULT_MAX_SKEW_MS }).ok).toBe(true);
    expect(check(signature, { now: NOW - DEFAULT_MAX_SKEW_MS - 1 })).toEqual({
      ok: false,
      reason: `the signature is from ${new Date(NOW).toISOString()}, more than 300000 ms from now (${new Date(NOW - DEFAULT_MAX_SKEW_MS - 1).toISOString()}): a replayed or stale reply`,
    });
    expect(check(signature, { now: NOW + 1000, maxSkewMs: 1000 }).ok).toBe(true);
    expect(check(signature, { now: NOW + 1001, maxSkewMs: 1000 }).ok).toBe(false);
    expect(DEFAULT_MAX_SKEW_MS).toBe(300_000);
  });

  it('reports the ancestry only when there is one, and the tenant and upstream always', () => {
    const known = `0/5:${'cd'.repeat(32)}`;
    const withKnown = { ...request, knownState: known };
    const yes = signAnswer(sign, withKnown, { ...answer, state: STATE, store: STORE, shard: '0/1', ancestor: 'yes', tenant: 't', upstream: 'local' }, NOW);
    expect(checkSignature(publicKey, withKnown, answer, yes, { now: NOW })).toStrictEqual({
      ok: true, signedAt: new Date(NOW), state: { seq: 7, hash: 'ab'.repeat(32) }, store: STORE, shard: { index: 0, count: 1 }, ancestor: 'yes', tenant: 't', upstream: 'local',
    });
    expect(Object.keys(check(signed()))).not.toContain('ancestor');
  });
});

describe('a stream\'s signature', () => {
  const signature: ResponseSignature = { signature: 'c2ln', timestamp: '1', state: STATE, store: STORE, shard: '0/1' };
  const event = streamSignatureEvent(signature);

  it('carries ancestor, tenant and upstream in the event only when they are set', () => {
    expect(streamSignatureEvent({ ...signature, ancestor: 'no', tenant: 't', upstream: 'local' }))
      .toBe(`data: {"object":"chat.completion.chunk","type":"tee.signature","choices":[],"tee_signature":{"signature":"c2ln","timestamp":"1","state":"${STATE}","store":"${STORE}","shard":"0/1","ancestor":"no","tenant":"t","upstream":"local"}}\n\n`);
    const split = splitSignedStream(utf8(`data: {"a":1}\n\n${streamSignatureEvent({ ...signature, ancestor: 'no', tenant: 't', upstream: 'local' })}`));
    expect(split?.signature).toStrictEqual({ ...signature, ancestor: 'no', tenant: 't', upstream: 'local' });
    expect(splitSignedStream(utf8(event))?.signature).toStrictEqual(signature);
  });

  it('is found only as the last event, whole, on one line', () => {
    // A body ending with "\n" but not "\n\n" before the event.
    expect(splitSignedStream(utf8(`data: {"a":1}\n${event}`))).toBeUndefined();
    // The event cut, or a line break inside it.
    expect(splitSignedStream(utf8(event.slice(0, -1)))).toBeUndefined();
    expect(splitSignedStream(utf8(event.replace('"choices":[],', '"choices":[],\n')))).toBeUndefined();
    // Two other bytes in place of the blank line that ends it.
    expect(splitSignedStream(utf8(`${event.slice(0, -2)}xy`))).toBeUndefined();
    // Its JSON broken.
    expect(splitSignedStream(utf8(event.replace(/\}\}\n\n$/, '}\n\n')))).toBeUndefined();
    // [DONE] after it is fine; anything else after it is not.
    expect(splitSignedStream(utf8(`${event}data: [DONE]\n\n`))?.body).toEqual(new Uint8Array());
    expect(splitSignedStream(utf8(`${event}data: [DONE]\n\ndata: [DONE]\n\n`))).toBeUndefined();
  });

  it.each([
    ['no signature', { timestamp: '1', state: STATE, store: STORE, shard: '0/1' }],
    ['a numeric timestamp', { signature: 'c2ln', timestamp: 1, state: STATE, store: STORE, shard: '0/1' }],
    ['no state', { signature: 'c2ln', timestamp: '1', store: STORE, shard: '0/1' }],
    ['no store', { signature: 'c2ln', timestamp: '1', state: STATE }],
    ['a numeric tenant', { ...signature, tenant: 1 }],
    ['a numeric upstream', { ...signature, upstream: 1 }],
    ['an ancestry that is not one', { ...signature, ancestor: 'maybe' }],
  ])('is refused with %s, as a separate event or inside the final one', (_name, fields) => {
    const separate = `data: ${JSON.stringify({ object: 'chat.completion.chunk', type: 'tee.signature', choices: [], tee_signature: fields })}\n\n`;
    expect(splitSignedStream(utf8(`data: {"a":1}\n\n${separate}`))).toBeUndefined();
    const embedded = `data: {"type":"response.completed","tee_signature":${JSON.stringify(fields)}}\n\n`;
    expect(splitSignedStream(utf8(`data: {"a":1}\n\n${embedded}`))).toBeUndefined();
  });

  it('is refused as a separate event with no tee_signature, or with JSON null', () => {
    expect(splitSignedStream(utf8('data: {"object":"chat.completion.chunk","type":"tee.signature","choices":[]}\n\n'))).toBeUndefined();
    expect(splitSignedStream(utf8('data: {"object":"chat.completion.chunk","type":"tee.signature","choices":[],"tee_signature":null}\n\n'))).toBeUndefined();
  });

  it('inside the final event: found in the only event, and refused when the event or its member is not as signedFinalEvent writes it', () => {
    const final = signedFinalEvent('{"type":"response.completed"}', signature);
    expect(final).toBe(`data: {"type":"response.completed","tee_signature":{"signature":"c2ln","timestamp":"1","state":"${STATE}","store":"${STORE}","shard":"0/1"}}\n\n`);
    expect(splitSignedStream(utf8(final))).toEqual({ body: utf8('data: {"type":"response.completed"}\n\n'), signature });
    // After a body of a bare blank line, too.
    expect(splitSignedStream(utf8(`\n\n${final}`))).toEqual({ body: utf8('\n\ndata: {"type":"response.completed"}\n\n'), signature });
    const body = 'data: {"a":1}\n\n';
    expect(splitSignedStream(utf8(`${body}${final}`))).toEqual({ body: utf8(`${body}data: {"type":"response.completed"}\n\n`), signature });
    // A byte before the only event (no blank line between).
    expect(splitSignedStream(utf8(`X${final}`))).toBeUndefined();
    // Not an event, or an event with no signature member.
    expect(splitSignedStream(utf8(final.replace(/^data: /, 'event: ')))).toBeUndefined();
    expect(splitSignedStream(utf8(`${body}${final.replace(/^data: /, 'event: ')}`))).toBeUndefined();
    expect(splitSignedStream(utf8(`${body}data: {"type":"response.completed"}\n\n`))).toBeUndefined();
    expect(splitSignedStream(utf8(`${body}data: {"type":"x"}`))).toBeUndefined();
    // A line break inside the event, broken JSON in the member, or the member respaced.
    expect(splitSignedStream(utf8(`${body}${final.replace('{"type"', '{\n"type"')}`))).toBeUndefined();
    expect(splitSignedStream(utf8(`${body}${final.replace('"signature":"c2ln"', '"signature":"c2ln"]')}`))).toBeUndefined();
    expect(splitSignedStream(utf8(`${body}${final.replace('"timestamp":"1"', '"timestamp": "1"')}`))).toBeUndefined();
    expect(() => signedFinalEvent('{}', signature)).toThrow('a final event must be a non-empty JSON object');
    expect(() => signedFinalEvent('[1]', signature)).toThrow('a final event must be a non-empty JSON object');
    expect(() => signedFinalEvent('{"a":1', signature)).toThrow('a final event must be a non-empty JSON object');
    expect(() => signedFinalEvent('"a":1}', signature)).toThrow('a final event must be a non-empty JSON object');
  });

  it('a last event the host made with no JSON object before the signature member is no signature, not an exception', () => {
    const member = `,"tee_signature":${JSON.stringify(signature)}}\n\n`;
    for (const before of ['', '{', 'x', '[1]']) {
      expect(splitSignedStream(utf8(`data: ${before}${member}`)), JSON.stringify(before)).toBeUndefined();
      expect(splitSignedStream(utf8(`data: {"a":1}\n\ndata: ${before}${member}`)), JSON.stringify(before)).toBeUndefined();
    }
  });

  it('keeps every byte of the body, whatever its encoding', () => {
    const body = Buffer.from('data: {"t":"h\u00e9\u2713"}\n\n', 'utf8');
    const split = splitSignedStream(new Uint8Array(Buffer.concat([body, Buffer.from(event)])));
    expect(Buffer.from(split!.body)).toEqual(body);
    const final = signedFinalEvent('{"t":"\u00e9"}', signature);
    const embedded = splitSignedStream(new Uint8Array(Buffer.concat([body, Buffer.from(final, 'utf8')])));
    expect(Buffer.from(embedded!.body)).toEqual(Buffer.concat([body, Buffer.from('data: {"t":"\u00e9"}\n\n', 'utf8')]));
  });
});

describe('the rollback tracker', () => {
  const A = 'a1'.repeat(16);
  const B = 'b2'.repeat(16);
  const head = (seq: number, fill = 'ab') => ({ seq, hash: fill.repeat(32) });

  it('restores from JSON text or the object, with or without a store, and refuses anything else', () => {
    expect(StateTracker.from(JSON.stringify({ v: 1, newest: { store: A, ...head(3) } })).current).toEqual({ store: A, ...head(3) });
    expect(StateTracker.from({ v: 1, newest: head(3) }).current).toStrictEqual(head(3));
    expect(StateTracker.from({ v: 1, newest: head(3) }).toJSON()).toStrictEqual({ v: 2, heads: { 0: head(3) } });
    for (const bad of ['null', '{}', '{"v":"1"}', '{"v":2}']) expect(() => StateTracker.from(bad), bad).toThrow(new TypeError('not a saved StateTracker (v 1 or 2)'));
    expect(() => StateTracker.from({ v: 2, shards: 4, heads: { 4: head(3) } })).toThrow(/invalid shard/);
    expect(() => StateTracker.from({ v: 2, shards: 65, heads: {} })).toThrow(/invalid shard count/);
    expect(() => StateTracker.from({ v: 1, newest: { seq: -1, hash: 'ab'.repeat(32) } })).toThrow(new TypeError('a saved StateTracker holds an invalid head'));
    expect(() => StateTracker.from({ v: 1, newest: { store: A, seq: 1, hash: 'x' } })).toThrow(/invalid head/);
  });

  it('keeps its own copy of the head it starts from', () => {
    const start = { store: A, ...head(3) };
    const tracker = new StateTracker(start);
    start.seq = 9;
    expect(tracker.floor()).toEqual(new Map([[0, { store: A, ...head(3) }]]));
  });

  it('with no floor, moves to a newer head or another store, and keeps its head for an older or equal one', () => {
    const tracker = new StateTracker({ store: A, ...head(5) });
    expect(tracker.observe({ state: head(4), store: A }, undefined)).toBeUndefined();
    expect(tracker.current).toEqual({ store: A, ...head(5) });
    expect(tracker.observe({ state: head(5, 'cd'), store: A }, undefined)).toBeUndefined();
    expect(tracker.current).toEqual({ store: A, ...head(5) });
    expect(tracker.observe({ state: head(6, 'cd'), store: A }, undefined)).toBeUndefined();
    expect(tracker.current).toEqual({ store: A, ...head(6, 'cd') });
    // An answer judged against no floor (a request sent before any head was seen) from another
    // store than one seen since is refused, and the tracker stays with the store it follows.
    expect(tracker.observe({ state: head(1), store: B }, undefined)).toMatch(/comes from store .* but this client has seen store/);
    expect(tracker.current).toEqual({ store: A, ...head(6, 'cd') });
  });

  it('a head saved without a store takes a store only from the same head', () => {
    const tracker = new StateTracker(head(5));
    tracker.observe({ state: head(5, 'cd'), store: A }, undefined);
    expect(tracker.current).toStrictEqual(head(5));
    tracker.observe({ state: head(4), store: A }, undefined);
    expect(tracker.current).toStrictEqual(head(5));
    tracker.observe({ state: head(5), store: A }, undefined);
    expect(tracker.current).toStrictEqual({ store: A, ...head(5) });
  });

  it('against a floor with no store, judges by the head alone', () => {
    const tracker = new StateTracker(head(5));
    expect(tracker.observe({ state: head(7), store: B, ancestor: 'yes' }, tracker.floor())).toBeUndefined();
    expect(tracker.current).toEqual({ store: B, ...head(7) });
  });

  it('names the heads it refuses by seq and the first 16 hex digits of their hash', () => {
    const tracker = new StateTracker({ store: A, ...head(5) });
    expect(tracker.observe({ state: head(9, 'cd'), store: A, ancestor: 'no' }, tracker.floor())).toBe(
      `the answer comes from state 9:${'cd'.repeat(8)}…, which does not descend from state 5:${'ab'.repeat(8)}… this client has seen ` +
      '(the enclave says that head is not on its chain): the host may be serving an older copy of the store that later writes have moved past (a fork)',
    );
    expect(tracker.observe({ state: head(9, 'cd'), store: A, ancestor: 'unknown' }, tracker.floor())).toBe(
      `the answer comes from state 9:${'cd'.repeat(8)}…, and the enclave cannot tell whether it descends from state 5:${'ab'.repeat(8)}… this client has seen`,
    );
    expect(tracker.observe({ state: head(9, 'cd'), store: A }, tracker.floor())).toMatch(/and the enclave did not say whether/);
    // Another hash at the seq seen is a fork whatever the enclave says; a newer seq with the same hash is still a newer head.
    expect(tracker.observe({ state: head(5, 'cd'), store: A, ancestor: 'yes' }, tracker.floor())).toMatch(/^the answer comes from a state 5 whose hash differs from the one this client has seen: .*\(a fork\)$/);
    expect(tracker.observe({ state: head(9), store: A }, tracker.floor())).toMatch(/did not say/);
    // The same head needs no word from the enclave; a newer one does.
    expect(tracker.observe({ state: head(5), store: A }, tracker.floor())).toBeUndefined();
    expect(tracker.observe({ state: head(5), store: A, ancestor: 'unknown' }, tracker.floor())).toBeUndefined();
  });
});
