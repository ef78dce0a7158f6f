import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import nacl from 'tweetnacl';
import { repoRoot } from '../../common/paths.js';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../common/errors.js';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import { ReplayGuard } from '../../enclave/api/replay-guard.js';
import { resolveCall, type RouteCall } from '../../enclave/api/resolve-call.js';
import { sealedRoute } from '../../enclave/api/sealed-route.js';
import { KeyRing, keyAuthorizer, openAuthorizer } from '../../enclave/auth/authorizer.js';
import type { Caller } from '../../enclave/auth/caller.js';
import { hashApiKey } from '../../enclave/auth/keys-file.js';
import { generateSealedRequestKey } from '../../enclave/keys.js';
import { SharedKeyCache, uniqueNonce } from '../../protocol/box.js';
import {
  ClientSealingKey, openReply, openRequest, paddedSize, sealedBody, sealReply, sealRequest, SEALED_MAX_AGE_MS, SEALING_KEY_LIFETIME_MS, SealedFormatError,
} from '../../protocol/sealed.js';
import { encodeUserData, parseUserData } from '../../protocol/user-data.js';

const utf8 = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'));
/** POST /v1/sealed as the enclave's router hands it to the route: resolved and validated. */
const sealedCall = async (request: Omit<ApiRequest, 'method' | 'target' | 'known_state'> & { known_state?: string }) =>
  resolveCall({ known_state: '', ...request, method: 'POST', target: '/v1/sealed' }, openAuthorizer.identify(request.authorization)).call as RouteCall<'Sealed'>;
const enclave = nacl.box.keyPair();
const inner = {
  method: 'POST',
  target: '/v1/memory',
  body: utf8('{"tenant_id":"t1","content":"secret"}'),
  authorization: 'Bearer k',
  organization: 'org-1',
  timestamp: 1_731_000_000_000,
};

/** A copy of `bytes` with one bit flipped at `index`. */
function flip(bytes: Uint8Array, index: number): Buffer {
  const copy = Buffer.from(bytes);
  copy[index] ^= 0x01;
  return copy;
}
/** Where each part of a request envelope starts: key ‖ nonce ‖ box. */
const AT = { key: 3, nonce: 32 + 3, box: 56 + 20 } as const;
/** The head line and body of an opened request. */
const headAndBody = (opened: { head: Record<string, unknown>; rest: Uint8Array }) => ({ head: opened.head, body: sealedBody(opened.rest, opened.head.body_bytes, 'request') });

