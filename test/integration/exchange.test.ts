import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError } from '../../common/errors.js';
import { createLogger } from '../../common/logger.js';
import { channelOptions, enclaveProto, type ApiReply, type ApiRequest, type EnclaveClient, type ExchangeReplyIn, type ExchangeRequest } from '../../common/proto.js';
import type { CallContext, EnclaveApi } from '../../enclave/api/create-api.js';
import { createGrpcServer } from '../../enclave/grpc-server.js';
import { EnclaveConnection } from '../../proxy/enclave-client.js';
import { startCuttableLine } from '../helpers/relay.js';
import { freePort } from '../helpers/service.js';

/**
 * The Exchange stream (many API requests on one gRPC stream, protos/enclave.proto), over real
 * gRPC on loopback: the enclave's side with an API whose answers the test controls, played
 * against by a raw client (the hostile host) and by the proxy's own EnclaveConnection.
 */

interface Served {
  request: ApiRequest;
  context: CallContext;
  answer: (reply: ApiReply) => void;
  fail: (err: Error) => void;
}

const log = createLogger('test', 'silent');
let stops: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const stop of stops.reverse()) await stop();
  stops = [];
});

/** An enclave gRPC server whose Call answers only when the test says so. */
async function enclave(options: { maxUnsentExchangeBytes?: number } = {}) {
  const served: Served[] = [];
  const arrived: Array<() => void> = [];
  const api: EnclaveApi = {
    Call: (request, context) => new Promise((answer, fail) => {
      served.push({ request, context: context!, answer, fail });
      arrived.splice(0).forEach((wake) => wake());
    }),
    CallStream: async () => {},
    inFlight: () => 0,
  };
  const server = createGrpcServer(api, () => ({ ready: true }), log, undefined, options);
  const port = await freePort();
  await new Promise<void>((resolve, reject) => server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  stops.push(() => server.forceShutdown());
  /** Waits until `n` requests have reached the API. */
  const reached = async (n: number) => {
    while (served.length < n) await new Promise<void>((wake) => arrived.push(wake));
  };
  return { address: `127.0.0.1:${port}`, served, reached };
}

/** A TCP line to the enclave whose connections the test can cut (it keeps accepting new ones). */
async function cuttableLine(target: string) {
  const line = await startCuttableLine(target);
  stops.push(() => line.close());
  return line;
}

function rawClient(address: string): EnclaveClient {
  const client = new (enclaveProto().Enclave)(address, grpc.credentials.createInsecure(), channelOptions);
  stops.push(() => client.close());
  return client;
}

const request = (target: string): ApiRequest => ({ request_id: target, method: 'GET', target, body: Buffer.alloc(0), authorization: '', organization: '', known_state: '' });
const reply = (text: string): ApiReply => ({ status: 200, body: Buffer.from(text), headers: { 'x-test': text } });
const settle = () => new Promise((resolve) => setTimeout(resolve, 150));
/** Waits until `holds()` is true (a message on its way), failing after 10 s. */
async function eventually(holds: () => boolean): Promise<void> {
  for (const started = Date.now(); !holds(); await new Promise((resolve) => setTimeout(resolve, 10))) {
    if (Date.now() - started > 10_000) throw new Error('never came true');
  }
}

/** A raw Exchange stream and the replies it has received. */
function openExchange(client: EnclaveClient) {
  const stream = client.Exchange();
  const replies: ExchangeReplyIn[] = [];
  const waiters: Array<() => void> = [];
  const status = new Promise<grpc.StatusObject | grpc.ServiceError>((resolve) => {
    stream.on('error', resolve);
    stream.on('status', resolve);
  });
  stream.on('data', (message: ExchangeReplyIn) => {
    replies.push(message);
    waiters.splice(0).forEach((wake) => wake());
  });
  const received = async (n: number) => {
    while (replies.length < n) await new Promise<void>((wake) => waiters.push(wake));
  };
  const send = (message: ExchangeRequest) => stream.write(message);
  return { stream, replies, received, send, status };
}

describe('the enclave side of Exchange, played by a raw client (the host)', () => {
  it('answers each request by its number, as soon as it is done, in any order', async () => {
    const server = await enclave();
    const exchange = openExchange(rawClient(server.address));
    exchange.send({ id: 1, request: request('/first'), timeout_ms: 5000 });
    exchange.send({ id: 2, request: request('/second'), timeout_ms: 5000 });
    await server.reached(2);
    expect(server.served.map((s) => s.request.target)).toEqual(['/first', '/second']);
    server.served[1].answer(reply('two'));
    await exchange.received(1);
    server.served[0].answer(reply('one'));
    await exchange.received(2);
    expect(exchange.replies.map((r) => [r.id, r.failed, Buffer.from(r.reply!.body).toString(), r.reply!.headers['x-test']]))
      .toEqual([[2, false, 'two', 'two'], [1, false, 'one', 'one']]);
  });

  it('gives each request its own deadline from timeout_ms (none for 0), measured on arrival', async () => {
    const server = await enclave();
    const exchange = openExchange(rawClient(server.address));
    const before = Date.now();
    exchange.send({ id: 1, request: request('/a'), timeout_ms: 3000 });
    exchange.send({ id: 2, request: request('/b'), timeout_ms: 0 });
    await server.reached(2);
    expect(server.served[0].context.deadline).toBeGreaterThanOrEqual(before + 3000);
    expect(server.served[0].context.deadline).toBeLessThanOrEqual(Date.now() + 3000);
    expect(server.served[1].context.deadline).toBe(Infinity);
  });

  it('a number reused while its request runs is answered as failed, and the first is still answered', async () => {
    const server = await enclave();
    const exchange = openExchange(rawClient(server.address));
    exchange.send({ id: 5, request: request('/first'), timeout_ms: 5000 });
    await server.reached(1);
    exchange.send({ id: 5, request: request('/again'), timeout_ms: 5000 });
    await exchange.received(1);
    expect(exchange.replies[0]).toMatchObject({ id: 5, failed: true });
    expect(server.served).toHaveLength(1);
    server.served[0].answer(reply('first'));
    await exchange.received(2);
    expect(exchange.replies[1]).toMatchObject({ id: 5, failed: false });
    expect(Buffer.from(exchange.replies[1].reply!.body).toString()).toBe('first');
    // Once answered, the number may be used again.
    exchange.send({ id: 5, request: request('/later'), timeout_ms: 5000 });
    await server.reached(2);
    expect(server.served[1].request.target).toBe('/later');
  });

  it('a cancel aborts that request only, and its reply is never sent', async () => {
    const server = await enclave();
    const exchange = openExchange(rawClient(server.address));
    exchange.send({ id: 1, request: request('/kept'), timeout_ms: 5000 });
    exchange.send({ id: 2, request: request('/dropped'), timeout_ms: 5000 });
    await server.reached(2);
    exchange.send({ id: 2, cancel: true });
    exchange.send({ id: 99, cancel: true }); // nothing runs under 99: ignored
    await eventually(() => server.served[1].context.signal!.aborted);
    expect(server.served[0].context.signal!.aborted).toBe(false);
    server.served[1].answer(reply('late'));
    server.served[0].answer(reply('kept'));
    await exchange.received(1);
    await settle();
    expect(exchange.replies.map((r) => r.id)).toEqual([1]);
  });

  it('a request whose handler fails is answered as failed; one with no request inside is served as empty', async () => {
    const server = await enclave();
    const exchange = openExchange(rawClient(server.address));
    exchange.send({ id: 1, request: request('/boom'), timeout_ms: 5000 });
    exchange.send({ id: 2, timeout_ms: 5000 });
    await server.reached(2);
    server.served[0].fail(new Error('boom'));
    await exchange.received(1);
    expect(exchange.replies[0]).toMatchObject({ id: 1, failed: true, reply: null });
    expect(server.served[1].request).toMatchObject({ method: '', target: '', authorization: '' });
  });

  it('when the caller cancels the stream, every request still running on it is aborted', async () => {
    const server = await enclave();
    const exchange = openExchange(rawClient(server.address));
    exchange.send({ id: 1, request: request('/a'), timeout_ms: 0 });
    exchange.send({ id: 2, request: request('/b'), timeout_ms: 0 });
    await server.reached(2);
    exchange.stream.cancel();
    await eventually(() => server.served.every((s) => s.context.signal!.aborted));
  });

  it('when the caller half-closes, the requests running are still answered, then the stream ends', async () => {
    const server = await enclave();
    const exchange = openExchange(rawClient(server.address));
    exchange.send({ id: 1, request: request('/a'), timeout_ms: 0 });
    await server.reached(1);
    exchange.stream.end();
    await settle();
    server.served[0].answer(reply('a'));
    await exchange.received(1);
    expect(await exchange.status).toMatchObject({ code: grpc.status.OK });
  });

  it('a caller that sends requests but never reads the replies cannot make the enclave hold them without end', async () => {
    const server = await enclave({ maxUnsentExchangeBytes: 1024 * 1024 });
    const exchange = openExchange(rawClient(server.address));
    exchange.stream.pause(); // reads nothing: replies pile up in the enclave once HTTP/2's windows are full
    const big = Buffer.alloc(256 * 1024, 120);
    for (let id = 1; id <= 64; id++) exchange.send({ id, request: request(`/${id}`), timeout_ms: 0 });
    await server.reached(64);
    for (const s of server.served) s.answer({ status: 200, body: big, headers: {} });
    await settle();
    exchange.stream.resume();
    // 64 x 256 KiB = 16 MiB were answered; the enclave kept about 1 MiB beyond what the
    // connection had taken, dropped the rest and ended the stream.
    expect(await exchange.status).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED });
    expect(exchange.replies.length).toBeLessThan(32);
    // The enclave itself is fine: a new stream is served.
    const next = openExchange(rawClient(server.address));
    next.send({ id: 1, request: request('/next'), timeout_ms: 0 });
    await server.reached(65);
    server.served[64].answer(reply('next'));
    await next.received(1);
    expect(next.replies[0]).toMatchObject({ id: 1, failed: false });
  });
});

