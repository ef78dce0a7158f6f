import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import nacl from 'tweetnacl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, ResponseSignatureError, SealedCallError, TeeClient } from '../../sdk/client.js';
import { openReply, SEALED_MAX_AGE_MS, sealRequest } from '../../protocol/sealed.js';
import { expectError, request } from '../helpers/http.js';
import { startRecordingRelay, startTamperingRelay, type RecordingRelay } from '../helpers/relay.js';
import { startService, type RunningService } from '../helpers/service.js';
import { undiciTransport } from '../../sdk/transport.js';
import { logsCaughtUp } from '../helpers/log-barrier.js';

/**
 * Sealed requests against the real two processes, with a recording TCP relay on each
 * side of the proxy: client ⇄ [front relay] ⇄ proxy ⇄ [back relay] ⇄ enclave. The relays
 * see every byte the host sees, in both directions.
 */
let svc: RunningService;
let front: RecordingRelay;
let back: RecordingRelay | undefined;
let tee: TeeClient;
let frontUrl: string;

// Secrets that must never cross the host in the clear.
const SECRET = {
  content: 'Bartholomew buried the emerald beneath the lighthouse stairs.',
  query: 'where did Bartholomew hide the emerald',
  tenant: 'tenant-sealed-5f2c9a',
};
// The same kind of data, sent in the clear: the relays must see these (a positive control).
const PLAIN = { content: 'Quentin parks the tractor behind the granary.', tenant: 'tenant-plain-81d7e3' };

const seen = (needle: string) => {
  const hits: string[] = [];
  for (const [name, bytes] of [
    ['client → proxy', front.upstream()], ['proxy → client', front.downstream()],
    ['proxy → enclave', back!.upstream()], ['enclave → proxy', back!.downstream()],
  ] as const) {
    if (bytes.includes(Buffer.from(needle, 'utf8'))) hits.push(name);
  }
  return hits;
};

