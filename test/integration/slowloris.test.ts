import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * Finding 6: sockets that send headers and one byte of body held the proxy's in-flight
 * places for up to 30 s, and every legitimate request got 503 proxy_overloaded. Now work
 * is counted once the body is in, and one client IP may hold only so many open requests.
 * The attacker is 127.0.0.1; the legitimate client another loopback address, 127.0.0.3.
 */
let svc: RunningService;
let port: number;
const slow: Socket[] = [];

beforeAll(async () => {
  svc = await startService({ MAX_IN_FLIGHT: '16', MAX_REQUESTS_PER_IP: '24' });
  port = Number(new URL(svc.baseUrl).port);
});
afterAll(async () => {
  for (const s of slow) s.destroy();
  await svc?.stop();
});

/** Headers and the first byte of a 100-byte body, then nothing: a request that never finishes arriving. */
function slowRequest(): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' }, () => {
      socket.write('POST /v1/memory HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{');
      resolve(socket);
    });
    socket.on('error', reject);
  });
}

/** A request from another loopback address (another client as far as the proxy can tell). */
function fromOtherClient(path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, localAddress: '127.0.0.3' }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => { body += d.toString(); });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('slow senders cannot take the proxy down', () => {
  it('20 half-sent requests (more than MAX_IN_FLIGHT) leave another client served', async () => {
    for (let i = 0; i < 20; i++) slow.push(await slowRequest());
    await new Promise((r) => setTimeout(r, 200));
    const answer = await fromOtherClient('/v1/memory?tenant_id=t&query=anything');
    expect(answer.status, answer.body).toBe(200);
  });

  it('one client holds at most MAX_REQUESTS_PER_IP open requests: the next is refused with 429', async () => {
    for (let i = 0; i < 4; i++) slow.push(await slowRequest());
    const refused = await new Promise<string>((resolve) => {
      const socket = connect({ port, host: '127.0.0.1' }, () => socket.write('GET /v1/memory?tenant_id=t&query=x HTTP/1.1\r\nHost: x\r\n\r\n'));
      let data = '';
      socket.on('data', (d: Buffer) => { data += d.toString(); if (data.includes('\r\n\r\n') && data.includes('}')) { socket.destroy(); resolve(data); } });
    });
    expect(refused).toMatch(/^HTTP\/1\.1 429/);
    expect(refused).toMatch(/too_many_concurrent_requests/);
    expect((await fromOtherClient('/v1/memory?tenant_id=t&query=anything')).status).toBe(200);
  });
});