describe("the proxy's side: EnclaveConnection.call over the exchange", () => {
  it('carries many calls on one stream, each resolved with its own reply', async () => {
    const server = await enclave();
    const connection = new EnclaveConnection(server.address, 5000);
    stops.push(() => connection.close());
    const calls = ['/x', '/y', '/z'].map((target) => connection.call({ requestId: target, method: 'GET', target }));
    await server.reached(3);
    for (const s of [...server.served].reverse()) s.answer(reply(s.request.target));
    const replies = await Promise.all(calls);
    expect(replies.map((r) => Buffer.from(r.body).toString())).toEqual(['/x', '/y', '/z']);
  });

  it('gives up at its deadline with a 504, and tells the enclave to abandon the work', async () => {
    const server = await enclave();
    const connection = new EnclaveConnection(server.address, 5000);
    stops.push(() => connection.close());
    const call = connection.call({ requestId: 'slow', method: 'GET', target: '/slow' }, { timeoutMs: 300 });
    await server.reached(1);
    const error = await call.catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(504);
    await eventually(() => server.served[0].context.signal!.aborted);
  });

  it('an aborted call is given up at once and abandoned in the enclave; the others go on', async () => {
    const server = await enclave();
    const connection = new EnclaveConnection(server.address, 5000);
    stops.push(() => connection.close());
    const controller = new AbortController();
    const dropped = connection.call({ requestId: 'a', method: 'GET', target: '/a' }, { signal: controller.signal });
    const kept = connection.call({ requestId: 'b', method: 'GET', target: '/b' });
    await server.reached(2);
    controller.abort();
    await expect(dropped).rejects.toBeInstanceOf(ApiError);
    await eventually(() => server.served[0].context.signal!.aborted);
    server.served[1].answer(reply('b'));
    expect(Buffer.from((await kept).body).toString()).toBe('b');
  });

  it('a failed request is a 502 enclave_error; when the connection drops, calls on it fail with 503, and the next call opens a new stream', async () => {
    const server = await enclave();
    const line = await cuttableLine(server.address);
    const connection = new EnclaveConnection(line.address, 5000);
    stops.push(() => connection.close());
    const failing = connection.call({ requestId: 'f', method: 'GET', target: '/f' });
    await server.reached(1);
    server.served[0].fail(new Error('boom'));
    await expect(failing).rejects.toMatchObject({ status: 502, code: 'enclave_error' });

    const stranded = connection.call({ requestId: 's', method: 'GET', target: '/s' });
    await server.reached(2);
    line.cut();
    await expect(stranded).rejects.toMatchObject({ status: 503 });
    await eventually(() => server.served[1].context.signal!.aborted);

    const again = (async () => {
      // grpc-js reconnects with back-off: a call may come while it is still reconnecting.
      for (;;) {
        try {
          return await connection.call({ requestId: 'n', method: 'GET', target: '/new' }, { timeoutMs: 2000 });
        } catch (err) {
          if ((err as ApiError).status !== 503) throw err;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    })();
    await server.reached(3);
    server.served[2].answer(reply('back'));
    expect(Buffer.from((await again).body).toString()).toBe('back');
  });
});