describe('sealed envelopes (protocol/sealed.ts)', () => {
  it('keeps tweetnacl\'s wire format: libsodium seals what nacl.box opens, and opens what nacl.box seals', () => {
    const { envelope, replyKey } = sealRequest(enclave.publicKey, inner);
    const client = envelope.subarray(0, 32);
    const opened = nacl.box.open(envelope.subarray(56), envelope.subarray(32, 56), client, enclave.secretKey)!;
    const headLine = Buffer.from(opened.subarray(0, opened.indexOf(0x0a))).toString('utf8');
    expect(JSON.parse(headLine)).toMatchObject({ target: '/v1/memory', organization: 'org-1' });
    expect(replyKey).toEqual(nacl.box.before(client, enclave.secretKey));
    const tweetnaclClient = nacl.box.keyPair();
    const nonce = nacl.randomBytes(24);
    const boxedByNacl = nacl.box(Buffer.from('{"type":"agent-service/sealed-request/v2"}\nab'), nonce, enclave.publicKey, tweetnaclClient.secretKey);
    const byNacl = openRequest(Buffer.concat([tweetnaclClient.publicKey, nonce, boxedByNacl]), enclave.secretKey)!;
    expect(byNacl.head).toEqual({ type: 'agent-service/sealed-request/v2' });
    expect(Buffer.from(byNacl.rest).toString()).toBe('ab');
  });

  it('round-trip: the enclave opens what the client sealed, the client opens the sealed reply', () => {
    const { envelope, nonce, replyKey } = sealRequest(enclave.publicKey, inner);
    expect(envelope.includes('secret')).toBe(false);
    const opened = openRequest(envelope, enclave.secretKey)!;
    expect(headAndBody(opened)).toEqual({
      head: {
        type: 'agent-service/sealed-request/v2',
        method: 'POST',
        target: '/v1/memory',
        authorization: 'Bearer k',
        organization: 'org-1',
        timestamp: inner.timestamp,
        body_bytes: inner.body.length,
      },
      body: inner.body,
    });
    const reply = { status: 201, headers: { 'x-tee-signature': 'sig' }, body: utf8('{"id":"mem_1"}') };
    expect(opened.sharedKey).toEqual(replyKey);
    const sealed = sealReply(reply, opened.sharedKey, opened.nonce);
    expect(sealed.includes('mem_1')).toBe(false);
    expect(openReply(sealed, replyKey, nonce)).toEqual(reply);
  });

  it('uses a fresh client key and nonce for every request', () => {
    const a = sealRequest(enclave.publicKey, inner).envelope;
    const b = sealRequest(enclave.publicKey, inner).envelope;
    expect(a.subarray(0, 32)).not.toEqual(b.subarray(0, 32));
    expect(a.subarray(32, 56)).not.toEqual(b.subarray(32, 56));
    expect(openRequest(a, enclave.secretKey)!.replayId).not.toBe(openRequest(b, enclave.secretKey)!.replayId);
  });

  it.each(['key', 'nonce', 'box'] as const)('does not open with one bit of the %s changed', (part) => {
    const { envelope } = sealRequest(enclave.publicKey, inner);
    expect(openRequest(flip(envelope, AT[part]), enclave.secretKey)).toBeUndefined();
  });

  it('does not open for another enclave key', () => {
    const { envelope } = sealRequest(nacl.box.keyPair().publicKey, inner);
    expect(openRequest(envelope, enclave.secretKey)).toBeUndefined();
  });

  it('a reply opens only for the request that it answers, and a request cannot be reflected as its reply', () => {
    const first = sealRequest(enclave.publicKey, inner);
    const second = sealRequest(enclave.publicKey, inner);
    const opened = openRequest(first.envelope, enclave.secretKey)!;
    const sealed = sealReply({ status: 200, headers: {}, body: utf8('{}') }, opened.sharedKey, opened.nonce);
    expect(() => openReply(sealed, second.replyKey, second.nonce)).toThrow(/does not open/);
    expect(() => openReply(flip(sealed, 24 + 20), first.replyKey, first.nonce)).toThrow(SealedFormatError);
    expect(() => openReply(flip(sealed, 3), first.replyKey, first.nonce)).toThrow(/does not open/);
    // Both directions share one box key and one plaintext shape: the type tag tells a request
    // from a reply. The request's box, with its nonce in front, is what a host would reflect.
    const reflected = first.envelope.subarray(32);
    expect(() => openReply(reflected, first.replyKey, first.nonce)).toThrow(new SealedFormatError('the sealed reply\'s type is not agent-service/sealed-reply/v3'));
    expect(() => openReply(new Uint8Array(39), first.replyKey, first.nonce)).toThrow(/shorter than a nonce/);
  });

  it('a client seals with one key pair for SEALING_KEY_LIFETIME_MS, then a new one; the enclave opens both from its cache', () => {
    let now = 1_000_000;
    const sealing = new ClientSealingKey(enclave.publicKey, SEALING_KEY_LIFETIME_MS, () => now);
    const cache = new SharedKeyCache(enclave.secretKey);
    const a = sealing.seal(inner);
    now += SEALING_KEY_LIFETIME_MS - 1;
    const b = sealing.seal(inner);
    now += 1;
    const c = sealing.seal(inner);
    expect(b.envelope.subarray(0, 32)).toEqual(a.envelope.subarray(0, 32));
    expect(c.envelope.subarray(0, 32)).not.toEqual(a.envelope.subarray(0, 32));
    expect(new Set([a, b, c].map((s) => Buffer.from(s.nonce).toString('hex'))).size).toBe(3);
    for (const { envelope, replyKey } of [a, b, c]) {
      const opened = openRequest(envelope, cache)!;
      expect(opened.head).toMatchObject({ target: '/v1/memory' });
      expect(opened.sharedKey).toEqual(replyKey);
    }
    expect(cache.size).toBe(2);
    // Each request of the window has its own replay id.
    expect(openRequest(a.envelope, cache)!.replayId).not.toBe(openRequest(b.envelope, cache)!.replayId);
  });

  it('under one client key pair, a reply to one request does not pass as the reply to another (nor an old one as a new one)', () => {
    const sealing = new ClientSealingKey(enclave.publicKey);
    const first = sealing.seal(inner);
    const second = sealing.seal(inner);
    const opened = openRequest(first.envelope, enclave.secretKey)!;
    const sealed = sealReply({ status: 200, headers: {}, body: utf8('{}') }, opened.sharedKey, opened.nonce);
    expect(openReply(sealed, first.replyKey, first.nonce).status).toBe(200);
    // The same key opens it: only the request nonce inside tells the two calls apart.
    expect(() => openReply(sealed, second.replyKey, second.nonce)).toThrow(/answers another request/);
  });

  it('the enclave\'s cache of shared keys is bounded: the least recently used client goes first', () => {
    const cache = new SharedKeyCache(enclave.secretKey, 2);
    const [k1, k2, k3] = [1, 2, 3].map(() => nacl.box.keyPair().publicKey);
    const first = cache.get(k1);
    expect(first).toEqual(nacl.box.before(k1, enclave.secretKey));
    cache.get(k2);
    expect(cache.get(k1)).toBe(first); // a hit, and k1 is now the most recent
    cache.get(k3); // evicts k2
    expect(cache.size).toBe(2);
    expect(cache.get(k1)).toBe(first);
    expect(cache.get(k2)).not.toBe(undefined);
    expect(cache.size).toBe(2);
  });
});

