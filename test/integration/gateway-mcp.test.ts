import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type GatewayProcess } from '../helpers/gateway.js';
import { issueKey } from '../helpers/processes.js';
import { startRecordingRelay, startTamperingRelay, type RecordingRelay, type TamperingRelay } from '../helpers/relay.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * agent-gateway's memory tools over MCP, driven by the official @modelcontextprotocol/sdk
 * client on both transports: `agent-gateway --mcp` on stdio (as Claude Desktop starts it),
 * and /mcp of the HTTP gateway (streamable HTTP). Both reach the keyed service through a
 * recording relay, which shows what the host gets; a third gateway goes through a relay
 * that flips a byte of each sealed answer.
 */
let svc: RunningService;
let relay: RecordingRelay;
let flipper: TamperingRelay;
let http: GatewayProcess;
let flipped: GatewayProcess;
let stdio: Client;
let stdioTransport: StdioClientTransport;
let stderr = '';
let key: string;

const CANARY = 'canary-Brindlewick-3a9e';
const TENANT = 'tenant-canary-Hollowmere-77c2';
const OTHER = 'tenant-not-held-0b14';
const TOOLS = ['add_memory', 'search_memory', 'list_memories', 'update_memory', 'delete_memory'];
const main = resolve(import.meta.dirname, '../../dist/gateway/main.js');

