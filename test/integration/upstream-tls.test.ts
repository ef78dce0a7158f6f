import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, UpstreamError } from '../../sdk/client.js';
import { UPSTREAM_HEADER } from '../../protocol/upstream.js';
import { selfSignedCert, spkiPin } from '../helpers/certs.js';
import { startGateway, type GatewayProcess } from '../helpers/gateway.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { startLoneEnclave } from '../helpers/processes.js';
import { freePort, startService, type RunningService } from '../helpers/service.js';

/**
 * Where memories go (issue 34 item 4), with real TLS to a loopback model server whose
 * self-signed certificate the enclave trusts (NODE_EXTRA_CA_CERTS): the signed answer names
 * the model's origin and certificate key; MODEL_TLS_PINS refuses any other key before a
 * byte is sent; clients that require an upstream refuse answers naming another; and
 * MEMORY_UPSTREAM=never keeps every memory from the model.
 */
const TENANT = 'up-tenant-5d1';
const CANARY = 'canary-memory-7f3a9 my cat is called Biscuit';
let dir: string;
let pin: string;
const models: ModelServer[] = [];
const services: RunningService[] = [];
let pinned: { model: ModelServer; svc: RunningService };
let wrongPin: { model: ModelServer; svc: RunningService };
let never: { model: ModelServer; svc: RunningService };
let gateway: GatewayProcess | undefined;

const rootPem = (svc: RunningService) => readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8');
const tee = (svc: RunningService, requireUpstream?: string) =>
  connect({ baseUrl: svc.baseUrl, rootPem: rootPem(svc), insecureSkipPcrPinning: true, ...(requireUpstream ? { requireUpstream } : {}) });
const chat = { model: 'echo', messages: [{ role: 'user', content: 'what is my cat called?' }] };

async function serviceWith(certFile: string, tls: { cert: string; key: string }, env: Record<string, string>) {
  const model = await startModelServer({ tls });
  models.push(model);
  const svc = await startService({ MODEL_BASE_URL: model.url, NODE_EXTRA_CA_CERTS: certFile, MODEL_NAMES: 'echo', ...env });
  services.push(svc);
  return { model, svc };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-upstream-'));
  const tls = await selfSignedCert();
  writeFileSync(join(dir, 'cert.pem'), tls.cert);
  pin = spkiPin(tls.cert);
  const other = Buffer.alloc(32, 9).toString('base64');
  const certFile = join(dir, 'cert.pem');
  [pinned, wrongPin, never] = await Promise.all([
    serviceWith(certFile, tls, { MODEL_TLS_PINS: Buffer.from(pin, 'base64').toString('hex') }),
    serviceWith(certFile, tls, { MODEL_TLS_PINS: other, MODEL_CONNECT_RETRIES: '0' }),
    serviceWith(certFile, tls, { MEMORY_UPSTREAM: 'never' }),
  ]);
  for (const { svc } of [pinned, never]) {
    const client = await tee(svc);
    expect((await client.sealedCall('POST', '/v1/memory', { tenant_id: TENANT, content: CANARY })).status).toBe(200);
  }
}, 120_000);
afterAll(async () => {
  await gateway?.stop();
  await Promise.all(services.map((s) => s.stop()));
  await Promise.all(models.map((m) => m.close()));
  rmSync(dir, { recursive: true, force: true });
});

describe('a chat answer names its upstream', () => {
  it('signs the model\'s origin and the SHA-256 of the certificate key the enclave saw', async () => {
    const origin = new URL(pinned.model.url).origin;
    const answer = await (await tee(pinned.svc)).sealedCall<{ memory_ids: string[] }>('POST', '/v1/chat/completions', chat, { organization: TENANT });
    expect(answer.status).toBe(200);
    expect(answer.upstream).toBe(`${origin} sha256/${pin}`);
    expect(answer.body.memory_ids).toHaveLength(1);
    // And the memory did go there: the upstream named is the one that saw it.
    expect(JSON.stringify(pinned.model.requests.at(-1)?.body)).toContain('canary-memory-7f3a9');
  });

  it('names it in a streamed answer\'s signature too', async () => {
    const stream = await (await tee(pinned.svc)).sealedStream('POST', '/v1/chat/completions', { ...chat, stream: true }, { organization: TENANT });
    for await (const chunk of stream) void chunk;
    expect(stream.verified).toBeDefined();
    expect(stream.headers[UPSTREAM_HEADER]).toBe(`${new URL(pinned.model.url).origin} sha256/${pin}`);
  });

  it('a memory call names none, and the offline responder names local', async () => {
    const client = await tee(pinned.svc);
    expect((await client.call('GET', `/v1/memory?tenant_id=${TENANT}&query=cat`)).upstream).toBe('');
    const local = await client.call('POST', '/v1/chat/completions', { ...chat, model: 'local-memory' }, { organization: TENANT });
    expect(local.status).toBe(200);
    expect(local.upstream).toBe('local');
  });
});