describe('nonces (protocol/box.ts uniqueNonce)', () => {
  it('never repeat in a process, and another process\'s differ in their random part', () => {
    const seen = new Set<string>();
    const nonces = Array.from({ length: 20_000 }, () => Buffer.from(uniqueNonce()).toString('hex'));
    for (const nonce of nonces) seen.add(nonce);
    expect(seen.size).toBe(nonces.length);
    expect(nonces.every((n) => n.length === 48)).toBe(true);
    // Another process (a second enclave holding the same box key, a client started again).
    const script = `import('${pathToFileURL(join(repoRoot, 'dist/protocol/box.js')).href}').then((m) => console.log(Buffer.from(m.uniqueNonce()).toString('hex')))`;
    const other = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }).trim();
    expect(other).toMatch(/^[0-9a-f]{48}$/);
    expect(other.slice(0, 32)).not.toBe(nonces[0].slice(0, 32));
    expect(other.slice(32)).toBe('0'.repeat(16));
  });
});

describe('ReplayGuard', () => {
  it('admits an envelope once, and refuses stale or future timestamps', () => {
    let now = 1_000_000;
    const guard = new ReplayGuard(60_000, 10, () => now);
    expect(guard.admit('a', now)).toBe('ok');
    expect(guard.admit('a', now)).toBe('replayed');
    expect(guard.admit('b', now - 60_001)).toBe('stale');
    expect(guard.admit('c', now + 60_001)).toBe('stale');
    // Ahead of the clock only by clock skew: at most 30 s, not the whole window.
    expect(guard.admit('f', now + 30_001)).toBe('stale');
    expect(guard.admit('g', now + 29_000)).toBe('ok');
    expect(guard.admit('d', Number.NaN)).toBe('stale');
    // Once 'a' could no longer pass the timestamp check, it is forgotten.
    now += 60_001;
    expect(guard.admit('a', now - 60_001)).toBe('stale');
    expect(guard.admit('e', now)).toBe('ok');
    expect(guard.size).toBe(2);
  });

  it('refuses new envelopes rather than forget live ones when full, and frees space as they expire', () => {
    let now = 0;
    const guard = new ReplayGuard(1000, 3, () => now);
    for (const id of ['a', 'b', 'c']) expect(guard.admit(id, now)).toBe('ok');
    expect(guard.admit('d', now)).toBe('full');
    expect(guard.admit('a', now)).toBe('replayed');
    now = 500;
    expect(guard.admit('e', 400)).toBe('full');
    now = 1001;
    expect(guard.admit('e', 900)).toBe('ok');
    expect(guard.size).toBe(1);
  });

  it('learns ids a shard\'s log holds (remember): refused until their window ends, taken even when full', () => {
    let now = 0;
    const guard = new ReplayGuard(1000, 2, () => now);
    expect(guard.expiresAt(300)).toBe(1300);
    for (const id of ['a', 'b']) expect(guard.admit(id, now)).toBe('ok');
    guard.remember('logged', 1300);
    // Expired already: nothing to refuse, nothing kept.
    guard.remember('old', -1);
    expect(guard.size).toBe(3);
    expect(guard.admit('logged', 300)).toBe('replayed');
    expect(guard.admit('c', now)).toBe('full');
    now = 1001;
    expect(guard.admit('logged', 300)).toBe('replayed');
    expect(guard.admit('c', now)).toBe('ok');
    // Once its window ended, it is forgotten like any other.
    now = 1301;
    expect(guard.admit('d', now)).toBe('ok');
    expect(guard.size).toBe(2);
  });
});

