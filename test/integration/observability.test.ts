import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { connect } from '../../sdk/client.js';
import { issueKey } from '../helpers/processes.js';
import { has, parseExposition, total } from '../helpers/prometheus.js';
import { startService, type RunningService } from '../helpers/service.js';
import { logsCaughtUp } from '../helpers/log-barrier.js';

const TENANT = 'tenant-obs-7c1e';
const CONTENT = 'The pelican codeword is zanzibar-4471';

let svc: RunningService;
const api = (method: string, path: string, body?: unknown, headers?: Record<string, string>) => request(svc.baseUrl, method, path, body, headers);

async function scrape() {
  const res = await fetch(`${svc.baseUrl}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  return { text, samples: parseExposition(text) };
}

beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.stop();
});

describe('GET /metrics', () => {
  let memoryId: string;

  it('serves the proxy\'s and the enclave\'s series, and their counts move with requests', async () => {
    const before = await scrape();
    const added = await api('POST', '/v1/memory', { content: CONTENT, tenant_id: TENANT });
    expect(added.status).toBe(200);
    memoryId = added.body.id;
    expect((await api('POST', '/v1/memory/search', { query: 'pelican codeword', tenant_id: TENANT })).status).toBe(200);
    expect((await api('GET', `/v1/memory/${memoryId}?tenant_id=${TENANT}`)).status).toBe(200);
    expect((await api('GET', '/v1/memory/mem_00000000000000000000000000000000?tenant_id=nobody')).status).toBe(404);
    const chat = await fetch(`${svc.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', organization_id: TENANT },
      body: JSON.stringify({ model: 'local-memory', stream: true, messages: [{ role: 'user', content: 'what is the pelican codeword?' }] }),
    });
    expect(await chat.text()).toContain('data: [DONE]');
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string>) => total(after.samples, name, labels) - total(before.samples, name, labels);

    // The proxy: by route-table name, method and status; never the raw URL.
    expect(delta('agent_proxy_http_requests_total', { route: 'AddMemory', method: 'POST', status: '200' })).toBe(1);
    expect(delta('agent_proxy_http_requests_total', { route: 'GetMemory', status: '200' })).toBe(1);
    expect(delta('agent_proxy_http_requests_total', { route: 'GetMemory', status: '404' })).toBe(1);
    expect(delta('agent_proxy_http_requests_total', { route: 'ChatCompletion', status: '200' })).toBe(1);
    expect(delta('agent_proxy_http_request_duration_seconds_count', { route: 'SearchMemory' })).toBe(1);
    expect(has(after.samples, 'agent_proxy_http_request_duration_seconds_bucket', { route: 'AddMemory', le: '+Inf', process: 'proxy' })).toBe(true);
    // The enclave: its requests (the stream counted as one streamed call), embedding, search, storage, gauges.
    expect(delta('agent_enclave_requests_total', { route: 'AddMemory', status: '200', process: 'enclave' })).toBe(1);
    expect(delta('agent_enclave_requests_total', { route: 'ChatCompletion', status: '200', streamed: 'true' })).toBe(1);
    expect(delta('agent_enclave_request_duration_seconds_count', { route: 'SearchMemory' })).toBe(1);
    expect(delta('agent_enclave_embedding_duration_seconds_count', {})).toBeGreaterThanOrEqual(3); // the add, the search, the chat's retrieval
    expect(delta('agent_enclave_embedded_texts_total', {})).toBeGreaterThanOrEqual(3);
    expect(delta('agent_enclave_search_duration_seconds_count', {})).toBeGreaterThanOrEqual(2);
    expect(delta('agent_enclave_storage_commit_duration_seconds_count', {})).toBeGreaterThanOrEqual(1);
    expect(delta('agent_enclave_storage_committed_entries_total', {})).toBeGreaterThanOrEqual(1);
    expect(total(after.samples, 'agent_enclave_memories')).toBe(1);
    expect(total(after.samples, 'agent_enclave_tenants')).toBe(1);
    expect(has(after.samples, 'agent_enclave_work_in_flight')).toBe(true);
    expect(total(after.samples, 'agent_enclave_work_capacity')).toBe(64);
    // No tenant is large enough for the search worker: it holds no copy and answered nothing.
    expect(has(after.samples, 'agent_enclave_search_worker_copies')).toBe(true);
    expect(total(after.samples, 'agent_enclave_search_worker_copies')).toBe(0);
    expect(has(after.samples, 'agent_enclave_search_worker_searches_total')).toBe(true);
    expect(total(after.samples, 'agent_enclave_search_worker_searches_total')).toBe(0);
    expect(total(after.samples, 'agent_proxy_enclave_metrics_up')).toBe(1);
    // Node's own metrics, per process.
    expect(has(after.samples, 'agent_proxy_process_resident_memory_bytes')).toBe(true);
    expect(has(after.samples, 'agent_enclave_process_resident_memory_bytes')).toBe(true);

    // The gauges follow deletes too.
    expect((await api('DELETE', `/v1/memory/${memoryId}?tenant_id=${TENANT}`)).status).toBe(200);
    expect(total((await scrape()).samples, 'agent_enclave_memories')).toBe(0);
  });

  it('is one valid exposition: every family declared once, every sample labelled with its process', async () => {
    const { text, samples } = await scrape();
    const declared = [...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]);
    expect(new Set(declared).size).toBe(declared.length);
    for (const s of samples) {
      expect(s.name.startsWith(`agent_${s.labels.process}_`), s.name).toBe(true);
    }
  });

  it('counts a sealed request once, as Sealed: what it carried stays the client\'s', async () => {
    const tee = await connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem: readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8') });
    const before = (await scrape()).samples;
    const stored = await tee.sealedCall('POST', '/v1/memory', { tenant_id: `${TENANT}-sealed`, content: 'a sealed pelican' });
    expect(stored.status).toBe(200);
    const after = (await scrape()).samples;
    const delta = (labels: Record<string, string>) => total(after, 'agent_enclave_requests_total', labels) - total(before, 'agent_enclave_requests_total', labels);
    expect(delta({ route: 'Sealed', status: '200' })).toBe(1);
    expect(delta({ route: 'AddMemory' })).toBe(0);
    expect(total(after, 'agent_proxy_http_requests_total', { route: 'Sealed' }) - total(before, 'agent_proxy_http_requests_total', { route: 'Sealed' })).toBe(1);
  });

  it('moves no embedding or search series for what a sealed call does inside (hold round two, 7)', async () => {
    const tee = await connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem: readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8') });
    const tenant = `${TENANT}-quiet`;
    const series = ['agent_enclave_embedded_texts_total', 'agent_enclave_embedding_duration_seconds_count', 'agent_enclave_search_duration_seconds_count'];
    const counts = async () => { const { samples } = await scrape(); return series.map((name) => total(samples, name, {})); };
    const before = await counts();
    const stored = await tee.sealedCall<{ id: string }>('POST', '/v1/memory', { tenant_id: tenant, content: 'a quiet pelican' });
    expect(stored.status).toBe(200);
    expect((await tee.sealedCall('GET', `/v1/memory?tenant_id=${tenant}&query=pelican`)).status).toBe(200);
    expect((await tee.sealedCall('POST', '/v1/memory/search', { tenant_id: tenant, query: 'quiet' })).status).toBe(200);
    expect((await tee.sealedCall('PATCH', `/v1/memory/${stored.body.id}?tenant_id=${tenant}`, { content: 'a louder pelican' })).status).toBe(200);
    expect((await tee.sealedCall('POST', '/v1/embeddings', { model: 'any', input: ['one', 'two'] })).status).toBe(200);
    expect((await tee.sealedCall('POST', '/v1/chat/completions', { model: 'local-memory', messages: [{ role: 'user', content: 'pelican?' }] }, { organization: tenant })).status).toBe(200);
    expect(await counts()).toEqual(before);
    // The same search sent plainly moves them (the series are live).
    expect((await api('POST', '/v1/memory/search', { tenant_id: tenant, query: 'quiet' })).status).toBe(200);
    const [texts, embeds, searches] = await counts();
    expect([texts - before[0], embeds - before[1], searches - before[2]]).toEqual([1, 1, 1]);
  });

  it('holds no tenant id, memory id, content or query', async () => {
    const { text } = await scrape();
    for (const secret of [TENANT, memoryId, 'pelican', 'zanzibar', 'codeword', 'mem_']) expect(text).not.toContain(secret);
  });
});

