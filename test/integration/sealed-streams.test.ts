import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, SealedCallError, type TeeClient } from '../../sdk/client.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { startEventEditingRelay, startRecordingRelay, type EventEditingRelay, type RecordingRelay } from '../helpers/relay.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * Sealed streams (POST /v1/sealed/stream) against the real processes and a loopback model,
 * with a recording TCP relay on each side of the proxy, client ⇄ [front] ⇄ proxy ⇄ [back] ⇄
 * enclave, and an HTTP relay that edits the stream's events as a hostile host would.
 */
let model: ModelServer;
let svc: RunningService;
let front: RecordingRelay;
let back: RecordingRelay | undefined;
let editor: EventEditingRelay;
let tee: TeeClient;
let edited: TeeClient;

const CANARY = 'canary-9d41e7-Zephyrine';
const TENANT = 'org-canary-3b8f21';
// Long enough that each third the echo model streams holds a whole canary.
const PROMPT = Array.from({ length: 7 }, () => CANARY).join(' ');

const seen = (needle: string) => [front.upstream(), front.downstream(), back!.upstream(), back!.downstream()]
  .filter((bytes) => bytes.includes(Buffer.from(needle, 'utf8'))).length;

const readAll = async (stream: AsyncIterable<Uint8Array>) => {
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts).toString('utf8');
};

/** The text of a chat completion event stream. */
const chatText = (sse: string) => sse.split('\n\n').filter((e) => e.startsWith('data: {'))
  .map((e) => JSON.parse(e.slice(6)) as { choices: { delta?: { content?: string } }[] })
  .map((c) => c.choices[0]?.delta?.content ?? '').join('');

beforeAll(async () => {
  model = await startModelServer();
  svc = await startService({ MODEL_BASE_URL: model.url, MODEL_API_KEY: 'sk-model', MODEL_NAMES: 'echo' }, {
    proxyEnclaveAddr: async (enclaveAddr) => {
      back = await startRecordingRelay(enclaveAddr);
      return back.address;
    },
  });
  front = await startRecordingRelay(svc.baseUrl.replace('http://', ''));
  editor = await startEventEditingRelay(svc.baseUrl);
  const rootPem = readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8');
  tee = await connect({ insecureSkipPcrPinning: true, baseUrl: `http://${front.address}`, rootPem });
  edited = await connect({ insecureSkipPcrPinning: true, baseUrl: editor.baseUrl, rootPem });
});
afterAll(async () => {
  await front?.close();
  await editor?.close();
  await svc?.stop();
  await back?.close();
  await model?.close();
});

const chat = (client: TeeClient, content = PROMPT, model = 'echo') =>
  client.sealedStream('POST', '/v1/chat/completions', { model, stream: true, messages: [{ role: 'user', content }] }, { organization: TENANT });

describe('a sealed stream through the host', () => {
  it('a streamed chat arrives whole and verified, and no canary, tenant or route crosses the host in the clear', async () => {
    const stream = await chat(tee);
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
    const sse = await readAll(stream);
    expect(chatText(sse)).toBe(`echo: ${PROMPT}`);
    expect(sse.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(stream.verified?.state.seq).toEqual(expect.any(Number));
    // The model did get the prompt (TLS to it would end inside the enclave).
    expect(JSON.stringify(model.requests.at(-1)!.body)).toContain(CANARY);

    expect(front.upstream().includes(Buffer.from('POST /v1/sealed/stream HTTP/1.1'))).toBe(true);
    for (const needle of [CANARY, TENANT, '/v1/chat/completions', '"model":"echo"', 'x-memory-ids', '[DONE]']) expect(seen(needle), needle).toBe(0);
  });

  it('a streamed Responses call and a memory add (a unary route) travel the same way', async () => {
    const responses = await tee.sealedStream('POST', '/v1/responses', { model: 'echo', stream: true, input: `responses ${CANARY}` }, { organization: TENANT });
    const events = await readAll(responses);
    expect(events).toContain('"type":"response.completed"');
    expect(events).toContain(`echo: responses ${CANARY}`.slice(0, 10));
    const added = await tee.sealedStream('POST', '/v1/memory', { tenant_id: TENANT, content: `memory ${CANARY}` });
    expect(added.status).toBe(200);
    expect(JSON.parse(await readAll(added))).toMatchObject({ tenant_id: TENANT, content: `memory ${CANARY}` });
    expect(added.verified).toBeDefined();
    expect(seen(CANARY)).toBe(0);
    expect(seen('/v1/memory')).toBe(0);
  });

  it('an inner refusal keeps its status and error, sealed: 400 for a bad body, 404 for no route', async () => {
    const bad = await tee.sealedStream('POST', '/v1/chat/completions', { model: 'echo', stream: true, messages: [] }, { organization: TENANT });
    expect(bad.status).toBe(400);
    expect(JSON.parse(await readAll(bad)).error.param).toBe('messages');
    const none = await tee.sealedStream('POST', '/v1/sealed/stream', {});
    expect(none.status).toBe(404);
    expect(JSON.parse(await readAll(none)).error.code).toBe('unknown_route');
  });

  it('the enclave logs only the outer call, never the inner route', () => {
    const lines = svc.output().split('\n');
    expect(lines.filter((l) => l.includes('"route":"SealedStream"')).length).toBeGreaterThanOrEqual(4);
    expect(lines.filter((l) => l.includes('"route":"ChatCompletion"') || l.includes('"route":"CreateResponse"'))).toEqual([]);
  });
});

describe('a host that edits the stream is caught', () => {
  const attempt = async (edit: (events: string[]) => string[]) => {
    editor.edit = edit;
    try {
      // Paced, as a model streams tokens: each piece is a frame of its own (the enclave
      // gathers only what comes in one turn of its event loop into a frame).
      const stream = await chat(edited, 'a short chat', 'echo-paced');
      await readAll(stream);
      return undefined;
    } catch (error) {
      return error as Error;
    } finally {
      editor.edit = (events) => events;
    }
  };

  it('unedited, the same relay passes the stream (the attacks below are the only change)', async () => {
    expect(await attempt((events) => events)).toBeUndefined();
  });

  it('a stream cut before its final frame, even cleanly: SealedCallError naming the cut', async () => {
    // events: header, head, data…, end (the outer 200 is not signed); keep all but the end.
    const error = await attempt((events) => events.slice(0, -1));
    expect(error).toBeInstanceOf(SealedCallError);
    expect(error!.message).toMatch(/cut/);
  });

  it('a frame dropped, repeated or swapped: SealedCallError, never altered text', async () => {
    for (const edit of [
      (e: string[]) => [...e.slice(0, 3), ...e.slice(4)],
      (e: string[]) => [...e.slice(0, 4), e[3], ...e.slice(4)],
      (e: string[]) => [e[0], e[1], e[3], e[2], ...e.slice(4)],
    ]) {
      const error = await attempt(edit);
      expect(error).toBeInstanceOf(SealedCallError);
      expect(error!.message).toMatch(/does not open in its place/);
    }
  });

  it('a stream replayed to a later call does not open', async () => {
    let recorded: string[] = [];
    await attempt((events) => { recorded = events; return events; });
    const error = await attempt(() => recorded);
    expect(error).toBeInstanceOf(SealedCallError);
  });
});