describe('POST /v1/sealed in the enclave (enclave/api/sealed-route.ts)', () => {
  const key = generateSealedRequestKey();
  const dispatched: { method: string; request: ApiRequest }[] = [];
  const route = sealedRoute({
    key,
    replay: new ReplayGuard(SEALED_MAX_AGE_MS),
    identify: openAuthorizer.identify,
    dispatch: async ({ method, ...request }): Promise<ApiReply> => {
      dispatched.push({ method, request: request as ApiRequest });
      return { status: 201, headers: { 'x-inner': 'yes' }, body: Buffer.from('{"id":"mem_1"}') };
    },
  });
  const post = async (body: Uint8Array) => route(await sealedCall({
    request_id: 'r1',
    body: Buffer.from(body),
    authorization: '',
    organization: 'outer-org',
  }));
  const refusal = async (body: Uint8Array): Promise<ApiError> => {
    const error = await post(body).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBeGreaterThanOrEqual(400);
    expect((error as ApiError).status).toBeLessThan(500);
    return error as ApiError;
  };
  const fresh = () => sealRequest(key.publicKey, { ...inner, timestamp: Date.now() });

  it('opens, dispatches with the sealed method, target, body, authorization and organization, and seals the reply', async () => {
    const { envelope, nonce, replyKey } = fresh();
    const reply = await post(envelope);
    expect(reply.status).toBe(200);
    expect(reply.headers).toEqual({ 'content-type': 'application/octet-stream' });
    expect(dispatched.at(-1)).toEqual({
      method: 'POST',
      request: { request_id: 'r1', target: '/v1/memory', body: Buffer.from(inner.body), authorization: 'Bearer k', organization: 'org-1', known_state: '' },
    });
    const opened = openReply(reply.body as Uint8Array, replyKey, nonce);
    expect(opened).toEqual({ status: 201, headers: { 'x-inner': 'yes' }, body: utf8('{"id":"mem_1"}') });
  });

  it('takes nothing from the host: no sealed authorization or organization means none', async () => {
    const { envelope } = sealRequest(key.publicKey, { method: 'GET', target: '/v1/memory?tenant_id=t', body: new Uint8Array(), timestamp: Date.now() });
    await post(envelope);
    expect(dispatched.at(-1)!.request).toMatchObject({ authorization: '', organization: '', target: '/v1/memory?tenant_id=t' });
  });

  it('refuses an envelope sent with an Authorization header outside it (hold round two, 1), before opening or acting', async () => {
    const count = dispatched.length;
    const error = await route(await sealedCall({
      request_id: 'r2', body: fresh().envelope, authorization: 'Bearer leaked', organization: '',
    })).then(() => undefined, (e: unknown) => e);
    expect(error).toMatchObject({ status: 400, code: 'sealed_outer_authorization' });
    expect((error as ApiError).message).not.toContain('leaked');
    expect(dispatched.length).toBe(count);
  });

  it('refuses the same envelope sent again with bit 255 of the client key flipped (another spelling of the same X25519 key), not acting twice', async () => {
    const { envelope } = fresh();
    expect((await post(envelope)).status).toBe(200);
    const count = dispatched.length;
    const respelled = Buffer.from(envelope);
    respelled[31] ^= 0x80;
    const error = await refusal(respelled);
    expect(error.code).toBe('invalid_sealed_request');
    expect(dispatched.length).toBe(count);
  });

  it('refuses client keys of small order and non-canonical ones', async () => {
    const { envelope } = fresh();
    for (const hex of ['00'.repeat(32), `01${'00'.repeat(31)}`, `ec${'ff'.repeat(30)}7f`, `ed${'ff'.repeat(30)}7f`, `${'ff'.repeat(31)}ff`]) {
      const error = await refusal(Buffer.concat([Buffer.from(hex, 'hex'), envelope.subarray(32)]));
      expect(error.code, hex).toBe('invalid_sealed_request');
    }
  });

  it('hands the handler the envelope\'s replay id and the end of its window, which its changes are logged with', async () => {
    const callers: Caller[] = [];
    const keep = sealedRoute({
      key, replay: new ReplayGuard(SEALED_MAX_AGE_MS), identify: openAuthorizer.identify,
      dispatch: async (_request, caller): Promise<ApiReply> => {
        callers.push(caller);
        return { status: 200, body: Buffer.from('{}') };
      },
    });
    const timestamp = Date.now();
    const { envelope } = sealRequest(key.publicKey, { ...inner, timestamp });
    await keep(await sealedCall({ request_id: 'r1', body: Buffer.from(envelope), authorization: '', organization: '' }));
    expect(callers[0].replay).toEqual({ id: key.open(envelope)!.replayId, expires_at: timestamp + SEALED_MAX_AGE_MS });
  });

  it('refuses a replayed envelope with 409, before dispatching it again', async () => {
    const { envelope } = fresh();
    await post(envelope);
    const count = dispatched.length;
    expect(await refusal(envelope)).toMatchObject({ status: 409, code: 'sealed_request_replayed' });
    // The same box with bytes added after it is not a new envelope: it no longer opens.
    expect(await refusal(Buffer.concat([envelope, Buffer.alloc(16)]))).toMatchObject({ status: 400, code: 'sealed_open_failed' });
    expect(dispatched).toHaveLength(count);
  });

  it.each([
    ['no body', 400, 'invalid_sealed_request', () => new Uint8Array()],
    ['71 bytes (shorter than key, nonce and MAC)', 400, 'invalid_sealed_request', () => fresh().envelope.subarray(0, 71)],
    ['the JSON envelope of earlier versions', 400, 'sealed_open_failed', () => {
      const { envelope: e } = fresh();
      const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
      return Buffer.from(JSON.stringify({ client_public_key: b64(e.subarray(0, 32)), nonce: b64(e.subarray(32, 56)), ciphertext: b64(e.subarray(56)) }));
    }],
    ['one changed box bit', 400, 'sealed_open_failed', () => flip(fresh().envelope, 100)],
    ['its last byte cut', 400, 'sealed_open_failed', () => { const e = fresh().envelope; return e.subarray(0, e.length - 1); }],
    ['junk after the box', 400, 'sealed_open_failed', () => Buffer.concat([fresh().envelope, Buffer.from('junk')])],
    ['a key from another enclave', 400, 'sealed_open_failed', () => sealRequest(nacl.box.keyPair().publicKey, { ...inner, timestamp: Date.now() }).envelope],
    ['an old timestamp', 400, 'sealed_request_expired', () => sealRequest(key.publicKey, { ...inner, timestamp: Date.now() - SEALED_MAX_AGE_MS - 1000 }).envelope],
    ['a sealed body over the limit', 413, 'too_large', () => sealRequest(key.publicKey, { ...inner, body: new Uint8Array(1024 * 1024 + 1), timestamp: Date.now() }).envelope],
    ['an envelope over the route\'s limit', 413, 'too_large', () => new Uint8Array(1280 * 1024 + 1)],
  ] as const)('refuses %s (%i %s)', async (_name, status, code, make) => {
    expect(await refusal(make())).toMatchObject({ status, code });
  });

  it('refuses sealed plaintext that is not a sealed request', async () => {
    const sealRaw = (plaintext: string | Uint8Array): Uint8Array => {
      const client = nacl.box.keyPair();
      const nonce = nacl.randomBytes(24);
      return Buffer.concat([client.publicKey, nonce, nacl.box(typeof plaintext === 'string' ? utf8(plaintext) : plaintext, nonce, key.publicKey, client.secretKey)]);
    };
    const base = { type: 'agent-service/sealed-request/v2', method: 'GET', target: '/v1/memory', timestamp: Date.now(), body_bytes: 0 };
    const line = (head: object, after = '') => `${JSON.stringify(head)}\n${after}`;
    const cases: [string | Uint8Array, string][] = [
      ['not json', 'the sealed request is not an agent-service/sealed-request/v2 request (it has no head line)'],
      ['not json\n', 'the sealed request\'s head is not JSON'],
      [line({ ...base, type: 'agent-service/sealed-reply/v3' }), 'the sealed plaintext is not a sealed request: invalid \'type\': must be equal to constant'],
      // A reply's plaintext (a head line, then a body) reflected back as a request.
      [line({ type: 'agent-service/sealed-reply/v3', request_nonce: 'AAAA', status: 200, headers: {}, body_bytes: 2 }, '{}'), 'the sealed plaintext is not a sealed request'],
      // The plaintext of a request before the body went as bytes: JSON, the body in base64, padded with spaces.
      [`${JSON.stringify({ ...base, type: 'agent-service/sealed-request/v1', body: '' })}   `, 'the sealed request is not an agent-service/sealed-request/v2 request (it has no head line)'],
      [line({ ...base, method: 'PUT' }), 'the sealed plaintext is not a sealed request'],
      [line({ ...base, target: 'v1/memory' }), 'the sealed plaintext is not a sealed request'],
      [line({ ...base, body: '' }), 'the sealed plaintext is not a sealed request'],
      [line({ ...base, extra: 1 }), 'the sealed plaintext is not a sealed request'],
      [line({ ...base, body_bytes: undefined }), 'the sealed plaintext is not a sealed request'],
      [line({ ...base, body_bytes: -1 }), 'the sealed plaintext is not a sealed request'],
      [line({ ...base, body_bytes: 1.5 }), 'the sealed plaintext is not a sealed request'],
      [line({ ...base, body_bytes: 3 }, 'ab'), 'the sealed request\'s body_bytes is not the length of a body it holds'],
      [line({ ...base, body_bytes: 2 }, 'ab\0\0x'), 'the sealed request has bytes other than zeros after its body (at byte 4 after the head line)'],
      [line({ ...base, body_bytes: 1 }, 'ab'), 'the sealed request has bytes other than zeros after its body (at byte 1 after the head line)'],
    ];
    for (const [plaintext, message] of cases) {
      const error = await refusal(sealRaw(plaintext));
      expect(error, String(plaintext)).toMatchObject({ status: 400, code: 'invalid_sealed_request' });
      expect(error.message, String(plaintext)).toContain(message);
      expect(error.message).not.toContain('not json');
    }
    // The same plaintexts with a good body: taken.
    expect((await post(sealRaw(line({ ...base, body_bytes: 2 }, 'ab\0\0')))).status).toBe(200);
    expect(dispatched.at(-1)!.request.body).toEqual(Buffer.from('ab'));
  });
});

