import nacl from 'tweetnacl';
import { describe, expect, it } from 'vitest';
import { enclaveProto } from '../../common/proto.js';
import { apiRoutes, matchRoute, routeNames } from '../../common/routes.js';
import { signReply, streamSigner } from '../../enclave/api/signing.js';
import { generateIdentity } from '../../enclave/keys.js';
import {
  checkSignature, keyId, responseStatement, sha256Hex, signAnswer, splitSignedStream, StateTracker, streamSignatureEvent,
  ANCESTOR_HEADER, SIGNATURE_HEADER, STORE_HEADER, TIMESTAMP_HEADER, type SignedRequest,
} from '../../protocol/response-signature.js';
import type { ApiRequest } from '../../common/proto.js';

const utf8 = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'));
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

const request: SignedRequest = {
  method: 'POST',
  target: '/v1/memory',
  organization: 'org-1',
  body: utf8('{"tenant_id":"t1","content":"hello"}'),
};
const responseBody = utf8('{"id":"mem_1"}');
const answer = { status: 200, bodySha256: sha256Hex(responseBody) };
const NOW = 1_731_000_000_000;
const HEAD = { seq: 7, hash: 'ab'.repeat(32) };
const STATE = `7:${'ab'.repeat(32)}`;
const STORE = '5e'.repeat(16);

describe('the signed statement', () => {
  it('is exactly the documented sixteen lines', () => {
    const text = responseStatement(
      { method: 'GET', target: '/v1/memory?query=dogs&tenant_id=t1', body: new Uint8Array(), knownState: `0/5:${'cd'.repeat(32)}` },
      { status: 404, bodySha256: sha256Hex(utf8('{}')), timestamp: '1731000000000', state: STATE, store: STORE, shard: '0/1', ancestor: 'no' },
    );
    expect(text).toBe([
      'agent-service/response-signature/v5',
      'method GET',
      'target "/v1/memory?query=dogs&tenant_id=t1"',
      'organization ""',
      'key-id ',
      'tenant ""',
      'upstream ""',
      `request-body-sha256 ${EMPTY_SHA256}`,
      'status 404',
      'response-body-sha256 44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a',
      'timestamp 1731000000000',
      `state ${STATE}`,
      `store ${STORE}`,
      'shard 0/1',
      `known-state 0/5:${'cd'.repeat(32)}`,
      'ancestor no',
    ].join('\n'));
    // Without a known state, both of its lines are empty.
    const plain = responseStatement({ method: 'GET', target: '/', body: new Uint8Array() }, { status: 200, bodySha256: EMPTY_SHA256, timestamp: '1', state: STATE, store: STORE, shard: '0/1' });
    expect(plain.split('\n').slice(-4)).toEqual([`store ${STORE}`, 'shard 0/1', 'known-state ', 'ancestor ']);
  });

  it('writes the target and organization as JSON strings, so a line break cannot add a field', () => {
    const text = responseStatement(
      { method: 'GET', target: '/v1/x\nstatus 200', organization: 'a"\nb', body: new Uint8Array() },
      { status: 500, bodySha256: EMPTY_SHA256, timestamp: '1', state: STATE, store: STORE, shard: '0/1' },
    );
    expect(text.split('\n')).toHaveLength(16);
    expect(text).toContain('target "/v1/x\\nstatus 200"');
    expect(text).toContain('organization "a\\"\\nb"');
  });

  it('names where a chat went (x-tee-upstream), so an answer cannot be passed off as having gone elsewhere', () => {
    const keys = nacl.sign.keyPair();
    const upstream = `https://model.example:8443 sha256/${Buffer.alloc(32, 7).toString('base64')}`;
    const signed = signAnswer((m) => nacl.sign.detached(m, keys.secretKey), request, { ...answer, state: STATE, store: STORE, shard: '0/1', upstream }, NOW);
    expect(signed.upstream).toBe(upstream);
    expect(checkSignature(keys.publicKey, request, answer, signed, { now: NOW })).toMatchObject({ ok: true, upstream });
    const other = `https://elsewhere.example sha256/${Buffer.alloc(32, 7).toString('base64')}`;
    expect(checkSignature(keys.publicKey, request, answer, { ...signed, upstream: other }, { now: NOW }).ok).toBe(false);
    expect(checkSignature(keys.publicKey, request, answer, { ...signed, upstream: undefined }, { now: NOW }).ok).toBe(false);
    expect(checkSignature(keys.publicKey, request, answer, { ...signed, upstream: `${upstream} memories-withheld` }, { now: NOW }).ok).toBe(false);
    expect(() => responseStatement(request, { ...answer, timestamp: '1', state: STATE, store: STORE, shard: '0/1', upstream: 'anywhere\nstatus 200' })).toThrow(/not an upstream/);
    const split = splitSignedStream(Buffer.from(`data: {}\n\n${streamSignatureEvent(signed)}data: [DONE]\n\n`));
    expect(split?.signature.upstream).toBe(upstream);
  });

  it('refuses values that have no place in it', () => {
    const ok = { status: 200, bodySha256: EMPTY_SHA256, timestamp: '1', state: STATE, store: STORE, shard: '0/1' };
    expect(() => responseStatement({ ...request, method: 'get\n' }, ok)).toThrow(/not an HTTP method/);
    expect(() => responseStatement(request, { ...ok, status: 42 })).toThrow(/not an HTTP status/);
    expect(() => responseStatement(request, { ...ok, bodySha256: 'XYZ' })).toThrow(/64 lowercase hex/);
    expect(() => responseStatement(request, { ...ok, timestamp: '1.5' })).toThrow(/timestamp/);
    expect(() => responseStatement(request, { ...ok, state: '7:xyz\nstatus 200' })).toThrow(/not a state head/);
    expect(() => responseStatement(request, { ...ok, store: 'x\nstatus 200' })).toThrow(/not a store id/);
    expect(() => responseStatement({ ...request, knownState: '7:ab\n' }, ok)).toThrow(/not known state heads/);
    expect(() => responseStatement(request, { ...ok, ancestor: 'maybe' as never })).toThrow(/not an ancestry/);
  });
});