describe('GET /readyz', () => {
  it('is 200 while the enclave is up, and 503 naming the failed check once it is killed', async () => {
    const up = await api('GET', '/readyz');
    expect(up.status).toBe(200);
    expect(up.body).toEqual({ status: 'ready', checks: { enclave: 'ok', embedding_model: 'ok', store: 'ok' } });

    await svc.killEnclave();
    const down = await api('GET', '/readyz');
    expect(down.status).toBe(503);
    expect(down.body).toMatchObject({ status: 'not_ready', failed: expect.arrayContaining(['enclave']), checks: { enclave: 'failed' } });
    // The proxy's metrics still answer, and say the enclave's are missing.
    const { samples } = await scrape();
    expect(total(samples, 'agent_proxy_enclave_metrics_up')).toBe(0);
    expect(samples.some((s) => s.name.startsWith('agent_enclave_'))).toBe(false);

    await svc.startEnclave();
    expect((await api('GET', '/readyz')).status).toBe(200);
  });
});

describe('LOG_FORMAT=pretty', () => {
  let pretty: RunningService;
  let dir: string;
  let key: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agent-pretty-'));
    key = issueKey(join(dir, 'keys.json'), [TENANT]);
    pretty = await startService({ LOG_FORMAT: 'pretty', API_KEYS_FILE: join(dir, 'keys.json') });
  });
  afterAll(async () => {
    await pretty?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes readable lines, not JSON, from every process, and still no keys or contents', async () => {
    const auth = { authorization: `Bearer ${key}`, 'x-request-id': 'req-pretty-1' };
    expect((await request(pretty.baseUrl, 'POST', '/v1/memory', { content: CONTENT, tenant_id: TENANT }, auth)).status).toBe(200);
    expect((await request(pretty.baseUrl, 'GET', `/v1/memory?tenant_id=${TENANT}&query=pelican`, undefined, auth)).status).toBe(200);
    expect((await request(pretty.baseUrl, 'POST', '/v1/memory', { content: CONTENT, tenant_id: TENANT }, { authorization: 'Bearer sk-wrong-key-zq9' })).status).toBe(401);
    await logsCaughtUp(pretty.baseUrl, pretty.output);
    const lines = pretty.output().split('\n').filter((l) => l.trim() !== '');
    const logLines = lines.filter((l) => /^\d\d:\d\d:\d\d\.\d\d\d (TRACE|DEBUG|INFO |WARN |ERROR|FATAL) /.test(l));
    expect(logLines.length).toBeGreaterThan(5);
    for (const proc of ['proxy', 'enclave', 'host-store']) expect(logLines.some((l) => l.includes(` ${proc} `)), proc).toBe(true);
    // The request id still crosses the hop, as a field of both processes' lines.
    expect(logLines.filter((l) => l.includes('reqId=req-pretty-1')).length).toBeGreaterThanOrEqual(2);
    for (const line of lines) expect(() => JSON.parse(line), line).toThrow();
    const output = pretty.output();
    for (const secret of [key, 'sk-wrong-key-zq9', 'pelican', 'zanzibar']) expect(output).not.toContain(secret);
  });
});