describe('user_data (protocol/user-data.ts)', () => {
  const keys = { operatorKey: new Uint8Array(32).fill(1), boxPublicKey: new Uint8Array(32).fill(2) };

  it('binds the operator key and the box key, in a fixed encoding', () => {
    const bytes = encodeUserData(keys);
    expect(Buffer.from(bytes).toString()).toBe(
      `{"v":1,"operator_pubkey":"${Buffer.alloc(32, 1).toString('base64')}","tee_box_public_key":"${Buffer.alloc(32, 2).toString('base64')}"}`,
    );
    expect(parseUserData(bytes)).toEqual(keys);
  });

  it.each([
    [null, /no user_data/],
    [utf8('dummy'), /not UTF-8 JSON/],
    [utf8('{"v":2}'), /not version 1/],
    [utf8('{"v":1,"operator_pubkey":"AQ=="}'), /operator_pubkey is not 32 bytes/],
    [utf8(`{"v":1,"operator_pubkey":"${Buffer.alloc(32).toString('base64')}"}`), /no tee_box_public_key/],
  ])('refuses %s', (bytes, message) => {
    expect(() => parseUserData(bytes)).toThrow(message);
  });
});

describe('the replay guard cannot be filled by traffic without a valid API key (finding 4)', () => {
  it('checks the sealed key before admitting: 1,000 envelopes with a wrong key take no place, a keyed one still works', async () => {
    const key = generateSealedRequestKey();
    const replay = new ReplayGuard(SEALED_MAX_AGE_MS, 100);
    const route = sealedRoute({
      key,
      replay,
      identify: keyAuthorizer(() => new KeyRing([{ hash: hashApiKey('good'), tenants: ['t1'], plaintext: true, scope: {} }])).identify,
      dispatch: async (): Promise<ApiReply> => ({ status: 200, headers: {}, body: Buffer.from('{}') }),
    });
    const send = async (authorization: string | undefined) => route(await sealedCall({
      request_id: 'r', authorization: '', organization: '',
      body: sealRequest(key.publicKey, { ...inner, authorization, timestamp: Date.now() }).envelope,
    }));
    for (let i = 0; i < 1000; i++) {
      const error = await send(i % 2 ? 'Bearer flood' : undefined).then(() => undefined, (e: unknown) => e);
      expect((error as ApiError).status).toBe(401);
    }
    expect(replay.size).toBe(0);
    expect((await send('Bearer good')).status).toBe(200);
    expect(replay.size).toBe(1);
  });
});

