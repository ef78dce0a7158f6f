import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, streamText } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnGateway, startGateway, type GatewayProcess } from '../helpers/gateway.js';
import { limits } from '../../common/limits.js';
import { exportKeyPair, exportLines } from '../../sdk/memory-export.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { issueKey } from '../helpers/processes.js';
import { oneConnection } from '../helpers/http.js';
import { rawRequest } from '../helpers/raw-http.js';
import { startRecordingRelay, type RecordingRelay } from '../helpers/relay.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * agent-gateway (gateway/) as a user runs it, in front of a keyed service, with clients
 * nobody on the project wrote pointed at it unmodified: openai, the AI SDK, LangChain, curl.
 * A recording relay between the gateway and the proxy shows what the host gets.
 */
let model: ModelServer;
let svc: RunningService;
let relay: RecordingRelay;
let gateway: GatewayProcess;
let key: string;
let dir: string;
const ORG = 'gw-org-41c7';
const execFileAsync = promisify(execFile);
const PCR0_WRONG = 'ab'.repeat(48);

const baseURL = () => `${gateway.url}/v1`;
const trustArgs = () => ['--root', join(svc.dataDir, 'simulated-root.pem')];
const weather = {
  type: 'function' as const,
  function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-gateway-'));
  key = issueKey(join(dir, 'keys.json'), [ORG]);
  model = await startModelServer();
  svc = await startService({ API_KEYS_FILE: join(dir, 'keys.json'), MODEL_BASE_URL: model.url, MODEL_API_KEY: 'sk-model', MODEL_NAMES: 'echo,tool-client' });
  relay = await startRecordingRelay(svc.baseUrl.replace('http://', ''));
  gateway = await startGateway(['--service', `http://${relay.address}`, ...trustArgs(), '--insecure-dev', '--state-file', join(dir, 'state.json')]);
});
afterAll(async () => {
  await gateway?.stop();
  await relay?.close();
  await svc?.stop();
  await model?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('start', () => {
  it('prints one line per verified check, the state head and where it serves', () => {
    const lines = gateway.output().split('\n');
    for (const check of ['structure', 'signature', 'certificate chain', 'nonce', 'public key', 'operator key', 'box key', 'answer signature', 'state head']) {
      expect(lines.some((l) => l.startsWith(`✓ ${check}`)), check).toBe(true);
    }
    expect(JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8'))).toMatchObject({
      v: 2, service: `http://${relay.address}`, tracker: { v: 2, shards: 1, heads: { 0: { store: expect.stringMatching(/^[0-9a-f]{32}$/), seq: expect.any(Number), hash: expect.stringMatching(/^[0-9a-f]{64}$/) } } },
    });
  });

  it('refuses to start without pinned PCRs or a manifest (exit 2), with a wrong PCR, or against a service that is not an enclave (exit 1): one line each', async () => {
    const cases: [string[], number, RegExp][] = [
      [['--service', svc.baseUrl, ...trustArgs()], 2, /refusing to start without --pcr or --manifest/],
      [['--service', svc.baseUrl, ...trustArgs(), '--pcr', `0=${PCR0_WRONG}`], 1, /PCR0 mismatch/],
      [['--service', new URL(model.url).origin, ...trustArgs(), '--insecure-dev'], 1, /attestation/],
    ];
    for (const [args, status, message] of cases) {
      const run = spawnGateway([...args, '--port', '0', '--state-file', join(dir, 'other-state.json')]);
      expect(await run.exited).toBe(status);
      const output = run.output().trim();
      expect(output.split('\n'), output).toHaveLength(1);
      expect(output).toMatch(message);
      expect(output).not.toMatch(/serving/);
    }
  });

  it('--help documents every flag', () => {
    const help = execFileSync(process.execPath, [join(import.meta.dirname, '../../dist/gateway/main.js'), '--help'], { encoding: 'utf8' });
    for (const flag of ['--service', '--port', '--root', '--pcr', '--manifest', '--operator-key', '--allow-debug', '--insecure-dev', '--state-file', '--mcp', '--tenant', '--api-key-file', '--help']) expect(help).toContain(flag);
  });
});

describe('openai', () => {
  const client = () => new OpenAI({ baseURL: baseURL(), apiKey: key, organization: ORG, maxRetries: 0 });

  it('chat, plain and streamed; tools; embeddings; models', async () => {
    const completion = await client().chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'hello gateway' }] });
    expect(completion.choices[0].message.content).toBe('echo: hello gateway');
    const stream = await client().chat.completions.create({ model: 'echo', stream: true, messages: [{ role: 'user', content: 'streamed gateway' }] });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('echo: streamed gateway');
    const tools = await client().chat.completions.create({ model: 'tool-client', tools: [weather], messages: [{ role: 'user', content: 'weather?' }] });
    expect(tools.choices[0].message.tool_calls?.[0]).toMatchObject({ function: { name: 'get_weather' } });
    const vectors = await client().embeddings.create({ model: 'static-sif-100d', input: 'the cat sat' });
    expect(vectors.data[0].embedding).toHaveLength(100);
    const ids: string[] = [];
    for await (const m of client().models.list()) ids.push(m.id);
    expect(ids).toContain('echo');
  });

  it('the enclave\'s own refusals come through with their status: a wrong key is 401, an unknown model 404', async () => {
    const wrong = new OpenAI({ baseURL: baseURL(), apiKey: 'sk-not-a-key', organization: ORG, maxRetries: 0 });
    await expect(wrong.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 401 });
    await expect(client().models.retrieve('gpt-nothing')).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
  });
});

