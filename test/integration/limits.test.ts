import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { limits } from '../../common/limits.js';
import { connect } from '../../sdk/client.js';
import { expectError, oneConnection, request, type JsonResponse } from '../helpers/http.js';
import { rawRequest } from '../helpers/raw-http.js';
import { startService, waitFor, type RunningService } from '../helpers/service.js';

const services: RunningService[] = [];
const start = async (env: NodeJS.ProcessEnv) => {
  const svc = await startService(env);
  services.push(svc);
  return svc;
};
afterAll(async () => {
  await Promise.all(services.map((s) => s.stop()));
});

const portOf = (svc: RunningService) => Number(new URL(svc.baseUrl).port);

/** Fires `n` memory writes at once (each with some content to embed) and returns every answer. */
function burst(svc: RunningService, n: number): Promise<JsonResponse[]> {
  const content = 'the quick brown fox jumps over the lazy dog '.repeat(400);
  return Promise.all(Array.from({ length: n }, (_, i) =>
    request(svc.baseUrl, 'POST', '/v1/memory', { content: `${i} ${content}`, tenant_id: 'burst' })));
}

describe('rate limits at the proxy', () => {
  it('limit each key, then each client IP whatever keys it invents, with 429 and Retry-After', async () => {
    const svc = await start({ RATE_LIMIT_MAX: '3', RATE_LIMIT_IP_MAX: '12', RATE_LIMIT_WINDOW_MS: '60000' });
    const get = (key?: string) => request(svc.baseUrl, 'GET', '/v1/attestation', undefined, key ? { authorization: `Bearer ${key}` } : {});

    for (let i = 0; i < 3; i++) {
      const ok = await get('key-one');
      expect(ok.status).toBe(200);
      expect(ok.headers.get('x-ratelimit-limit')).toBe('3');
      expect(ok.headers.get('x-ratelimit-remaining')).toBe(String(2 - i));
    }
    const limited = await get('key-one');
    const err = expectError(limited, 429, 'rate_limit_exceeded');
    expect(err.type).toBe('rate_limit_error');
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);

    // The same key spelled differently is the same client.
    expectError(await request(svc.baseUrl, 'GET', '/v1/attestation', undefined, { authorization: 'bearer   key-one ' }), 429, 'rate_limit_exceeded');
    // Another key has its own allowance; so do requests without a key (by IP).
    expect((await get('key-two')).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await get()).status).toBe(200);
    expectError(await get(), 429, 'rate_limit_exceeded');

    // 10 requests from this IP so far: 2 more pass with fresh keys, then the IP limit holds.
    for (let i = 0; i < 2; i++) expect((await get(`fresh-${i}`)).status).toBe(200);
    expectError(await get('fresh-again'), 429, 'rate_limit_exceeded');

    // The health probe is never limited.
    for (let i = 0; i < 5; i++) expect((await request(svc.baseUrl, 'GET', '/healthz')).status).toBe(200);
  });
});