describe('signing and checking', () => {
  const keys = nacl.sign.keyPair();
  const sign = (m: Uint8Array) => nacl.sign.detached(m, keys.secretKey);
  const signature = signAnswer(sign, request, { ...answer, state: STATE, store: STORE, shard: '0/1' }, NOW);

  it('verifies what was signed, within the allowed clock skew', () => {
    expect(signature.timestamp).toBe(String(NOW));
    expect(checkSignature(keys.publicKey, request, answer, signature, { now: NOW + 1000 })).toEqual({ ok: true, signedAt: new Date(NOW), state: HEAD, store: STORE, shard: { index: 0, count: 1 }, tenant: '', upstream: '' });
  });

  it('names the API key by its id: the answer to a request sent with one key does not verify for another (finding 3)', () => {
    const alice = { ...request, authorization: 'Bearer alice-key' };
    const bob = { ...request, authorization: 'Bearer bob-key' };
    const signed = signAnswer(sign, alice, { ...answer, state: STATE, store: STORE, shard: '0/1' }, NOW);
    expect(checkSignature(keys.publicKey, alice, answer, signed, { now: NOW }).ok).toBe(true);
    expect(checkSignature(keys.publicKey, bob, answer, signed, { now: NOW }).ok).toBe(false);
    expect(checkSignature(keys.publicKey, request, answer, signed, { now: NOW }).ok).toBe(false);
    expect(responseStatement(alice, { ...answer, timestamp: '1', state: STATE, store: STORE, shard: '0/1' })).toContain(`key-id ${keyId('Bearer alice-key')}`);
    expect(keyId('Bearer alice-key')).toMatch(/^[0-9a-f]{32}$/);
    expect(responseStatement(alice, { ...answer, timestamp: '1', state: STATE, store: STORE, shard: '0/1' })).not.toContain('alice-key');
  });

  it('names the tenant the enclave acted for: the same answer under another tenant does not verify (finding 3)', () => {
    const signed = signAnswer(sign, request, { ...answer, state: STATE, store: STORE, shard: '0/1', tenant: 'alice' }, NOW);
    expect(signed.tenant).toBe('alice');
    expect(checkSignature(keys.publicKey, request, answer, signed, { now: NOW })).toMatchObject({ ok: true, tenant: 'alice' });
    expect(checkSignature(keys.publicKey, request, answer, { ...signed, tenant: 'bob' }, { now: NOW }).ok).toBe(false);
    expect(checkSignature(keys.publicKey, request, answer, { ...signed, tenant: undefined }, { now: NOW }).ok).toBe(false);
  });

  it('covers the state head: another head does not verify', () => {
    const other = { ...signature, state: `8:${'ab'.repeat(32)}` };
    expect(checkSignature(keys.publicKey, request, answer, other, { now: NOW }).ok).toBe(false);
    expect(checkSignature(keys.publicKey, request, answer, { ...signature, state: undefined }, { now: NOW })).toMatchObject({ ok: false, reason: /x-tee-state/ });
  });

  it('covers the store id (issue 31): another store, or none, does not verify', () => {
    expect(checkSignature(keys.publicKey, request, answer, { ...signature, store: 'cd'.repeat(16) }, { now: NOW }).ok).toBe(false);
    expect(checkSignature(keys.publicKey, request, answer, { ...signature, store: undefined }, { now: NOW })).toMatchObject({ ok: false, reason: /x-tee-store/ });
  });

  it('covers the known state the request carried and the enclave\'s ancestry answer (issue 31)', () => {
    const known = `0/5:${'cd'.repeat(32)}`;
    const asked = { ...request, knownState: known };
    const signed = signAnswer(sign, asked, { ...answer, state: STATE, store: STORE, shard: '0/1', ancestor: 'no' }, NOW);
    expect(checkSignature(keys.publicKey, asked, answer, signed, { now: NOW })).toMatchObject({ ok: true, ancestor: 'no' });
    // The host turns "no" into "yes", drops the answer, or swaps the head the enclave judged.
    expect(checkSignature(keys.publicKey, asked, answer, { ...signed, ancestor: 'yes' }, { now: NOW }).ok).toBe(false);
    expect(checkSignature(keys.publicKey, asked, answer, { ...signed, ancestor: undefined }, { now: NOW }).ok).toBe(false);
    expect(checkSignature(keys.publicKey, { ...asked, knownState: `0/4:${'cd'.repeat(32)}` }, answer, signed, { now: NOW }).ok).toBe(false);
    expect(checkSignature(keys.publicKey, request, answer, signed, { now: NOW }).ok).toBe(false);
    expect(checkSignature(keys.publicKey, asked, answer, { ...signed, ancestor: 'perhaps' as never }, { now: NOW })).toMatchObject({ ok: false, reason: /x-tee-ancestor/ });
  });

  it.each([
    ['another method', { ...request, method: 'DELETE' }, answer],
    ['another target', { ...request, target: '/v1/memory?tenant_id=t2' }, answer],
    ['another organization', { ...request, organization: 'org-2' }, answer],
    ['no organization', { ...request, organization: undefined }, answer],
    ['another request body', { ...request, body: utf8('{"tenant_id":"t1","content":"hellO"}') }, answer],
    ['another status', request, { ...answer, status: 201 }],
    ['another response body', request, { ...answer, bodySha256: sha256Hex(utf8('{"id":"mem_2"}')) }],
  ])('fails for %s', (_name, otherRequest, otherAnswer) => {
    const result = checkSignature(keys.publicKey, otherRequest, otherAnswer, signature, { now: NOW });
    expect(result.ok).toBe(false);
    expect(!result.ok && result.reason).toMatch(/does not verify with the enclave's key/);
  });

  it('fails for another timestamp, another key, a missing or malformed signature', () => {
    const check = (sig: Parameters<typeof checkSignature>[3], key = keys.publicKey) => checkSignature(key, request, answer, sig, { now: NOW });
    expect(check({ ...signature, timestamp: String(NOW + 1) })).toMatchObject({ ok: false });
    expect(check(signature, nacl.sign.keyPair().publicKey)).toMatchObject({ ok: false });
    expect(check({ timestamp: signature.timestamp })).toEqual({ ok: false, reason: expect.stringMatching(/no x-tee-signature header/) });
    expect(check({ signature: signature.signature })).toEqual({ ok: false, reason: expect.stringMatching(/x-tee-timestamp/) });
    expect(check({ ...signature, signature: 'AAAA' })).toEqual({ ok: false, reason: expect.stringMatching(/not a base64 Ed25519 signature/) });
  });

  it('fails for a signature older (or newer) than the allowed skew: a replayed answer', () => {
    const late = checkSignature(keys.publicKey, request, answer, signature, { now: NOW + 5 * 60_000 + 1 });
    expect(late).toEqual({ ok: false, reason: expect.stringMatching(/replayed or stale/) });
    expect(checkSignature(keys.publicKey, request, answer, signature, { now: NOW - 10_000, maxSkewMs: 5000 }).ok).toBe(false);
  });
});

describe('the enclave side (enclave/api/signing.ts)', () => {
  // A chain that holds head 5:cd… and not 5:ef….
  const state = { count: 1, shardOf: () => 0, head: () => HEAD, storeId: () => STORE, ancestry: (_shard: number, known: { seq: number; hash: string }) => (known.hash === 'cd'.repeat(32) ? 'yes' as const : 'no' as const) };
  const identity = { ...generateIdentity(), state };
  const apiRequest: ApiRequest = {
    request_id: 'r1', method: request.method, target: request.target, body: Buffer.from(request.body), authorization: 'Bearer x', organization: 'org-1', known_state: '',
  };
  // What the client sent, as the sdk names it: the same request, with its key.
  const sent = { ...request, authorization: 'Bearer x' };

  it('signReply adds headers that the sdk accepts for that request only', () => {
    const reply = signReply(identity, 'POST', apiRequest, { status: 200, body: Buffer.from(responseBody), headers: { 'x-other': '1' } });
    expect(reply.headers).toMatchObject({ 'x-other': '1', [SIGNATURE_HEADER]: expect.any(String), [TIMESTAMP_HEADER]: expect.stringMatching(/^\d+$/) });
    const sig = { signature: reply.headers![SIGNATURE_HEADER], timestamp: reply.headers![TIMESTAMP_HEADER], state: reply.headers!['x-tee-state'], store: reply.headers![STORE_HEADER], shard: reply.headers!['x-tee-shard'] };
    expect(sig.state).toBe(STATE);
    expect(sig.store).toBe(STORE);
    expect(reply.headers![ANCESTOR_HEADER]).toBeUndefined();
    expect(checkSignature(identity.publicKey, sent, answer, sig).ok).toBe(true);
    expect(checkSignature(identity.publicKey, { ...sent, method: 'GET' }, answer, sig).ok).toBe(false);
  });

  it('signReply answers whether the known state the request carried is on the chain, and ignores one that is not a head', () => {
    const ask = (known_state: string) => {
      const reply = signReply(identity, 'POST', { ...apiRequest, known_state }, { status: 200, body: Buffer.from(responseBody), headers: {} });
      const h = reply.headers!;
      return { ancestor: h[ANCESTOR_HEADER], sig: { signature: h[SIGNATURE_HEADER], timestamp: h[TIMESTAMP_HEADER], state: h['x-tee-state'], store: h[STORE_HEADER], shard: h['x-tee-shard'], ancestor: h[ANCESTOR_HEADER] as 'yes' } };
    };
    const onChain = `0/5:${'cd'.repeat(32)}`;
    const yes = ask(onChain);
    expect(yes.ancestor).toBe('yes');
    expect(checkSignature(identity.publicKey, { ...sent, knownState: onChain }, answer, yes.sig).ok).toBe(true);
    expect(ask(`0/5:${'ef'.repeat(32)}`).ancestor).toBe('no');
    const junk = ask('not a head');
    expect(junk.ancestor).toBeUndefined();
    expect(checkSignature(identity.publicKey, sent, answer, junk.sig).ok).toBe(true);
  });

  it('streamSigner.finishWith puts the signature inside the final event, covering that event too (a Responses stream)', () => {
    const chunks = ['data: {"type":"response.created"}\n\n', 'data: {"type":"response.output_text.delta","delta":"héllo"}\n\n'].map(utf8);
    const signer = streamSigner(identity, 'POST', apiRequest, 200);
    for (const chunk of chunks) signer.update(chunk);
    const completed = JSON.stringify({ type: 'response.completed', response: { status: 'completed', output_text: 'héllo' }, sequence_number: 2 });
    const finalEvent = signer.finishWith(completed);
    expect(finalEvent.toString()).toMatch(/^data: \{"type":"response\.completed",.*,"sequence_number":2,"tee_signature":\{"signature":"[A-Za-z0-9+/=]+","timestamp":"\d+","state":"7:(ab){32}","store":"(5e){16}","shard":"0\/1"\}\}\n\n$/);
    expect(() => signer.finish()).toThrow(/already signed/);

    const transcript = Buffer.concat([...chunks, finalEvent]);
    const split = splitSignedStream(transcript)!;
    // The signed body is the whole stream with the final event as it was before the signature went in.
    expect(Buffer.from(split.body).toString()).toBe(Buffer.concat([...chunks, utf8(`data: ${completed}\n\n`)]).toString());
    expect(checkSignature(identity.publicKey, sent, { status: 200, bodySha256: sha256Hex(split.body) }, split.signature).ok).toBe(true);

    // The host changes the final event's text, which clients' helpers read: the signature fails.
    const altered = Buffer.from(transcript.toString().replace('"output_text":"héllo"', '"output_text":"hallo"'));
    const alteredSplit = splitSignedStream(altered)!;
    expect(checkSignature(identity.publicKey, sent, { status: 200, bodySha256: sha256Hex(alteredSplit.body) }, alteredSplit.signature).ok).toBe(false);
    // Anything after the signature member, or a second one smuggled in, is not ours.
    expect(splitSignedStream(Buffer.from(transcript.toString().replace(/\}\}\n\n$/, '},"x":1}\n\n')))).toBeUndefined();
  });

  it('signs plain Ed25519 (OpenSSL), which tweetnacl verifies too', () => {
    const message = utf8('any statement');
    const signature = identity.sign(message);
    expect(nacl.sign.detached.verify(message, signature, identity.publicKey)).toBe(true);
    expect(nacl.sign.detached.verify(utf8('another statement'), signature, identity.publicKey)).toBe(false);
  });

  it('streamSigner signs the concatenation of the streamed bytes, as a chunk-shaped event before [DONE]', () => {
    const chunks = ['data: {"a":1}\n\n', 'data: {"b":2}\n\n'].map(utf8);
    const done = utf8('data: [DONE]\n\n');
    const signer = streamSigner(identity, 'POST', apiRequest, 200);
    for (const chunk of chunks) signer.update(chunk);
    const finalEvent = signer.finish();
    // A chat chunk with no choices (strict clients skip it), carrying the signature.
    expect(finalEvent.toString()).toMatch(/^data: \{"object":"chat\.completion\.chunk","type":"tee\.signature","choices":\[\],"tee_signature":\{"signature":"[A-Za-z0-9+/=]+","timestamp":"\d+","state":"7:(ab){32}","store":"(5e){16}","shard":"0\/1"\}\}\n\n$/);
    expect(() => signer.finish()).toThrow(/already signed/);

    // [DONE] stays the last event; it is constant, so it is not signed.
    const transcript = Buffer.concat([...chunks, finalEvent, done]);
    const split = splitSignedStream(transcript)!;
    expect(Buffer.from(split.body).toString()).toBe(Buffer.concat(chunks).toString());
    const streamed = { status: 200, bodySha256: sha256Hex(split.body) };
    expect(checkSignature(identity.publicKey, sent, streamed, split.signature).ok).toBe(true);
    // A Responses stream has no [DONE]: the signature is the last event.
    expect(splitSignedStream(Buffer.concat([...chunks, finalEvent]))?.signature).toEqual(split.signature);

    // One byte changed in the stream: the signature no longer matches.
    const altered = Buffer.from(transcript);
    altered[8] ^= 0x01;
    const alteredSplit = splitSignedStream(altered)!;
    expect(checkSignature(identity.publicKey, sent, { status: 200, bodySha256: sha256Hex(alteredSplit.body) }, alteredSplit.signature).ok).toBe(false);
  });

  it('a stream cut short, or with junk after the signature, has no signature to check', () => {
    const event = streamSignatureEvent({ signature: 'c2ln', timestamp: '1', state: STATE, store: STORE, shard: '0/1' });
    expect(splitSignedStream(utf8('data: {"a":1}\n\n'))).toBeUndefined();
    expect(splitSignedStream(utf8(`data: {"a":1}\n\n${event}data: more\n\n`))).toBeUndefined();
    expect(splitSignedStream(utf8(`data: {"a":1}\n${event}`))).toBeUndefined();
    expect(splitSignedStream(utf8(event))).toEqual({ body: new Uint8Array(), signature: { signature: 'c2ln', timestamp: '1', state: STATE, store: STORE, shard: '0/1' } });
  });
});