beforeAll(async () => {
  svc = await startService({}, {
    proxyEnclaveAddr: async (enclaveAddr) => {
      back = await startRecordingRelay(enclaveAddr);
      return back.address;
    },
  });
  front = await startRecordingRelay(svc.baseUrl.replace('http://', ''));
  frontUrl = `http://${front.address}`;
  tee = await connect({ insecureSkipPcrPinning: true, baseUrl: frontUrl, rootPem: readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8') });
});
afterAll(async () => {
  await front?.close();
  await svc?.stop();
  await back?.close();
});

describe('the host relays sealed calls without seeing their plaintext', () => {
  it('a sealed store and a sealed query succeed, and no memory content, query or tenant id crosses the host in the clear', async () => {
    const stored = await tee.sealedCall<{ id: string; tenant_id: string }>('POST', '/v1/memory', { tenant_id: SECRET.tenant, content: SECRET.content });
    expect(stored.status).toBe(200);
    expect(stored.body.tenant_id).toBe(SECRET.tenant);

    const target = `/v1/memory?tenant_id=${SECRET.tenant}&query=${encodeURIComponent(SECRET.query)}&top_k=1`;
    const found = await tee.sealedCall<{ data: { id: string; content: string }[] }>('GET', target);
    expect(found.status).toBe(200);
    expect(found.body.data[0]).toMatchObject({ id: stored.body.id, content: SECRET.content });
    // The inner answer carries the enclave's signature too (checked by sealedCall).
    expect(found.headers['x-tee-signature']).toBeDefined();

    // Both relays carried the traffic…
    for (const bytes of [front.upstream(), front.downstream(), back!.upstream(), back!.downstream()]) expect(bytes.length).toBeGreaterThan(1000);
    expect(front.upstream().includes(Buffer.from('POST /v1/sealed HTTP/1.1'))).toBe(true);
    // …and saw none of it.
    for (const needle of [SECRET.content, SECRET.query, encodeURIComponent(SECRET.query), SECRET.tenant, 'Bartholomew', 'emerald', 'lighthouse']) {
      expect(seen(needle), needle).toEqual([]);
    }
    // Nor which operation was asked for.
    expect(seen('/v1/memory')).toEqual([]);
  });

  it('the same data sent plainly is visible to both relays, in both directions (so the recording would catch a leak)', async () => {
    await tee.call('POST', '/v1/memory', { tenant_id: PLAIN.tenant, content: PLAIN.content });
    expect(seen(PLAIN.content).sort()).toEqual(['client → proxy', 'enclave → proxy', 'proxy → client', 'proxy → enclave']);
    expect(seen(PLAIN.tenant)).toHaveLength(4);
  });

  it('an error inside a sealed call comes back sealed: the host sees a 200 envelope', async () => {
    const missing = await tee.sealedCall<{ error: { code: string } }>('GET', `/v1/memory/mem_nope?tenant_id=${SECRET.tenant}`);
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('memory_not_found');
    const invalid = await tee.sealedCall<{ error: { param: string } }>('POST', '/v1/memory', { tenant_id: SECRET.tenant });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error.param).toBe('content');
    const noRoute = await tee.sealedCall<{ error: { code: string } }>('POST', '/v1/sealed', {});
    expect(noRoute.status).toBe(404);
    expect(noRoute.body.error.code).toBe('unknown_route');
    expect(seen('memory_not_found')).toEqual([]);
  });

  it('a streamed chat sent as a unary sealed call: 400 stream_mismatch, sealed, naming the sealed stream route', async () => {
    const mismatch = await tee.sealedCall<{ error: { code: string; message: string; param: string } }>('POST', '/v1/chat/completions',
      { model: 'local-memory', stream: true, messages: [{ role: 'user', content: 'hello' }] });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.error).toMatchObject({ code: 'stream_mismatch', param: 'stream' });
    expect(mismatch.body.error.message).toContain('/v1/sealed/stream');
    expect(seen('stream_mismatch')).toEqual([]);
  });

  it('a sealed body up to the 1 MiB request limit fits through the proxy (the envelope is its bytes, padded to 64 KiB)', async () => {
    const body = JSON.stringify({ tenant_id: SECRET.tenant, content: 'x'.repeat(1024 * 1024 - 60) });
    expect(body.length).toBeLessThanOrEqual(1024 * 1024);
    // It reaches the enclave, which refuses the content as too long, inside the sealed reply.
    const tooLong = await tee.sealedCall<{ error: { code: string; param: string } }>('POST', '/v1/memory', body);
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error).toMatchObject({ code: 'string_above_max_length', param: 'content' });
  });
});

/** POST /v1/sealed with `body` as application/octet-stream (or `type`): the status, the bytes, and the JSON of a refusal. */
async function postBytes(body: Uint8Array, type = 'application/octet-stream', baseUrl = frontUrl) {
  const res = await fetch(`${baseUrl}/v1/sealed`, { method: 'POST', headers: { 'content-type': type }, body });
  const bytes = new Uint8Array(await res.arrayBuffer());
  const text = Buffer.from(bytes).toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, bytes, body: parsed as never, text };
}