describe('in-flight caps: overload answers 503 at once', () => {
  it('at the proxy (MAX_IN_FLIGHT)', async () => {
    const svc = await start({ MAX_IN_FLIGHT: '1', RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0', LOG_LEVEL: 'warn' });
    const answers = await burst(svc, 30);
    expect(answers.filter((a) => a.status !== 200 && a.status !== 503)).toEqual([]);
    const refused = answers.filter((a) => a.status === 503);
    expect(refused.length).toBeGreaterThan(0);
    expect(answers.some((a) => a.status === 200)).toBe(true);
    for (const a of refused) {
      expectError(a, 503, 'proxy_overloaded');
      expect(a.headers.get('retry-after')).toBe('1');
    }
    // Once the burst is over, capacity is back.
    expect((await burst(svc, 1))[0].status).toBe(200);
  });

  it('at the enclave (ENCLAVE_MAX_IN_FLIGHT), relayed with its Retry-After', async () => {
    const svc = await start({ ENCLAVE_MAX_IN_FLIGHT: '1', RATE_LIMIT_MAX: '0', RATE_LIMIT_IP_MAX: '0', LOG_LEVEL: 'warn' });
    const answers = await burst(svc, 30);
    expect(answers.filter((a) => a.status !== 200 && a.status !== 503)).toEqual([]);
    const refused = answers.filter((a) => a.status === 503);
    expect(refused.length).toBeGreaterThan(0);
    for (const a of refused) {
      expectError(a, 503, 'enclave_overloaded');
      expect(a.headers.get('retry-after')).toBe('1');
    }
    expect((await burst(svc, 1))[0].status).toBe(200);
    expect(svc.enclave.exitCode).toBeNull();

    // A sealed call holds one place, and the request inside it takes no second one.
    const tee = await connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem: readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8') });
    const sealed = await tee.sealedCall('POST', '/v1/memory', { content: 'sealed under a cap of one', tenant_id: 'burst' });
    expect(sealed.status).toBe(200);
  });
});

describe('a body over the limit from a client that stops sending', () => {
  it('gets its 413, and its connection is closed soon after (not at the receive timeout)', async () => {
    // A receive timeout past this test's own: without the proxy's lingering close, the socket stays open and the test fails.
    const svc = await start({ HTTP_RECEIVE_TIMEOUT_MS: '120000', LOG_LEVEL: 'warn' });
    const socket = netConnect(portOf(svc), '127.0.0.1');
    await once(socket, 'connect');
    let received = '';
    socket.on('data', (d: Buffer) => { received += d.toString('latin1'); });
    socket.on('error', () => undefined);
    socket.write('POST /v1/memory HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n');
    socket.write(Buffer.alloc(limits.maxBodyBytes + 65_536, 0x20));
    await once(socket, 'close');
    expect(received).toMatch(/^HTTP\/1\.1 413 /);
  });
});

describe('timeouts', () => {
  let svc: RunningService;

  it('a hung enclave costs a client REQUEST_TIMEOUT_MS, then 504; the service recovers when it resumes', async () => {
    svc = await start({ REQUEST_TIMEOUT_MS: '700', HTTP_RECEIVE_TIMEOUT_MS: '1000' });
    svc.enclave.kill('SIGSTOP');
    try {
      const stuck = await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=t&query=x');
      expect(expectError(stuck, 504, 'enclave_timeout').type).toBe('timeout_error');
    } finally {
      svc.enclave.kill('SIGCONT');
    }
    await waitFor(async () => (await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=t&query=x')).status === 200, 10_000);
  });

  it('a client that does not finish sending its request gets 408 in the error shape', async () => {
    const res = await rawRequest(portOf(svc), 'POST /v1/memory HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"content":');
    expect(expectError(res, 408, 'request_timeout').type).toBe('timeout_error');
  });

  it('headers over 16 KiB get 431, a malformed request 400, both in the error shape', async () => {
    expectError(await rawRequest(portOf(svc), `GET /v1/attestation HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`), 431, 'headers_too_large');
    expectError(await rawRequest(portOf(svc), 'GET /v1/attestation HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n'), 400, 'malformed_request');
    expectError(await rawRequest(portOf(svc), 'BREW /\u0000 HTCPCP/1.0\r\n\r\n'), 400, 'malformed_request');
    expectError(await rawRequest(portOf(svc), 'GET /v1/attestation HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n'), 417, 'expectation_failed');
    expectError(await rawRequest(portOf(svc), 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'), 404, 'unknown_route');
    expect(svc.proxy.exitCode).toBeNull();
  });

  it('path segments: an id over 128 characters is 400, a segment over 512 is 414, bad escapes 400', async () => {
    expect(expectError(await request(svc.baseUrl, 'GET', `/v1/memory/${'a'.repeat(200)}?tenant_id=t`), 400).param).toBe('id');
    expectError(await request(svc.baseUrl, 'GET', `/v1/memory/${'a'.repeat(600)}?tenant_id=t`), 414, 'uri_too_long');
    expectError(await request(svc.baseUrl, 'GET', '/v1/memory/%zz?tenant_id=t'), 400, 'invalid_url');
  });

  it('a body over the limit gets its 413 while the client is still sending it, and a body not much over keeps the connection', async () => {
    // Closing on a client still sending makes the kernel reset the connection, which destroyed
    // the 413 before fetch read it: 1 in 5 at 1.3 MiB, every time at 4 MB.
    for (const size of [limits.maxSealedEnvelopeBytes + 200, 4_000_000]) {
      for (let i = 0; i < 10; i++) {
        const sealed = await fetch(`${svc.baseUrl}/v1/sealed`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: new Uint8Array(size) });
        expect(sealed.status).toBe(413);
        expect(((await sealed.json()) as { error: { code: string } }).error.code).toBe('too_large');
      }
    }
    // Chunked, so the proxy learns it is too large only as it reads.
    const chunk = new Uint8Array(256 * 1024).fill(0x20);
    let sent = 0;
    const chunked = await fetch(`${svc.baseUrl}/v1/memory`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, duplex: 'half',
      body: new ReadableStream({ pull(c) { c.enqueue(chunk); if (++sent === 16) c.close(); } }),
    } as RequestInit);
    expect(chunked.status).toBe(413);
    // The rest of the body is read and dropped, so the next request goes on the same socket.
    const connection = oneConnection(svc.baseUrl);
    expect(await connection.send('POST', '/v1/memory', Buffer.alloc(limits.maxBodyBytes + 100_000, 0x20))).toEqual({ status: 413, reused: false });
    expect(await connection.send('GET', '/healthz')).toEqual({ status: 200, reused: true });
    connection.close();
  });

  it('an answer decided before the body is read reaches a client that is still sending a large body and asked to close', async () => {
    // A 415 (fastify closes after it), a 404 and a request line Node cannot parse: answered while
    // 600 KB are still arriving. Closing at once made the kernel reset the connection, and the
    // answer was lost (status 0 here) for about 1 request in 8 of the 415s and 1 in 30 of the
    // 400s, whose second parse error closed the connection the first answer was lingering on.
    const body = Buffer.alloc(600_000, 0x7b);
    const send = (line: string, headers: string) =>
      rawRequest(portOf(svc), Buffer.concat([Buffer.from(`${line}\r\nHost: x\r\nConnection: close\r\n${headers}Content-Length: ${body.length}\r\n\r\n`), body]));
    const statuses = new Map<string, number[]>();
    for (let i = 0; i < 40; i++) {
      for (const [name, line, headers] of [
        ['415', 'POST /v1/memory HTTP/1.1', 'Content-Type: */*\r\n'],
        ['404', 'POST /v1/nothing-here HTTP/1.1', 'Content-Type: */*\r\n'],
        ['400', 'HEAD ?query=x HTTP/1.1', ''],
      ]) statuses.set(name, [...(statuses.get(name) ?? []), (await send(line, headers)).status]);
    }
    for (const [expected, got] of statuses) expect(got.filter((s) => String(s) !== expected), `answers expected ${expected}`).toEqual([]);
    expect(svc.proxy.exitCode).toBeNull();
  });

  it('a request Node cannot parse is answered once, and the rest the client sends is read and dropped, not reset', async () => {
    // Node's parser reports each later chunk as another error: answering it again closed the
    // connection at once, so a client still sending was reset (and sometimes lost the answer).
    // Half open, as a client that goes on sending its body after the answer and the server's FIN.
    const socket = netConnect({ port: portOf(svc), host: '127.0.0.1', allowHalfOpen: true });
    const failures: string[] = [];
    socket.on('error', (err: NodeJS.ErrnoException) => failures.push(err.code ?? err.message));
    let answer = '';
    socket.on('data', (d: Buffer) => { answer += d.toString('latin1'); });
    socket.write('HEAD ?query=x HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\n\r\n');
    await waitFor(async () => answer.includes('\r\n\r\n'), 5_000);
    const chunk = Buffer.alloc(64 * 1024, 0x7b);
    for (let sent = 0; sent < 4_000_000 && !socket.destroyed; sent += chunk.length) {
      if (!socket.write(chunk)) await Promise.race([once(socket, 'drain'), once(socket, 'close')]).catch(() => undefined);
      await new Promise((r) => setImmediate(r));
    }
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(failures).toEqual([]);
    socket.destroy();
  });

  it('a body that is not valid UTF-8 is 400 invalid_json at the proxy', async () => {
    const body = Buffer.from('{"content":"\xed\xa0\x80","tenant_id":"t"}', 'latin1');
    expectError(await request(svc.baseUrl, 'POST', '/v1/memory', body, { 'content-type': 'application/json' }), 400, 'invalid_json');
  });
});
