import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect, ResponseSignatureError, RollbackError, type TeeClient } from '../../sdk/client.js';
import {
  checkSignature, DEFAULT_MAX_SKEW_MS, formatKnownStates, sha256Hex, SIGNATURE_HEADER, STATE_HEADER, StateTracker, STORE_HEADER, TENANT_HEADER, TIMESTAMP_HEADER,
} from '../../protocol/response-signature.js';
import { request } from '../helpers/http.js';
import { startTamperingRelay, type Exchange, type TamperingRelay } from '../helpers/relay.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * Signed responses against the real two processes: every answer from the enclave is
 * signed, and a host that alters an answer, or hands back the answer to another
 * request, is caught by the sdk client.
 */
let svc: RunningService;
let relay: TamperingRelay;
let rootPem: string;
let direct: TeeClient;
/** A client whose every request goes through the tampering relay in front of the proxy. */
let relayed: TeeClient;

beforeAll(async () => {
  svc = await startService();
  rootPem = readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8');
  relay = await startTamperingRelay(svc.baseUrl);
  direct = await connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem });
  relayed = await connect({ insecureSkipPcrPinning: true, baseUrl: relay.baseUrl, rootPem });
});
afterEach(() => {
  relay.tamper = (exchange) => exchange;
  relay.tamperRequest = (req) => req;
  relay.tamperHeaders = (headers) => headers;
});
afterAll(async () => {
  await relay?.close();
  await svc?.stop();
});

function copyDir(dir: string): string {
  const copy = mkdtempSync(join(tmpdir(), 'agent-rollback-'));
  cpSync(dir, copy, { recursive: true });
  return copy;
}

describe('every answer from the enclave is signed', () => {
  it('memory add, query, get and delete, and attestation, verify with the attested key', async () => {
    const added = await direct.call<{ id: string }>('POST', '/v1/memory', { tenant_id: 'sig-t1', content: 'The heron nests by the mill pond.' });
    expect(added.status).toBe(200);
    const id = added.body.id;
    const queried = await direct.call<{ data: { id: string }[] }>('GET', '/v1/memory?tenant_id=sig-t1&query=heron&top_k=2');
    expect(queried.body.data[0].id).toBe(id);
    expect((await direct.call('GET', `/v1/memory/${id}?tenant_id=sig-t1`)).status).toBe(200);
    expect((await direct.call('DELETE', `/v1/memory/${id}?tenant_id=sig-t1`)).status).toBe(200);
    const attestation = await direct.call('GET', '/v1/attestation');
    expect(attestation.status).toBe(200);
    expect(attestation.signedAt.getTime()).toBeGreaterThan(Date.now() - 60_000);
  });

  it('errors the enclave decides are signed too (404 for a memory that is not there)', async () => {
    const missing = await direct.call<{ error: { code: string } }>('GET', '/v1/memory/mem_nope?tenant_id=sig-t1');
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('memory_not_found');
    expect(missing.headers[SIGNATURE_HEADER]).toMatch(/^[A-Za-z0-9+/]{86}==$/);
  });

  it('the signature binds the organization header', async () => {
    const res = await request(svc.baseUrl, 'GET', '/v1/attestation', undefined, { organization_id: 'org-a' });
    const sig = { signature: res.headers.get(SIGNATURE_HEADER)!, timestamp: res.headers.get(TIMESTAMP_HEADER)!, state: res.headers.get(STATE_HEADER)!, store: res.headers.get(STORE_HEADER)!, shard: res.headers.get('x-tee-shard')! };
    const answer = { status: res.status, bodySha256: sha256Hex(Buffer.from(res.text)) };
    const asked = { method: 'GET', target: '/v1/attestation', body: new Uint8Array() };
    const key = direct.attestation.teePublicKey;
    expect(checkSignature(key, { ...asked, organization: 'org-a' }, answer, sig).ok).toBe(true);
    expect(checkSignature(key, { ...asked, organization: 'org-b' }, answer, sig).ok).toBe(false);
    expect(checkSignature(key, asked, answer, sig).ok).toBe(false);
  });

  it('what the host answers by itself (a request refused by the proxy) is reported as not signed', async () => {
    // top_k=0 is refused by the proxy's own validation: the enclave never sees it.
    const error = await direct.call('GET', '/v1/memory?tenant_id=sig-t1&query=x&top_k=0').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResponseSignatureError);
    expect((error as ResponseSignatureError).status).toBe(400);
    expect((error as Error).message).toMatch(/has no x-tee-signature header: it was not signed by the enclave/);
  });
});