describe('sealed sizes are padded to buckets (finding 11)', () => {
  it('1 KiB, then powers of two to 64 KiB, then multiples of 64 KiB', () => {
    expect([1, 1024, 1025, 3000, 65536, 65537, 200_000].map(paddedSize)).toEqual([1024, 1024, 2048, 4096, 65536, 131072, 262144]);
  });

  it('requests and replies of different lengths in one bucket seal to the same size, and still open', () => {
    const key = generateSealedRequestKey();
    const seal = (text: string) => sealRequest(key.publicKey, { method: 'POST', target: '/v1/memory', body: Buffer.from(text), timestamp: Date.now() });
    const a = seal('a');
    const b = seal('a much longer body, but still in the first bucket'.repeat(5));
    expect(a.envelope.length).toBe(b.envelope.length);
    const opened = key.open(b.envelope)!;
    expect(opened.rest.length).toBeGreaterThan(opened.head.body_bytes as number);
    expect(sealedBody(opened.rest, opened.head.body_bytes, 'request').length).toBe(245);
    const r1 = sealReply({ status: 200, headers: {}, body: Buffer.from('{}') }, a.replyKey, a.nonce);
    const r2 = sealReply({ status: 404, headers: { 'x-a': 'b' }, body: Buffer.from('{"error":"not here"}') }, a.replyKey, a.nonce);
    expect(r1.length).toBe(r2.length);
    expect(openReply(r2, a.replyKey, a.nonce)).toMatchObject({ status: 404, headers: { 'x-a': 'b' } });
  });
});
