import { PassThrough } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import type { EnclaveClient, ExchangeRequest } from '../../common/proto.js';
import { transportError } from '../../proxy/enclave-client.js';
import { EnclaveExchange } from '../../proxy/enclave-exchange.js';

/**
 * The proxy's bookkeeping of the Exchange stream, with stand-in streams whose events the test
 * orders (test/integration/exchange.test.ts plays the same over real gRPC).
 */
function standIn() {
  const streams: Array<PassThrough & { sent: ExchangeRequest[]; cancel(): void }> = [];
  const client = {
    Exchange: () => {
      const stream = Object.assign(new PassThrough({ objectMode: true }), { sent: [] as ExchangeRequest[], cancel: () => {} });
      stream.write = ((message: ExchangeRequest) => { stream.sent.push(message); return true; }) as never;
      streams.push(stream);
      return stream;
    },
  } as unknown as EnclaveClient;
  return { exchange: new EnclaveExchange(client, transportError), streams };
}

const reply = { status: 200, body: Buffer.from('ok'), headers: {} };
const request = { request_id: 'r', method: 'GET', target: '/v1/attestation', body: Buffer.alloc(0), authorization: '', organization: '', known_state: '' };
const unavailable = Object.assign(new Error('dropped'), { code: grpc.status.UNAVAILABLE, details: 'dropped', metadata: new grpc.Metadata() });

describe('EnclaveExchange', () => {
  it("a failed stream fails only its own requests, even when its last event comes after a new stream's requests", async () => {
    const { exchange, streams } = standIn();
    const first = exchange.call(request, 5000);
    streams[0].emit('error', unavailable);
    await expect(first).rejects.toMatchObject({ status: 503 });

    const second = exchange.call(request, 5000);
    expect(streams).toHaveLength(2);
    streams[0].emit('end'); // the old stream's readable side ends late
    const id = streams[1].sent[0].id!;
    streams[1].emit('data', { id, reply, failed: false });
    await expect(second).resolves.toMatchObject({ status: 200 });
  });

  it('numbers requests uniquely among those in flight, and ignores a reply for a number nobody waits for', async () => {
    const { exchange, streams } = standIn();
    const calls = [exchange.call(request, 5000), exchange.call(request, 5000)];
    const ids = streams[0].sent.map((m) => m.id);
    expect(new Set(ids).size).toBe(2);
    streams[0].emit('data', { id: 12345, reply, failed: false });
    streams[0].emit('data', { id: ids[1], reply: null, failed: true });
    streams[0].emit('data', { id: ids[0], reply, failed: false });
    await expect(calls[0]).resolves.toMatchObject({ status: 200 });
    await expect(calls[1]).rejects.toMatchObject({ status: 502, code: 'enclave_error' });
  });
});