describe('a host that tampers with answers (an HTTP relay in front of the proxy)', () => {
  it('passes honest answers through: the relayed client verifies them', async () => {
    const res = await relayed.call('POST', '/v1/memory', { tenant_id: 'sig-t2', content: 'Keys are under the flowerpot.' });
    expect(res.status).toBe(200);
  });

  it('one flipped byte in a response body is detected', async () => {
    let flipped = false;
    relay.tamper = (exchange) => {
      if (!exchange.url.startsWith('/v1/memory')) return exchange;
      const body = Buffer.from(exchange.body);
      const at = body.indexOf('flowerpot');
      expect(at).toBeGreaterThan(0);
      body[at] ^= 0x20; // 'f' → 'F': still valid JSON, one byte different
      flipped = true;
      return { ...exchange, body };
    };
    const error = await relayed.call('GET', '/v1/memory?tenant_id=sig-t2&query=keys').catch((e: unknown) => e);
    expect(flipped).toBe(true);
    expect(error).toBeInstanceOf(ResponseSignatureError);
    expect((error as Error).message).toMatch(/does not verify with the enclave's key for GET \/v1\/memory\?tenant_id=sig-t2&query=keys/);
    expect((error as ResponseSignatureError).body).toContain('Flowerpot');
  });

  it('the host re-sends a request with another caller\'s key: the answer, though validly signed, is refused by the caller who sent it (finding 3)', async () => {
    const bob = await connect({ insecureSkipPcrPinning: true, baseUrl: relay.baseUrl, rootPem, authorization: 'Bearer bob-key' });
    await direct.call('POST', '/v1/memory', { tenant_id: 'sig-keys', content: 'Alice keeps the spare key under the flowerpot.' });
    // The host swaps Bob's key for Alice's (seen on her plain calls): the enclave acts for Alice and signs that.
    relay.tamperHeaders = (headers) => ({ ...headers, authorization: 'Bearer alice-key' });
    const error = await bob.call('GET', '/v1/memory?tenant_id=sig-keys&query=spare%20key').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResponseSignatureError);
    expect((error as Error).message).toMatch(/another target, body, organization, API key or known state/);
    // Unswapped, Bob's own request verifies.
    relay.tamperHeaders = (headers) => headers;
    expect((await bob.call('GET', '/v1/memory?tenant_id=sig-keys&query=spare%20key')).status).toBe(200);
  });

  it('the tenant the enclave acted for is signed: a relay that renames it is caught (finding 3)', async () => {
    await direct.call('POST', '/v1/memory', { tenant_id: 'sig-tenant', content: 'The tenant header is signed.' });
    const plain = await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=sig-tenant&query=signed');
    expect(plain.headers.get(TENANT_HEADER)).toBe('sig-tenant');
    relay.tamper = (exchange) => ({ ...exchange, headers: { ...exchange.headers, [TENANT_HEADER]: 'someone-else' } });
    await expect(relayed.call('GET', '/v1/memory?tenant_id=sig-tenant&query=signed')).rejects.toThrow(ResponseSignatureError);
  });

  it('a changed status is detected (a signed 404 passed off as 200)', async () => {
    relay.tamper = (exchange) => ({ ...exchange, status: exchange.status === 404 ? 200 : exchange.status });
    await expect(relayed.call('GET', '/v1/memory/mem_nope?tenant_id=sig-t2')).rejects.toThrow(/status 200.*does not verify|does not verify.*status 200/);
  });

  it('a stripped signature is detected', async () => {
    relay.tamper = (exchange) => {
      const headers = { ...exchange.headers };
      delete headers[SIGNATURE_HEADER];
      return { ...exchange, headers };
    };
    await expect(relayed.call('GET', '/v1/attestation')).rejects.toThrow(/has no x-tee-signature header/);
  });

  it('a signed answer to one request does not verify as the answer to another', async () => {
    await relayed.call('POST', '/v1/memory', { tenant_id: 'sig-t3', content: 'Tenant three likes green tea.' });
    // Record the signed answer to tenant t3's query, then hand it back for tenant t4's.
    let recorded: Exchange | undefined;
    relay.tamper = (exchange) => {
      if (exchange.url.includes('tenant_id=sig-t3')) recorded = exchange;
      else if (exchange.url.includes('tenant_id=sig-t4') && recorded) return { ...recorded, url: exchange.url };
      return exchange;
    };
    const knownState = formatKnownStates(relayed.stateFloor()!);
    const own = await relayed.call<{ data: { content: string }[] }>('GET', '/v1/memory?tenant_id=sig-t3&query=tea');
    expect(own.body.data[0].content).toBe('Tenant three likes green tea.');
    expect(recorded).toBeDefined();
    const error = await relayed.call('GET', '/v1/memory?tenant_id=sig-t4&query=tea').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResponseSignatureError);
    expect((error as Error).message).toMatch(/does not verify .*or the reply belongs to another request/);
    // The recorded answer is intact and still verifies as the answer to its own request.
    expect(checkSignature(
      relayed.attestation.teePublicKey,
      { method: 'GET', target: '/v1/memory?tenant_id=sig-t3&query=tea', knownState, body: new Uint8Array() },
      { status: recorded!.status, bodySha256: sha256Hex(recorded!.body) },
      {
        signature: recorded!.headers[SIGNATURE_HEADER], timestamp: recorded!.headers[TIMESTAMP_HEADER], state: recorded!.headers[STATE_HEADER],
        store: recorded!.headers[STORE_HEADER], shard: recorded!.headers['x-tee-shard'], ancestor: recorded!.headers['x-tee-ancestor'] as 'yes', tenant: recorded!.headers[TENANT_HEADER],
      },
    ).ok).toBe(true);
  });

  it('the same goes for a POST answered with the signed answer of another POST', async () => {
    let first: Exchange | undefined;
    relay.tamper = (exchange) => {
      if (exchange.method !== 'POST') return exchange;
      if (!first) return (first = exchange);
      return first;
    };
    await relayed.call('POST', '/v1/memory', { tenant_id: 'sig-t5', content: 'first' });
    await expect(relayed.call('POST', '/v1/memory', { tenant_id: 'sig-t5', content: 'second' })).rejects.toThrow(ResponseSignatureError);
  });

  it('an altered plain request is carried out, but its answer does not verify for what the client sent', async () => {
    relay.tamperRequest = (req) => ({ ...req, body: Buffer.from(req.body.toString().replace('Tuesday', 'Friday')) });
    const error = await relayed.call('POST', '/v1/memory', { tenant_id: 'sig-t6', content: 'The plumber comes on Tuesday.' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResponseSignatureError);
    expect((error as ResponseSignatureError).body).toContain('Friday');
    // The write happened: plain requests are not protected against a host that rewrites them (sealed ones are).
    relay.tamperRequest = (req) => req;
    const stored = await direct.call<{ data: { content: string }[] }>('GET', '/v1/memory?tenant_id=sig-t6&query=plumber');
    expect(stored.body.data[0].content).toBe('The plumber comes on Friday.');
  });

  it('known limit: the signed answer to an identical plain request can be replayed within the clock-skew window, until the client sees a newer state', async () => {
    const target = '/v1/memory?tenant_id=sig-t7&query=tea';
    let recorded: Exchange | undefined;
    relay.tamper = (exchange) => (exchange.method === 'GET' && exchange.url === target ? (recorded ??= exchange) : exchange);
    // The client's newest head is the current one, so its next requests name the same known state.
    await relayed.call('GET', '/v1/memory?tenant_id=sig-t7&query=warm');
    const knownState = formatKnownStates(relayed.stateFloor()!);
    const first = await relayed.call<{ data: unknown[] }>('GET', target);
    expect(first.body.data).toEqual([]);
    // Another client writes: this one has not seen the newer state, so the old answer still verifies.
    await direct.call('POST', '/v1/memory', { tenant_id: 'sig-t7', content: 'Tenant seven likes tea.' });
    const replayed = await relayed.call<{ data: unknown[] }>('GET', target);
    expect(replayed.body.data).toEqual([]);
    expect(replayed.signedAt).toEqual(first.signedAt);
    expect((await direct.call<{ data: unknown[] }>('GET', target)).body.data).toHaveLength(1);
    // Once this client has seen a newer state (any answer after the write), the old answer is refused.
    await relayed.call('GET', '/v1/memory?tenant_id=sig-t7&query=coffee');
    // Its request now names the newer head (x-tee-known-state), which the old answer's signature does not cover.
    const refused = await relayed.call('GET', target).then(() => undefined, (e: unknown) => e);
    expect(refused).toBeInstanceOf(ResponseSignatureError);
    expect((refused as Error).message).toMatch(/known state/);
    // Past the window (5 minutes by default) the same answer is refused as stale.
    const check = checkSignature(
      relayed.attestation.teePublicKey,
      { method: 'GET', target, knownState, body: new Uint8Array() },
      { status: recorded!.status, bodySha256: sha256Hex(recorded!.body) },
      {
        signature: recorded!.headers[SIGNATURE_HEADER], timestamp: recorded!.headers[TIMESTAMP_HEADER], state: recorded!.headers[STATE_HEADER],
        store: recorded!.headers[STORE_HEADER], shard: recorded!.headers['x-tee-shard'], ancestor: recorded!.headers['x-tee-ancestor'] as 'yes', tenant: recorded!.headers[TENANT_HEADER],
      },
      { now: first.signedAt.getTime() + DEFAULT_MAX_SKEW_MS + 1 },
    );
    expect(check).toEqual({ ok: false, reason: expect.stringMatching(/replayed or stale/) });
  });
});