describe('requireUpstream', () => {
  it('the sdk refuses an answer whose prompt went to another upstream, and accepts the named one', async () => {
    const elsewhere = await tee(pinned.svc, 'https://models.elsewhere.example');
    await expect(elsewhere.sealedCall('POST', '/v1/chat/completions', chat, { organization: TENANT })).rejects.toThrow(UpstreamError);
    await expect(elsewhere.sealedCall('POST', '/v1/chat/completions', chat, { organization: TENANT })).rejects.toThrow(/not to the required upstream https:\/\/models\.elsewhere\.example/);
    // Answers that used no model are not refused.
    expect((await elsewhere.sealedCall('GET', `/v1/memory?tenant_id=${TENANT}&query=cat`)).status).toBe(200);
    const here = await tee(pinned.svc, new URL(pinned.model.url).origin);
    expect((await here.sealedCall('POST', '/v1/chat/completions', chat, { organization: TENANT })).status).toBe(200);
  });

  it('agent-gateway --require-upstream answers 502 naming the upstream check', async () => {
    gateway = await startGateway([
      '--service', pinned.svc.baseUrl, '--root', join(pinned.svc.dataDir, 'simulated-root.pem'), '--insecure-dev',
      '--state-file', join(dir, 'gw-state.json'), '--require-upstream', 'https://models.elsewhere.example',
    ]);
    expect(gateway.output()).toContain('✓ upstream: ');
    const res = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', organization_id: TENANT }, body: JSON.stringify(chat),
    });
    expect(res.status).toBe(502);
    const body = await res.json() as { error: { code: string; message: string } };
    expect(body.error.code).toBe('gateway_check_failed');
    expect(body.error.message).toMatch(/upstream check failed/);
    expect(body.error.message).not.toContain('Biscuit');
  });
});

describe('MODEL_TLS_PINS', () => {
  it('refuses a certificate whose key is not pinned: a clear 502, and the model server receives no request', async () => {
    const answer = await (await tee(wrongPin.svc)).sealedCall<{ error: { code: string; message: string } }>('POST', '/v1/chat/completions', chat, { organization: TENANT });
    expect(answer.status).toBe(502);
    expect(answer.body.error.code).toBe('model_tls_pin_mismatch');
    expect(answer.body.error.message).toContain(`sha256/${pin}`);
    expect(wrongPin.model.requests).toHaveLength(0);
  });

  it('without an https MODEL_BASE_URL to pin is a configuration error: one line and exit 2', async () => {
    for (const modelBaseUrl of [undefined, 'http://127.0.0.1:9/v1']) {
      const dataDir = mkdtempSync(join(tmpdir(), 'agent-pins-'));
      const enclave = await startLoneEnclave({ DATA_DIR: dataDir, ENCLAVE_ADDR: `127.0.0.1:${await freePort()}`, MODEL_TLS_PINS: pin, ...(modelBaseUrl ? { MODEL_BASE_URL: modelBaseUrl } : {}) });
      expect(await enclave.exited).toBe(2);
      expect(enclave.output()).toMatch(/MODEL_TLS_PINS needs an https MODEL_BASE_URL/);
      await enclave.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('MEMORY_UPSTREAM=never', () => {
  it('sends the prompt without memories or memory tools, and the signed answer says memories were withheld', async () => {
    const client = await tee(never.svc);
    const answer = await client.sealedCall<{ memory_ids: string[] }>('POST', '/v1/chat/completions', chat, { organization: TENANT });
    expect(answer.status).toBe(200);
    expect(answer.body.memory_ids).toEqual([]);
    expect(answer.upstream).toBe(`${new URL(never.model.url).origin} sha256/${pin} memories-withheld`);
    const stream = await client.sealedStream('POST', '/v1/chat/completions', { ...chat, stream: true }, { organization: TENANT });
    for await (const chunk of stream) void chunk;
    expect(never.model.requests.length).toBeGreaterThanOrEqual(2);
    const sent = JSON.stringify(never.model.requests.map((r) => r.body));
    expect(sent).toContain('what is my cat called?');
    expect(sent).not.toContain('canary-memory-7f3a9');
    expect(sent).not.toContain('search_memory');
    expect(sent).not.toContain('add_memory');
    // The offline responder, inside the enclave, still uses them.
    const local = await client.sealedCall<{ memory_ids: string[] }>('POST', '/v1/chat/completions', { ...chat, model: 'local-memory' }, { organization: TENANT });
    expect(local.upstream).toBe('local');
    expect(local.body.memory_ids).toHaveLength(1);
  });
});
