/**
 * A request's API key is looked up once (issue 35 item 3): the enclave's API identifies the
 * caller where the request enters and hands that to the work gate and the handlers, so a
 * batch of 100 memories does not hash and scan the key ring once per memory. Driven through
 * the enclave's API (createApi) as the gRPC server calls it, with a real key ring, memory
 * service and embedder; the lookups are counted where the ring is handed out.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiRequest } from '../../common/proto.js';
import { modelsDir } from '../../common/paths.js';
import { createApi, type EnclaveApi } from '../../enclave/api/create-api.js';
import { ReplayGuard } from '../../enclave/api/replay-guard.js';
import { KeyRing, keyAuthorizer } from '../../enclave/auth/authorizer.js';
import { hashApiKey } from '../../enclave/auth/keys-file.js';
import { ChatService } from '../../enclave/chat/chat-service.js';
import { OFFLINE_MODEL } from '../../enclave/chat/offline-responder.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import { generateIdentity, generateSealedRequestKey } from '../../enclave/keys.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { openReply, SEALED_MAX_AGE_MS, sealRequest } from '../../protocol/sealed.js';

const key = 'key-of-t1-0123456789abcdef';
const ring = new KeyRing([
  { hash: hashApiKey(key), tenants: ['t1'], plaintext: true, scope: {} },
  // Other keys, so a lookup is a scan of several.
  ...Array.from({ length: 9 }, (_, i) => ({ hash: hashApiKey(`other-key-${i}-0123456789abcdef`), tenants: [`o${i}`], plaintext: false, scope: {} })),
]);
let lookups = 0;

const batch = (n: number) => Buffer.from(JSON.stringify({ memories: Array.from({ length: n }, (_, i) => ({ tenant_id: 't1', content: `note ${i} about the printer` })) }));
const request = (fields: Partial<ApiRequest>): ApiRequest =>
  ({ request_id: 'r', method: 'GET', target: '/', body: Buffer.alloc(0), authorization: '', organization: '', known_state: '', ...fields });

describe('an API key is looked up once per request', () => {
  let embedder: Embedder;
  let api: EnclaveApi;
  const sealedKey = generateSealedRequestKey();

  beforeAll(async () => {
    embedder = await loadEmbedder({ name: 'static', modelsDir });
    const memory = new MemoryService(embedder);
    const identity = generateIdentity();
    api = createApi({
      memory,
      chat: new ChatService(memory, undefined, { memoryTopK: 3, toolRounds: 0, toolMaxAdds: 0 }),
      models: { chatModels: [], offlineModel: OFFLINE_MODEL, created: 0 },
      // GET /v1/attestation is not called here.
      attestation: {
        provider: { teeName: 'simulated', attest: async () => new Uint8Array([1]) },
        identity, operatorKey: new Uint8Array(32), boxPublicKey: sealedKey.publicKey, userData: new Uint8Array(), log: pino({ level: 'silent' }),
      },
      identity,
      state: { count: 1, shardOf: () => 0, head: () => ({ seq: 0, hash: '0'.repeat(64) }), storeId: () => '0'.repeat(32), ancestry: () => 'unknown' },
      sealed: { key: sealedKey, replay: new ReplayGuard(SEALED_MAX_AGE_MS) },
      auth: keyAuthorizer(() => {
        lookups++;
        return ring;
      }),
      work: { maxInFlight: 4, maxInFlightPerKey: 4, maxInFlightKeyless: 4, timeoutMs: 30_000, maxStreamMs: 60_000 },
      log: pino({ level: 'silent' }),
    });
  });
  afterAll(async () => {
    await embedder?.close();
  });

  it('a batch of 100 memories: one lookup', async () => {
    lookups = 0;
    const reply = await api.Call(request({ method: 'POST', target: '/v1/memory', body: batch(100), authorization: `Bearer ${key}` }));
    expect(reply.status).toBe(200);
    expect(JSON.parse(Buffer.from(reply.body as Uint8Array).toString()).data).toHaveLength(100);
    expect(lookups).toBe(1);
  });

  it('a batch naming a tenant the key does not hold is refused (403) after one lookup', async () => {
    lookups = 0;
    const body = Buffer.from(JSON.stringify({ memories: [{ tenant_id: 't1', content: 'a' }, { tenant_id: 'o1', content: 'b' }] }));
    const reply = await api.Call(request({ method: 'POST', target: '/v1/memory', body, authorization: `Bearer ${key}` }));
    expect(reply.status).toBe(403);
    expect(lookups).toBe(1);
  });

  it('a sealed batch of 100: one lookup, for the key inside the envelope', async () => {
    lookups = 0;
    const { envelope, nonce, replyKey } = sealRequest(sealedKey.publicKey, {
      method: 'POST', target: '/v1/memory', body: batch(100), authorization: `Bearer ${key}`, timestamp: Date.now(),
    });
    const reply = await api.Call(request({ method: 'POST', target: '/v1/sealed', body: envelope }));
    expect(reply.status).toBe(200);
    const inner = openReply(reply.body as Uint8Array, replyKey, nonce);
    expect(inner.status).toBe(200);
    expect(lookups).toBe(1);
  });

  it('a streamed chat: one lookup', async () => {
    lookups = 0;
    const chunks: Uint8Array[] = [];
    let status: number | undefined;
    const body = Buffer.from(JSON.stringify({ model: OFFLINE_MODEL, stream: true, messages: [{ role: 'user', content: 'what about the printer?' }] }));
    await api.CallStream(request({ method: 'POST', target: '/v1/chat/completions', body, authorization: `Bearer ${key}` }), {
      head: (reply) => {
        status = reply.status;
      },
      data: async (bytes) => {
        chunks.push(bytes);
      },
    }, new AbortController().signal);
    expect(status).toBe(200);
    expect(Buffer.concat(chunks).toString()).toContain('data: [DONE]');
    expect(lookups).toBe(1);
  });
});