let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gw-mcp-'));
  key = issueKey(join(dir, 'keys.json'), [TENANT]);
  svc = await startService({ API_KEYS_FILE: join(dir, 'keys.json') });
  relay = await startRecordingRelay(svc.baseUrl.replace('http://', ''));
  flipper = await startTamperingRelay(svc.baseUrl);
  const trust = ['--root', join(svc.dataDir, 'simulated-root.pem'), '--insecure-dev'];
  http = await startGateway(['--service', `http://${relay.address}`, ...trust, '--state-file', join(dir, 'http.json')]);
  flipped = await startGateway(['--service', flipper.baseUrl, ...trust, '--state-file', join(dir, 'flipped.json')]);
  stdioTransport = new StdioClientTransport({
    command: process.execPath,
    args: [main, '--service', `http://${relay.address}`, ...trust, '--state-file', join(dir, 'stdio.json'), '--mcp', '--tenant', TENANT],
    env: { ...process.env, AGENT_API_KEY: key } as Record<string, string>,
    stderr: 'pipe',
  });
  stdioTransport.stderr!.on('data', (d: Buffer) => { stderr += d.toString(); });
  stdio = await connected(stdioTransport);
});
afterAll(async () => {
  await stdio?.close();
  await http?.stop();
  await flipped?.stop();
  await relay?.close();
  await flipper?.close();
  await svc?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function connected(transport: Transport): Promise<Client> {
  const client = new Client({ name: 'gateway-mcp-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

const overHttp = (gateway: GatewayProcess, tenant: string) =>
  connected(new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${key}`, 'x-tenant-id': tenant } },
  }));

/** A tool's result: its text content parsed as JSON, or the error text when isError. */
async function call(client: Client, name: string, args: Record<string, unknown>): Promise<{ isError: boolean; text: string; json: any }> {
  const result = await client.callTool({ name, arguments: args });
  const text = (result.content as { type: string; text: string }[]).map((c) => c.text).join('');
  const isError = result.isError === true;
  return { isError, text, json: isError ? undefined : JSON.parse(text) };
}

/** add → search finds it → list → update → delete, each checked by its answer. */
async function roundTrip(client: Client, label: string): Promise<void> {
  const listed = await client.listTools();
  expect(listed.tools.map((t) => t.name).sort()).toEqual([...TOOLS].sort());
  for (const tool of listed.tools) {
    expect(tool.description!.length, tool.name).toBeGreaterThan(40);
    for (const [name, schema] of Object.entries(tool.inputSchema.properties ?? {})) expect((schema as { description?: string }).description, `${tool.name}.${name}`).toBeTruthy();
  }

  const added = await call(client, 'add_memory', { content: `${label} keeps the spare key under the ${CANARY}`, metadata: { source: label } });
  expect(added.isError, added.text).toBe(false);
  expect(added.json).toMatchObject({ object: 'memory', tenant_id: TENANT, metadata: { source: label } });
  const id: string = added.json.id;

  const found = await call(client, 'search_memory', { query: `where is the spare key ${CANARY}`, top_k: 3 });
  expect(found.isError, found.text).toBe(false);
  expect(found.json.data[0].id).toBe(id);

  const page = await call(client, 'list_memories', { limit: 100 });
  expect(page.json.data.map((m: { id: string }) => m.id)).toContain(id);

  const updated = await call(client, 'update_memory', { id, content: `${label} moved the spare key to the ${CANARY} shed` });
  expect(updated.json).toMatchObject({ id, content: `${label} moved the spare key to the ${CANARY} shed`, updated_at: expect.any(Number) });

  const deleted = await call(client, 'delete_memory', { id });
  expect(deleted.json).toMatchObject({ id, deleted: true });
  const after = await call(client, 'list_memories', {});
  expect(after.json.data.map((m: { id: string }) => m.id)).not.toContain(id);
  const gone = await call(client, 'delete_memory', { id });
  expect(gone).toMatchObject({ isError: true, text: expect.stringMatching(/HTTP 404/) });
}

describe('agent-gateway --mcp (stdio)', () => {
  it('lists the five tools and does add → search → list → update → delete', async () => {
    await roundTrip(stdio, 'stdio');
  });

  it('keeps stdout for the protocol: the verification report went to stderr', () => {
    expect(stderr).toMatch(/✓ certificate chain/);
    expect(stderr).toMatch(/as MCP memory tools on stdio/);
  });

  it('refuses arguments the service would refuse, before sending anything', async () => {
    const bad = await call(stdio, 'update_memory', { id: '../../v1/models' });
    expect(bad).toMatchObject({ isError: true, text: expect.stringMatching(/invalid arguments for update_memory/) });
  });
});

describe('/mcp of the HTTP gateway (streamable HTTP)', () => {
  it('lists the five tools and does add → search → list → update → delete', async () => {
    const client = await overHttp(http, TENANT);
    try {
      await roundTrip(client, 'http');
    } finally {
      await client.close();
    }
  });

  it('a tenant the key does not hold: isError with the service\'s 403 message', async () => {
    const client = await overHttp(http, OTHER);
    try {
      const refused = await call(client, 'add_memory', { content: 'not mine to keep' });
      expect(refused.isError).toBe(true);
      expect(refused.text).toMatch(/HTTP 403.*this API key may not act for tenant/);
    } finally {
      await client.close();
    }
  });

  it('refuses a GET (stateless: no stream to open), a request without X-Tenant-Id, and a Host that is not loopback (DNS rebinding)', async () => {
    const send = (method: string, headers: Record<string, string>) => new Promise<{ status: number; text: string }>((done, fail) => {
      const req = httpRequest(`${http.url}/mcp`, { method, headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => { text += d.toString(); });
        res.on('end', () => done({ status: res.statusCode!, text }));
      });
      req.on('error', fail);
      req.end(method === 'POST' ? JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) : undefined);
    });
    expect(await send('GET', { 'x-tenant-id': TENANT })).toMatchObject({ status: 405 });
    expect(await send('POST', {})).toMatchObject({ status: 400, text: expect.stringMatching(/x-tenant-id/) });
    expect(await send('POST', { 'x-tenant-id': TENANT, host: `attacker.example:${new URL(http.url).port}` })).toMatchObject({ status: 403 });
    expect(await send('POST', { 'x-tenant-id': TENANT })).toMatchObject({ status: 200, text: expect.stringContaining('search_memory') });
  });

  it('an answer altered by the host: isError naming the failed check, never the altered content', async () => {
    flipper.tamper = (exchange) => {
      if (exchange.url !== '/v1/sealed' || exchange.status !== 200) return exchange;
      // The sealed reply: nonce (24 bytes) ‖ box; one bit of the box flipped.
      const body = Buffer.from(exchange.body);
      body[40] ^= 0x01;
      return { ...exchange, body };
    };
    const client = await overHttp(flipped, TENANT);
    try {
      const listed = await call(client, 'list_memories', {});
      expect(listed).toMatchObject({ isError: true, text: expect.stringMatching(/^agent-gateway: sealed reply check failed: the sealed reply does not open/) });
    } finally {
      flipper.tamper = (exchange) => exchange;
      await client.close();
    }
  });
});

describe('what the host saw', () => {
  it('no memory content, query, tenant id or API key in any byte between the gateways and the proxy', () => {
    const seen = Buffer.concat([relay.upstream(), relay.downstream()]);
    expect(seen.length).toBeGreaterThan(10_000);
    for (const needle of [CANARY, 'spare key', TENANT, OTHER, key, key.slice(4, 20), '/v1/memory', 'add_memory']) {
      expect(seen.includes(Buffer.from(needle)), needle).toBe(false);
    }
    // What it does see: sealed envelopes (and the public attestation).
    expect(seen.includes(Buffer.from('POST /v1/sealed HTTP/1.1'))).toBe(true);
  });
});
