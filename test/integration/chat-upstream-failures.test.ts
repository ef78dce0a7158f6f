import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, request } from '../helpers/http.js';
import { splitSignedStream } from '../../protocol/response-signature.js';
import { API_KEY_IN_ERRORS, startModelServer, type ModelServer } from '../helpers/model-server.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * Every way the upstream model can fail becomes a clean OpenAI-shaped error: 502 for a bad
 * answer, 504 for no answer in time, 503 when it cannot be reached; mid-stream failures end
 * the stream with an error event the openai client raises.
 */

let model: ModelServer;
let svc: RunningService;
let unreachable: RunningService;

const chat = (base: RunningService, body: object) => request(base.baseUrl, 'POST', '/v1/chat/completions', body);
const ask = (m: string, extra: object = {}) => ({ model: m, messages: [{ role: 'user', content: 'hello' }], ...extra });
const client = (base: RunningService) => new OpenAI({ baseURL: `${base.baseUrl}/v1`, apiKey: 'k', maxRetries: 0 });

/** The raw SSE events of a streamed request. */
async function streamEvents(m: string): Promise<{ status: number; events: string[] }> {
  const res = await fetch(`${svc.baseUrl}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ask(m, { stream: true })),
  });
  const transcript = new Uint8Array(await res.arrayBuffer());
  // Every stream ends with the enclave's signature event (after [DONE] or an error event).
  const signed = splitSignedStream(transcript);
  expect(signed, 'the stream is not signed').toBeDefined();
  return { status: res.status, events: Buffer.from(signed!.body).toString('utf8').split('\n\n').filter(Boolean) };
}

beforeAll(async () => {
  model = await startModelServer();
  [svc, unreachable] = await Promise.all([
    // The same key the fake server quotes in its error messages, to check it is scrubbed.
    startService({ MODEL_BASE_URL: model.url, MODEL_API_KEY: API_KEY_IN_ERRORS, MODEL_TIMEOUT_MS: '1500' }),
    // Port 1 (tcpmux): nobody listens there, so connections are refused. Not a port that was
    // free a moment ago: the service's own processes could be given that one next.
    startService({ MODEL_BASE_URL: 'http://127.0.0.1:1/v1', MODEL_CONNECT_RETRIES: '1' }),
  ]);
});
afterAll(async () => {
  await Promise.all([svc?.stop(), unreachable?.stop()]);
  await model?.close();
});

describe('upstream failures, not streamed', () => {
  it('500 → 502 with the model\'s message, the API key scrubbed from it', async () => {
    const err = expectError(await chat(svc, ask('fail-500')), 502, 'model_error');
    expect(err.type).toBe('upstream_error');
    expect(err.message).toContain('the GPU caught fire');
    expect(err.message).toContain('[redacted]');
    expect(err.message).not.toContain(API_KEY_IN_ERRORS);
  });

  it('the model refusing the key → 502 that does not echo the key', async () => {
    const res = await chat(svc, ask('unauthorized'));
    expectError(res, 502, 'model_auth_failed');
    expect(res.text).not.toContain(API_KEY_IN_ERRORS);
    expect(res.text).not.toContain('sk-');
  });

  it('the model refusing the request → its status and message', async () => {
    const err = expectError(await chat(svc, ask('bad-request')), 400, 'model_refused');
    expect(err.message).toContain('max_tokens is too large for this model');
  });

  it('no answer in time → 504', async () => {
    const err = expectError(await chat(svc, ask('hang')), 504, 'model_timeout');
    expect(err.type).toBe('timeout_error');
  });

  it('malformed JSON → 502', async () => {
    expectError(await chat(svc, ask('malformed')), 502, 'model_bad_response');
  });

  it('refused connection → 503', async () => {
    const err = expectError(await chat(unreachable, ask('echo')), 503, 'model_unreachable');
    expect(err.type).toBe('service_unavailable_error');
  });

  it('the openai client sees the same statuses', async () => {
    await expect(client(svc).chat.completions.create(ask('fail-500') as never)).rejects.toMatchObject({ status: 502, code: 'model_error' });
    await expect(client(svc).chat.completions.create(ask('hang') as never)).rejects.toMatchObject({ status: 504 });
    await expect(client(unreachable).chat.completions.create(ask('echo') as never)).rejects.toBeInstanceOf(OpenAI.InternalServerError);
  });
});

describe('upstream failures, streamed', () => {
  it('failures before the first byte are plain error replies with their status', async () => {
    expectError(await chat(svc, ask('fail-500', { stream: true })), 502, 'model_error');
    expectError(await chat(svc, ask('hang', { stream: true })), 504, 'model_timeout');
    expectError(await chat(unreachable, ask('echo', { stream: true })), 503, 'model_unreachable');
    await expect(client(svc).chat.completions.create(ask('unauthorized', { stream: true }) as never)).rejects.toMatchObject({ status: 502 });
  });

  it('a stream that breaks midway ends with an error event (502) and no [DONE]', async () => {
    const { status, events } = await streamEvents('break-stream');
    expect(status).toBe(200);
    expect(events.some((e) => e.includes('partial '))).toBe(true);
    const last = JSON.parse(events.at(-1)!.slice('data: '.length));
    expect(last).toEqual({ error: { message: expect.any(String), type: 'upstream_error', param: null, code: 'model_connection_broken' } });
    expect(events).not.toContain('data: [DONE]');
  });

  it('a stream that stalls ends with an error event (504)', async () => {
    const { events } = await streamEvents('stall-stream');
    expect(events.some((e) => e.includes('first piece'))).toBe(true);
    expect(JSON.parse(events.at(-1)!.slice('data: '.length)).error).toMatchObject({ type: 'timeout_error', code: 'model_timeout' });
  });

  it('the openai client raises the mid-stream error after the pieces that did arrive', async () => {
    const stream = await client(svc).chat.completions.create(ask('break-stream', { stream: true }) as never) as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>;
    let text = '';
    await expect((async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    })()).rejects.toBeInstanceOf(OpenAI.APIError);
    expect(text).toBe('partial ');
  });
});

describe('after all of that', () => {
  it('both processes are still up and the key never reached a log', async () => {
    expect(svc.enclave.exitCode).toBeNull();
    expect(svc.proxy.exitCode).toBeNull();
    expect((await chat(svc, ask('echo'))).body.choices[0].message.content).toBe('echo: hello');
    expect(svc.output()).not.toContain(API_KEY_IN_ERRORS);
  });
});