describe('routes (common/routes.ts)', () => {
  it('carry every API request on two RPCs of the channel, all signed by the enclave', () => {
    const service = enclaveProto().Enclave.service as Record<string, { responseStream: boolean }>;
    // Exchange (many requests on one stream) and CallStream (an answer that streams) carry
    // the requests; Health and Metrics carry no request of a client: the proxy's own probes and
    // scrapes; JoinChallenge and Join are another enclave taking the keys (enclave/cluster/key-sharing.ts);
    // OpenShard, PrepareShard, CloseShard and Shards are the host's placement (enclave/cluster/shard-control.ts);
    // SetPeers (the host naming the members), Witnesses and Witnessed (members confirming heads)
    // are freshness across enclaves (enclave/cluster/freshness.ts).
    expect(Object.keys(service).sort()).toEqual([
      'CallStream', 'CloseShard', 'Exchange', 'Health', 'Join', 'JoinChallenge', 'Metrics', 'OpenShard', 'PrepareShard', 'SetPeers', 'Shards', 'Witnessed', 'Witnesses',
    ]);
    for (const name of routeNames) expect(apiRoutes[name].method).toMatch(/^(GET|POST|PATCH|DELETE)$/);
  });

  it('resolve by method and path; a known path with another method is a 405 with the methods it takes', () => {
    expect(matchRoute('GET', '/v1/memory')).toEqual({ kind: 'route', name: 'ListMemories', params: {} });
    expect(matchRoute('POST', '/v1/memory')).toMatchObject({ kind: 'route', name: 'AddMemory' });
    expect(matchRoute('DELETE', '/v1/memory')).toMatchObject({ kind: 'route', name: 'DeleteMemories' });
    expect(matchRoute('GET', '/v1/memory/mem_1')).toEqual({ kind: 'route', name: 'GetMemory', params: { id: 'mem_1' } });
    expect(matchRoute('PATCH', '/v1/memory/mem_1/')).toMatchObject({ kind: 'route', name: 'UpdateMemory' });
    // A static path wins over a parameter.
    expect(matchRoute('POST', '/v1/memory/search')).toMatchObject({ kind: 'route', name: 'SearchMemory' });
    expect(matchRoute('POST', '/v1/chat/completions')).toMatchObject({ kind: 'route', name: 'ChatCompletion' });
    expect(matchRoute('PUT', '/v1/memory')).toEqual({ kind: 'method', allowed: ['DELETE', 'GET', 'POST'] });
    expect(matchRoute('GET', '/v1/memory/a/b')).toEqual({ kind: 'none' });
    expect(matchRoute('GET', '/v1/nothing')).toEqual({ kind: 'none' });
    // No two routes share a method and a path.
    expect(new Set(routeNames.map((n) => `${apiRoutes[n].method} ${apiRoutes[n].path}`)).size).toBe(routeNames.length);
  });
});

