import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchTransport, undiciTransport, type Transport } from '../../sdk/transport.js';
import { freePort } from '../helpers/service.js';

/** The sdk's two transports against one loopback server: the same answers, and failures thrown the same way. */
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/slow') return void setTimeout(() => res.end('late'), 5_000);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.setHeader('set-cookie', ['a=1', 'b=2']);
      res.setHeader('x-echo-method', req.method ?? '');
      res.writeHead(req.url === '/missing' ? 404 : 200, { 'content-type': 'application/json' });
      res.end(Buffer.concat(chunks).length > 0 ? Buffer.concat(chunks) : '{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe.each([
  ['undici request()', undiciTransport],
  ['a fetch function', fetchTransport(fetch)],
] as [string, Transport][])('the sdk transport over %s', (_name, transport) => {
  it('sends method, headers and body, and gives back status, lower-case headers (repeated ones joined) and the bytes', async () => {
    const answer = await transport(new URL('/echo', base), { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: Buffer.from('{"sent":1}') });
    expect(answer.status).toBe(200);
    expect(answer.headers['x-echo-method']).toBe('POST');
    expect(answer.headers['set-cookie']).toBe('a=1, b=2');
    expect(Buffer.from(await answer.bytes()).toString()).toBe('{"sent":1}');
  });

  it('streams the body as it arrives, and a 404 is an answer, not an error', async () => {
    const answer = await transport(new URL('/missing', base), { method: 'GET', headers: {} });
    expect(answer.status).toBe(404);
    const parts: Buffer[] = [];
    for await (const chunk of answer.body) parts.push(Buffer.from(chunk));
    expect(Buffer.concat(parts).toString()).toBe('{"ok":true}');
  });

  it('a service that cannot be reached: TypeError "fetch failed" with the network error as its cause (what agent-gateway reports)', async () => {
    const port = await freePort();
    const error = await transport(new URL(`http://127.0.0.1:${port}/`), { method: 'GET', headers: {} }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toBe('fetch failed');
    expect((error as { cause?: { code?: string } }).cause?.code).toBe('ECONNREFUSED');
  });

  it('an aborted request throws the signal\'s reason', async () => {
    const abort = new AbortController();
    const pending = transport(new URL('/slow', base), { method: 'GET', headers: {}, signal: abort.signal }).catch((e: unknown) => e);
    setTimeout(() => abort.abort(new Error('stopped by the caller')), 50);
    expect(await pending).toEqual(new Error('stopped by the caller'));
  });
});