/**
 * A rolled-back store, in steps with their own budgets (restarting the host store and the
 * enclave takes seconds alone and much longer with both cores busy): the host restarts the
 * enclave on an older copy of DATA_DIR; a client that saw the newer state refuses it.
 */
describe('a rolled-back store', () => {
  const RESTART_BUDGET = 180_000;
  const tracker = new StateTracker();
  let deletedId: string;
  let older: string;
  let newestSeq: number;

  afterAll(() => {
    if (older) rmSync(older, { recursive: true, force: true });
  });

  it('a client writes, the host copies DATA_DIR, then the client deletes a memory', async () => {
    const client = await connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem, stateTracker: tracker });
    expect((await client.call('POST', '/v1/memory', { tenant_id: 'sig-rb', content: 'The first thing I said.' })).status).toBe(200);
    const deleted = await client.call<{ id: string }>('POST', '/v1/memory', { tenant_id: 'sig-rb', content: 'Delete this secret later.' });
    deletedId = deleted.body.id;
    older = copyDir(svc.dataDir);
    expect((await client.call('DELETE', `/v1/memory/${deletedId}?tenant_id=sig-rb`)).status).toBe(200);
    newestSeq = tracker.current!.seq;
  });

  it('the host swaps in the older copy and restarts the host store and the enclave, which recovers it happily', async () => {
    await svc.killEnclave('SIGKILL');
    await svc.killHostStore('SIGKILL');
    rmSync(svc.dataDir, { recursive: true, force: true });
    cpSync(older, svc.dataDir, { recursive: true });
    await svc.startHostStore();
    await svc.startEnclave();
  }, RESTART_BUDGET);

  it('a plain client sees the deleted memory again, at an older state', async () => {
    const plain = await request(svc.baseUrl, 'GET', `/v1/memory/${deletedId}?tenant_id=sig-rb`);
    expect(plain.status).toBe(200);
    expect(Number(plain.headers.get(STATE_HEADER)!.split(':')[0])).toBeLessThan(newestSeq);
  });

  it('a client that remembers the newer head refuses the older state, from attestation on', async () => {
    const err = await connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem, stateTracker: tracker }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(RollbackError);
    expect((err as RollbackError).message).toMatch(/older than state \d+ this client has already seen/);
  });

  it('a client that never saw the newer state (a new tracker) cannot know (documented)', async () => {
    const naive = await connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem, stateTracker: new StateTracker() });
    expect((await naive.call('GET', `/v1/memory/${deletedId}?tenant_id=sig-rb`)).status).toBe(200);
  });
});