describe('rollback and fork detection (StateTracker)', () => {
  const head = (seq: number, fill = 'ab') => ({ seq, hash: fill.repeat(32) });
  const A = 'a1'.repeat(16);
  const B = 'b2'.repeat(16);
  /** An answer from store A at `state`, with the enclave's ancestry answer about the floor sent. */
  const from = (state: { seq: number; hash: string }, ancestor?: 'yes' | 'no' | 'unknown', store = A) => ({ state, store, ...(ancestor ? { ancestor } : {}) });

  it('accepts newer states the enclave places on its chain, or the same state, and remembers the newest with its store', () => {
    const tracker = new StateTracker();
    expect(tracker.observe(from(head(3)), tracker.floor())).toBeUndefined();
    expect(tracker.observe(from(head(5), 'yes'), tracker.floor())).toBeUndefined();
    expect(tracker.observe(from(head(5), 'yes'), tracker.floor())).toBeUndefined();
    expect(tracker.observe(from(head(5)), tracker.floor())).toBeUndefined();
    expect(tracker.current).toEqual({ store: A, ...head(5) });
  });

  it('refuses an older state, and the same state with another hash (a fork)', () => {
    const tracker = new StateTracker({ store: A, ...head(5) });
    expect(tracker.observe(from(head(4), 'no'), tracker.floor())).toMatch(/older than state 5.*rollback/);
    expect(tracker.observe(from(head(5, 'cd'), 'no'), tracker.floor())).toMatch(/fork/);
    expect(tracker.current).toEqual({ store: A, ...head(5) });
  });

  it('refuses a newer state that does not descend from the newest one seen: an old copy written past it (issue 31)', () => {
    const tracker = new StateTracker({ store: A, ...head(5) });
    const refusal = tracker.observe(from(head(9, 'cd'), 'no'), tracker.floor());
    expect(refusal).toMatch(/state 9:cdcd.*does not descend from state 5:abab.*fork/);
    // Nor when the enclave cannot tell, or did not say (an answer to a request that named no head).
    expect(tracker.observe(from(head(9, 'cd'), 'unknown'), tracker.floor())).toMatch(/cannot tell whether it descends/);
    expect(tracker.observe(from(head(9, 'cd')), tracker.floor())).toMatch(/did not say/);
    expect(tracker.current).toEqual({ store: A, ...head(5) });
  });

  it('refuses another store (wiped or replaced), even at a higher seq, until given a new tracker (issue 31)', () => {
    const tracker = new StateTracker({ store: A, ...head(5) });
    expect(tracker.observe(from(head(9), 'no', B), tracker.floor())).toMatch(new RegExp(`store ${B}, but this client has seen store ${A}.*new StateTracker`));
    expect(tracker.observe(from(head(0), undefined, B), tracker.floor())).toMatch(/wiped or replaced/);
    const fresh = new StateTracker();
    expect(fresh.observe(from(head(0), undefined, B), fresh.floor())).toBeUndefined();
    expect(fresh.current).toEqual({ store: B, ...head(0) });
  });

  it('a head saved before stores were named takes the store of the first answer that continues it', () => {
    const tracker = new StateTracker(head(5));
    expect(tracker.observe(from(head(5)), tracker.floor())).toBeUndefined();
    expect(tracker.current).toEqual({ store: A, ...head(5) });
  });

  it('judges an answer against what was known when its request was sent, so concurrent answers may arrive out of order', () => {
    const tracker = new StateTracker({ store: A, ...head(2) });
    const readSentFirst = tracker.floor();
    const writeSentSecond = tracker.floor();
    expect(tracker.observe(from(head(3), 'yes'), writeSentSecond)).toBeUndefined();
    expect(tracker.observe(from(head(2), 'yes'), readSentFirst)).toBeUndefined();
    expect(tracker.observe(from(head(2), 'yes'), tracker.floor())).toMatch(/rollback/);
  });

  it('is saved as a small JSON object and restored from it (toJSON / from)', () => {
    const tracker = new StateTracker();
    expect(JSON.stringify(tracker)).toBe('{"v":2,"heads":{}}');
    tracker.observe(from(head(7)), undefined);
    const saved = JSON.stringify(tracker);
    expect(JSON.parse(saved)).toEqual({ v: 2, shards: 1, heads: { 0: { store: A, seq: 7, hash: 'ab'.repeat(32) } } });
    // Saved before shards (v 1): the head is shard 0's.
    expect(StateTracker.from({ v: 1, newest: { store: A, seq: 7, hash: 'ab'.repeat(32) } }).current).toEqual({ store: A, ...head(7) });
    const restored = StateTracker.from(saved);
    expect(restored.current).toEqual({ store: A, ...head(7) });
    expect(restored.observe(from(head(6), 'no'), restored.floor())).toMatch(/rollback/);
    expect(StateTracker.from({ v: 1 }).current).toBeUndefined();
    expect(() => StateTracker.from('{"v":3}')).toThrow(/not a saved StateTracker/);
    expect(() => StateTracker.from({ v: 1, newest: { store: 'x', seq: 1, hash: 'ab'.repeat(32) } })).toThrow(/invalid head/);
  });
});