describe('replayed, altered and malformed envelopes fail cleanly (4xx, OpenAI error shape)', () => {
  const boxKey = () => tee.attestation.boxPublicKey;
  const post = (envelope: Uint8Array) => postBytes(envelope);
  const fresh = (extra: Partial<Parameters<typeof sealRequest>[1]> = {}) => sealRequest(boxKey(), {
    method: 'POST', target: '/v1/memory', body: Buffer.from(JSON.stringify({ tenant_id: SECRET.tenant, content: 'replay me' })), timestamp: Date.now(), ...extra,
  });

  it('a recorded envelope sent again is refused with 409, and its memory is stored once', async () => {
    const { envelope, nonce, replyKey } = fresh();
    const first = await post(envelope);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toBe('application/octet-stream');
    expect(openReply(first.bytes, replyKey, nonce).status).toBe(200);
    expectError(await post(envelope), 409, 'sealed_request_replayed');
    const count = await tee.sealedCall<{ data: { content: string }[] }>('GET', `/v1/memory?tenant_id=${SECRET.tenant}&query=replay%20me&top_k=10`);
    expect(count.body.data.filter((m) => m.content === 'replay me')).toHaveLength(1);
  });

  it('one flipped bit in the box, nonce or client key: 400 sealed_open_failed', async () => {
    for (const at of [56 + 40, 32 + 5, 5]) {
      const { envelope } = fresh();
      envelope[at] ^= 0x01;
      expectError(await post(envelope), 400, 'sealed_open_failed');
    }
  });

  it('sealed to another key, or too old: 400', async () => {
    const other = sealRequest(nacl.box.keyPair().publicKey, { method: 'GET', target: '/v1/attestation', body: new Uint8Array(), timestamp: Date.now() });
    expectError(await post(other.envelope), 400, 'sealed_open_failed');
    expectError(await post(fresh({ timestamp: Date.now() - SEALED_MAX_AGE_MS - 60_000 }).envelope), 400, 'sealed_request_expired');
  });

  it('malformed envelopes are refused by the proxy and by the enclave, never with a 500', async () => {
    const { envelope } = fresh();
    const SHORT = (n: number) => `the sealed request is ${n} bytes, shorter than a client public key (32), a nonce (24) and a box (at least 16)`;
    // The shape, checked by the proxy (all the host can check): its refusal is unsigned, so the enclave never saw it.
    for (const length of [1, 56, 71]) {
      const short = await post(envelope.subarray(0, length));
      expect(expectError(short, 400, 'invalid_sealed_request').message).toBe(SHORT(length));
      expect(short.headers.get('x-tee-signature')).toBeNull();
    }
    const smallOrder = await post(Buffer.concat([Buffer.alloc(32), envelope.subarray(32)]));
    expect(expectError(smallOrder, 400, 'invalid_sealed_request').message).toBe('the sealed request\'s client public key is not a canonical X25519 key of large order');
    expect(smallOrder.headers.get('x-tee-signature')).toBeNull();
    // Junk after the box, or its last byte cut: the box no longer opens (the enclave, signed).
    const junk = await post(Buffer.concat([envelope, Buffer.from('junk')]));
    expectError(junk, 400, 'sealed_open_failed');
    expect(junk.headers.get('x-tee-signature')).not.toBeNull();
    expectError(await post(envelope.subarray(0, envelope.length - 1)), 400, 'sealed_open_failed');
    // No body at all: with the content type, too short; without one, the content type is named.
    expect(expectError(await post(new Uint8Array()), 400, 'invalid_sealed_request').message).toBe(SHORT(0));
    const bare = await fetch(`${frontUrl}/v1/sealed`, { method: 'POST' });
    expect(bare.status).toBe(415);
    expect(((await bare.json()) as { error: { message: string } }).error.message).toMatch(/^POST \/v1\/sealed takes a body of Content-Type application\/octet-stream/);
    // An envelope larger than the route's limit: 413 from the proxy, counted on the bytes (sent
    // straight to the proxy: it answers before reading it all, and the relay would reset the rest).
    const huge = Buffer.concat([envelope, Buffer.alloc(1280 * 1024)]);
    const tooLarge = await postBytes(huge, 'application/octet-stream', svc.baseUrl);
    expect(expectError(tooLarge, 413, 'too_large').message).toBe(`request body is larger than ${1280 * 1024} bytes`);
  });

  it('the JSON envelope of earlier versions gets 415 naming the content type now taken; octet-stream elsewhere gets 415 too', async () => {
    const { envelope } = fresh();
    const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
    const json = JSON.stringify({ client_public_key: b64(envelope.subarray(0, 32)), nonce: b64(envelope.subarray(32, 56)), ciphertext: b64(envelope.subarray(56)) });
    const refused = expectError(await request(frontUrl, 'POST', '/v1/sealed', json), 415, 'unsupported_media_type');
    expect(refused.message).toBe('POST /v1/sealed takes a body of Content-Type application/octet-stream: the sealed envelope as bytes (client public key ‖ nonce ‖ box; docs/api.md, Sealed requests), not JSON');
    expectError(await request(frontUrl, 'POST', '/v1/sealed/stream', json), 415, 'unsupported_media_type');
    // The envelope's bytes sent as JSON are refused alike (the proxy never parses them).
    expectError(await postBytes(envelope, 'application/json'), 415, 'unsupported_media_type');
    // A JSON route does not take bytes.
    const bytes = await fetch(`${frontUrl}/v1/memory`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: envelope });
    expect(bytes.status).toBe(415);
    expect(((await bytes.json()) as { error: { message: string } }).error.message).toBe('Content-Type must be application/json');
  });

  it('the sdk turns a refused envelope into a SealedCallError naming the reason', async () => {
    // A client that believes in a stale box key (e.g. from before an enclave restart).
    const stale = new TeeClient({ baseUrl: frontUrl, insecureSkipPcrPinning: true }, undiciTransport, { ...tee.attestation, boxPublicKey: nacl.box.keyPair().publicKey });
    const error = await stale.sealedCall('GET', '/v1/attestation').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SealedCallError);
    expect((error as SealedCallError).status).toBe(400);
    expect((error as Error).message).toMatch(/sealed_open_failed/);
  });

  it('the host learns neither what a sealed call did (its log shows only Sealed) nor its exact size (padded to buckets)', async () => {
    const inLog = (route: string) => svc.output().split('\n').filter((line) => line.includes(`"route":"${route}"`)).length;
    const added = inLog('AddMemory');
    const queried = inLog('ListMemories');
    const sealed = inLog('Sealed');
    const sizes: number[] = [];
    const recorder = async (content: string) => {
      const { envelope } = sealRequest(tee.attestation.boxPublicKey, {
        method: 'POST', target: '/v1/memory', body: Buffer.from(JSON.stringify({ tenant_id: SECRET.tenant, content })), timestamp: Date.now(),
      });
      sizes.push(envelope.length);
      const res = await post(envelope);
      expect(res.status).toBe(200);
      sizes.push(res.bytes.length);
    };
    await recorder('short');
    await recorder(`a somewhat longer memory about the lighthouse keeper and the harbour ${'x'.repeat(100)}`);
    await tee.sealedCall('GET', `/v1/memory?tenant_id=${SECRET.tenant}&query=lighthouse`);
    await logsCaughtUp(svc.baseUrl, svc.output);
    expect(inLog('AddMemory')).toBe(added);
    expect(inLog('ListMemories')).toBe(queried);
    expect(inLog('Sealed')).toBeGreaterThanOrEqual(sealed + 3);
    // Both requests and both replies have the same sizes on the wire, whatever their content:
    // a bucket of 1 KiB and the 72 (request) or 40 (reply) bytes of key, nonce and MAC.
    expect(sizes).toEqual([1024 + 72, 1024 + 40, 1024 + 72, 1024 + 40]);
  });

  it('nothing above made either process answer 5xx or hit an unexpected error', () => {
    // (Health checks during start-up answer 503 until the enclave is up: not counted.)
    const failures = svc.output().split('\n').filter((line) => /"status":5\d\d/.test(line) && !line.includes('"/healthz"'));
    expect(failures).toEqual([]);
    expect(svc.output()).not.toMatch(/unexpected error/);
    expect(svc.output()).toMatch(/"route":"Sealed","status":409/);
  });
});