describe('Vercel AI SDK and LangChain', () => {
  const provider = () => createOpenAI({ baseURL: baseURL(), apiKey: key, organization: ORG });
  const chat = (name = 'echo') => new ChatOpenAI({ model: name, apiKey: key, maxRetries: 0, configuration: { baseURL: baseURL(), organization: ORG } });

  it('AI SDK: generateText and streamText over Responses and chat', async () => {
    expect((await generateText({ model: provider()('echo'), prompt: 'ai responses' })).text).toBe('echo: ai responses');
    for (const m of [provider()('echo'), provider().chat('echo')]) {
      const result = streamText({ model: m, prompt: 'ai streamed' });
      let text = '';
      const parts: string[] = [];
      for await (const part of result.fullStream) {
        parts.push(part.type);
        if (part.type === 'text-delta') text += part.text;
      }
      expect(parts).not.toContain('error');
      expect(text).toBe('echo: ai streamed');
    }
  });

  it('LangChain: invoke, stream, bindTools', async () => {
    expect((await chat().invoke('lc invoke')).content).toBe('echo: lc invoke');
    let text = '';
    for await (const chunk of await chat().stream('lc stream')) text += typeof chunk.content === 'string' ? chunk.content : '';
    expect(text).toBe('echo: lc stream');
    const called = await chat('tool-client').bindTools([weather]).invoke('weather?');
    expect(called.tool_calls?.[0]).toMatchObject({ name: 'get_weather' });
  });
});

describe('curl, and what the host saw', () => {
  it('curl: a memory added and found, a streamed chat', async () => {
    // Not execFileSync: the recording relay runs in this process and must keep relaying.
    const curl = async (...args: string[]) =>
      (await execFileAsync('curl', ['-sS', '-m', '20', '-H', `Authorization: Bearer ${key}`, '-H', 'content-type: application/json', ...args], { encoding: 'utf8' })).stdout;
    const added = JSON.parse(await curl('-X', 'POST', `${baseURL()}/memory`, '-d', JSON.stringify({ tenant_id: ORG, content: 'curl put the kettle on' })));
    expect(added).toMatchObject({ tenant_id: ORG, content: 'curl put the kettle on' });
    const found = JSON.parse(await curl(`${baseURL()}/memory?tenant_id=${ORG}&query=kettle&top_k=1`));
    expect(found.data[0].id).toBe(added.id);
    const sse = await curl('-N', '-H', `organization_id: ${ORG}`, `${baseURL()}/chat/completions`, '-d', JSON.stringify({ model: 'echo', stream: true, messages: [{ role: 'user', content: 'curl stream' }] }));
    expect(sse.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(sse).toContain('tee.signature');
  });

  it('an export through the gateway: a sealed stream to the enclave, the export opened only with the caller\'s key', async () => {
    const keys = exportKeyPair();
    const res = await fetch(`${baseURL()}/memory/export?tenant_id=${ORG}&public_key=${encodeURIComponent(Buffer.from(keys.publicKey).toString('base64'))}`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    const file = new Uint8Array(await res.arrayBuffer());
    expect(Buffer.from(file).toString('latin1')).not.toContain('kettle');
    const lines: Array<{ memory: { content: string } }> = [];
    for await (const line of exportLines((async function* () { yield file; })(), keys.secretKey)) lines.push(line as { memory: { content: string } });
    expect(lines.map((l) => l.memory.content)).toContain('curl put the kettle on');
  });

  it('the API key, the tenant and every route stayed inside the envelopes', () => {
    const seen = Buffer.concat([relay.upstream(), relay.downstream()]);
    expect(relay.upstream().includes(Buffer.from('POST /v1/sealed'))).toBe(true);
    for (const needle of [key, key.slice(-12), ORG, '/v1/chat/completions', '/v1/memory', '/v1/embeddings', '/v1/responses', 'kettle', 'Authorization: Bearer']) {
      expect(seen.includes(Buffer.from(needle)), needle).toBe(false);
    }
  });
});

describe('who may use it', () => {
  it('only clients that name this machine\'s loopback as Host: a page on another name resolving here (DNS rebinding) is refused', async () => {
    const port = Number(new URL(gateway.url).port);
    const ask = (host: string) => rawRequest(port, `GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`);
    const rebound = await ask(`evil.example:${port}`);
    expect(rebound.status).toBe(403);
    expect(rebound.body.error).toMatchObject({ code: 'gateway_host_refused', type: 'permission_error' });
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'localhost']) expect((await ask(host)).status, host).toBe(200);
  });
});

describe('a body over the limit', () => {
  it('gets its 413 while the client is still sending it, on the API and on /mcp, and the connection is kept', async () => {
    // Answering before the body is read and then closing made the kernel reset the
    // connection under the 413: fetch saw ECONNRESET for 4 in 10 bodies of 4 MB.
    for (const path of ['/v1/memory', '/mcp']) {
      for (let i = 0; i < 10; i++) {
        const res = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-tenant-id': 'big' }, body: new Uint8Array(4_000_000) });
        expect(res.status, path).toBe(413);
        await res.arrayBuffer();
      }
    }
    const connection = oneConnection(gateway.url, { authorization: `Bearer ${key}` });
    expect(await connection.send('POST', '/v1/memory', Buffer.alloc(limits.maxBodyBytes + 100_000, 0x20))).toEqual({ status: 413, reused: false });
    expect(await connection.send('GET', '/v1/models')).toEqual({ status: 200, reused: true });
    connection.close();
  });
});

describe('new enclave keys', () => {
  it('after the enclave restarts (new keys), the gateway attests again and the next request succeeds', async () => {
    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    const client = new OpenAI({ baseURL: baseURL(), apiKey: key, organization: ORG, maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'after restart' }] });
    expect(completion.choices[0].message.content).toBe('echo: after restart');
  });
});