describe('a host that answers a sealed call with an older sealed answer, or an altered one', () => {
  it('is refused by the sdk: the caller gets an error, never the other answer\'s content', async () => {
    const relay = await startTamperingRelay(svc.baseUrl);
    try {
      const client = await connect({ insecureSkipPcrPinning: true, baseUrl: relay.baseUrl, rootPem: readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8') });
      const secret = 'The older answer names the amber lantern';
      await client.sealedCall('POST', '/v1/memory', { tenant_id: SECRET.tenant, content: secret });
      // Record a genuine sealed answer that holds the secret.
      let recorded: Buffer | undefined;
      relay.tamper = (exchange) => {
        if (exchange.url === '/v1/sealed') recorded = exchange.body;
        return exchange;
      };
      const genuine = await client.sealedCall<{ data: { content: string }[] }>('GET', `/v1/memory?tenant_id=${SECRET.tenant}&query=amber%20lantern`);
      expect(genuine.body.data.map((m) => m.content)).toContain(secret);

      // Replayed to a later call (which asks for something else): it does not open under that call's key.
      relay.tamper = (exchange) => (exchange.url === '/v1/sealed' ? { ...exchange, body: recorded! } : exchange);
      const replayed = await client.sealedCall('GET', `/v1/memory?tenant_id=${SECRET.tenant}&query=nothing%20here`).then(() => undefined, (e: unknown) => e);
      expect(replayed).toBeInstanceOf(Error);
      expect(String(replayed)).not.toContain('amber');

      // Replayed to the same call made again: the client seals both with one key pair (the
      // inner signature covers the same request and state), so only the reply's binding to
      // its request's nonce tells the old answer from the new one.
      const again = await client.sealedCall('GET', `/v1/memory?tenant_id=${SECRET.tenant}&query=amber%20lantern`).then(() => undefined, (e: unknown) => e);
      expect(again).toBeInstanceOf(SealedCallError);
      expect(String(again)).toMatch(/answers another request/);

      // One bit of the sealed answer flipped: refused too.
      relay.tamper = (exchange) => {
        if (exchange.url !== '/v1/sealed') return exchange;
        const bytes = Buffer.from(exchange.body);
        bytes[bytes.length >> 1] ^= 0x01;
        return { ...exchange, body: bytes };
      };
      const flipped = await client.sealedCall('GET', `/v1/memory?tenant_id=${SECRET.tenant}&query=amber%20lantern`).then(() => undefined, (e: unknown) => e);
      expect(flipped).toBeInstanceOf(Error);
      expect(String(flipped)).not.toContain('amber');

      // Untouched again, the same client works.
      relay.tamper = (exchange) => exchange;
      expect((await client.sealedCall('GET', `/v1/memory?tenant_id=${SECRET.tenant}&query=amber%20lantern`)).status).toBe(200);
    } finally {
      await relay.close();
    }
  });
});

describe('keys live only in the enclave process', () => {
  it('after the enclave restarts it has new signing and box keys: old clients fail closed and must attest again', async () => {
    const before = tee.attestation;
    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    const again = await connect({ insecureSkipPcrPinning: true, baseUrl: frontUrl, rootPem: readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8') });
    expect(Buffer.from(again.attestation.teePublicKey)).not.toEqual(Buffer.from(before.teePublicKey));
    expect(Buffer.from(again.attestation.boxPublicKey)).not.toEqual(Buffer.from(before.boxPublicKey));
    // The operator key and the simulated root are configuration, not enclave secrets: they stay.
    expect(again.attestation.operatorKey).toEqual(before.operatorKey);

    await expect(tee.call('GET', '/v1/attestation')).rejects.toThrow(/does not verify with the enclave's key/);
    // (The enclave refuses the envelope sealed to the old key, under its new signature.)
    await expect(tee.sealedCall('GET', '/v1/attestation')).rejects.toThrow(ResponseSignatureError);
    expect((await again.sealedCall('GET', '/v1/attestation')).status).toBe(200);
  });
});
