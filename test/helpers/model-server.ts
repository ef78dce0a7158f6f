import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { DECISION_PROMPT, FACTS_PROMPT } from '../../enclave/chat/extraction-prompt.js';

/**
 * A real OpenAI-compatible chat model server on loopback, standing in for what lies outside
 * the system (OpenAI, vLLM, Ollama…). It records every request it receives, and its
 * behaviour is chosen by the request's `model`, so one server serves every scenario:
 *
 *   echo            answers "echo: <latest user message>" (streams it in pieces with stream: true)
 *   echo-paced      the same, each piece 30 ms after the last, as a model streams tokens
 *   fail-500        500 with an error message that quotes the API key
 *   unauthorized    401 that quotes the API key
 *   bad-request     400 with the model's own message
 *   hang            accepts the request and never answers
 *   malformed       200 with broken JSON
 *   break-stream    streams two chunks, then drops the connection
 *   stall-stream    streams one chunk, then goes silent
 *   slow-stream     streams one chunk, then waits for the client to go away
 *   tool-search     asks for search_memory, then answers with what the tool returned
 *   tool-add        asks for add_memory, then answers "saved"
 *   tool-client     asks for the client's get_weather tool
 *   tool-both       asks for search_memory and get_weather in one turn
 *
 * A model name given to script() answers with whatever its script returns for the request
 * (the assistant message's text). A name not listed above, asked with extraction's prompts
 * (enclave/chat/extraction-prompt.ts), extracts like a plain model would, by rule: each
 * sentence of the user's that is not a question is a fact, and a fact is NONE when a memory
 * shown says exactly that, ADD otherwise.
 */

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
}

export interface ModelServer {
  url: string;
  requests: RecordedRequest[];
  /** Requests whose connection closed before the server finished answering. */
  abandoned: RecordedRequest[];
  /** Resolves once `n` requests have been abandoned by the caller. */
  waitForAbandoned(n: number): Promise<void>;
  /** Requests naming `model` are answered with the text `answer` returns for their body. */
  script(model: string, answer: (body: any) => string): void;
  close(): Promise<void>;
}

export const API_KEY_IN_ERRORS = 'sk-test-secret-model-key-0123456789';

export interface ModelServerOptions {
  /** Serve HTTPS with this certificate and key (PEM), e.g. from test/helpers/certs.ts. */
  tls?: { cert: string; key: string };
}

export async function startModelServer(options: ModelServerOptions = {}): Promise<ModelServer> {
  const requests: RecordedRequest[] = [];
  const abandoned: RecordedRequest[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const scripts = new Map<string, (body: any) => string>();

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => { raw += d; });
    req.on('end', () => {
      let body: any;
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
      const recorded = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body };
      requests.push(recorded);
      res.on('close', () => {
        if (res.writableFinished) return;
        abandoned.push(recorded);
        for (const w of waiters.filter((w) => abandoned.length >= w.n)) w.resolve();
      });
      const script = scripts.get(body?.model);
      if (script) json(res, 200, completion(body, { content: script(body) }));
      else behave(body, res);
    });
  };
  const server: Server = options.tls ? createHttpsServer(options.tls, handle) : createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}/v1`,
    requests,
    abandoned,
    waitForAbandoned: (n) => new Promise((resolve) => {
      if (abandoned.length >= n) resolve();
      else waiters.push({ n, resolve });
    }),
    script: (model, answer) => void scripts.set(model, answer),
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

const latestUser = (body: any): string =>
  [...(body.messages ?? [])].reverse().find((m: any) => m.role === 'user')?.content ?? '';

function completion(body: any, message: object, finish = 'stop') {
  return {
    id: 'chatcmpl-upstream-1', object: 'chat.completion', created: 1700000000, model: body.model,
    choices: [{ index: 0, message: { role: 'assistant', content: null, ...message }, finish_reason: finish, logprobs: null }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
}

const chunk = (body: any, delta: object, finish: string | null = null) => ({
  id: 'chatcmpl-upstream-s', object: 'chat.completion.chunk', created: 1700000000, model: body.model,
  choices: [{ index: 0, delta, finish_reason: finish }],
});

function json(res: ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

function sse(res: ServerResponse, events: unknown[], end = true): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const e of events) res.write(`data: ${JSON.stringify(e)}\n\n`);
  if (end) res.end('data: [DONE]\n\n');
}

/** sse(), one event every `ms`. */
function ssePaced(res: ServerResponse, events: unknown[], ms: number): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const next = (i: number) => {
    if (res.destroyed) return;
    if (i === events.length) return void res.end('data: [DONE]\n\n');
    res.write(`data: ${JSON.stringify(events[i])}\n\n`);
    setTimeout(() => next(i + 1), ms);
  };
  next(0);
}

/** An answer with text, streamed in three pieces (and usage when asked for) or whole. */
function answer(body: any, res: ServerResponse, text: string, pacedMs?: number): void {
  if (!body.stream) return json(res, 200, completion(body, { content: text }));
  const third = Math.ceil(text.length / 3);
  const events: unknown[] = [
    chunk(body, { role: 'assistant', content: '' }),
    ...[0, 1, 2].map((i) => chunk(body, { content: text.slice(i * third, (i + 1) * third) })),
    chunk(body, {}, 'stop'),
  ];
  if (body.stream_options?.include_usage) {
    events.push({ ...chunk(body, {}), choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } });
  }
  if (pacedMs !== undefined) return ssePaced(res, events, pacedMs);
  sse(res, events);
}

type Call = { id: string; name: string; arguments: string };

/** Asks for tools: whole, or streamed with each call's arguments split across two chunks. */
function askTools(body: any, res: ServerResponse, calls: Call[]): void {
  const tool_calls = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  if (!body.stream) return json(res, 200, completion(body, { tool_calls }, 'tool_calls'));
  const events: unknown[] = [chunk(body, { role: 'assistant', content: null })];
  calls.forEach((c, index) => {
    const half = Math.floor(c.arguments.length / 2);
    events.push(chunk(body, { tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments.slice(0, half) } }] }));
    events.push(chunk(body, { tool_calls: [{ index, function: { arguments: c.arguments.slice(half) } }] }));
  });
  events.push(chunk(body, {}, 'tool_calls'));
  sse(res, events);
}

const toolResults = (body: any): any[] => (body.messages ?? []).filter((m: any) => m.role === 'tool');

/** A plain extractor (see the top): the facts of the conversation, then ADD or NONE for each. */
function extractByRule(body: any): string | undefined {
  const system = body?.messages?.[0]?.content;
  const input = String(body?.messages?.[1]?.content ?? '');
  if (system === FACTS_PROMPT) {
    const said = input.split('\n').filter((line) => line.startsWith('user: ')).map((line) => line.slice(6));
    return JSON.stringify({ facts: said.flatMap((text) => text.match(/[^.!?]+[.!?]?/g) ?? []).map((s) => s.trim()).filter((s) => s && !s.endsWith('?')) });
  }
  if (system === DECISION_PROMPT) {
    const { memories, facts } = JSON.parse(input) as { memories: { id: string; text: string }[]; facts: string[] };
    return JSON.stringify({ actions: facts.map((fact) => {
      const held = memories.find((m) => m.text.toLowerCase() === fact.toLowerCase());
      return held ? { event: 'NONE', id: held.id } : { event: 'ADD', text: fact };
    }) });
  }
  return undefined;
}

function behave(body: any, res: ServerResponse): void {
  switch (body?.model) {
    case 'fail-500':
      return json(res, 500, { error: { message: `the GPU caught fire (key ${API_KEY_IN_ERRORS})`, type: 'server_error' } });
    case 'unauthorized':
      return json(res, 401, { error: { message: `Incorrect API key provided: ${API_KEY_IN_ERRORS}`, type: 'invalid_request_error' } });
    case 'bad-request':
      return json(res, 400, { error: { message: 'max_tokens is too large for this model', type: 'invalid_request_error' } });
    case 'hang':
      return;
    case 'malformed':
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end('{"id": "chatcmpl-1", "choices": [');
    case 'break-stream':
      sse(res, [chunk(body, { role: 'assistant', content: '' }), chunk(body, { content: 'partial ' })], false);
      return void setTimeout(() => res.socket?.destroy(), 50);
    case 'stall-stream':
    case 'slow-stream':
      return sse(res, [chunk(body, { role: 'assistant', content: '' }), chunk(body, { content: 'first piece' })], false);
    case 'tool-search': {
      const results = toolResults(body);
      if (results.length === 0) return askTools(body, res, [{ id: 'call_s1', name: 'search_memory', arguments: '{"query":"what is my pet called"}' }]);
      return answer(body, res, `tool said: ${results.map((r) => r.content).join(' | ')}`);
    }
    case 'tool-add':
      if (toolResults(body).length === 0) {
        return askTools(body, res, [{ id: 'call_a1', name: 'add_memory', arguments: JSON.stringify({ content: `${latestUser(body)} (saved by the model)` }) }]);
      }
      return answer(body, res, `saved: ${toolResults(body)[0].content}`);
    case 'tool-add-50':
      // A model that answers one question with fifty add_memory calls (hold round two, 5).
      if (toolResults(body).length === 0) {
        return askTools(body, res, Array.from({ length: 50 }, (_, i) => ({ id: `call_m${i}`, name: 'add_memory', arguments: JSON.stringify({ content: `fact number ${i} from the model` }) })));
      }
      return answer(body, res, `saved ${toolResults(body).filter((r) => r.content.includes('"saved":true')).length}`);
    case 'tool-client':
      return askTools(body, res, [{ id: 'call_w1', name: 'get_weather', arguments: '{"city":"Lisbon"}' }]);
    case 'tool-both':
      return askTools(body, res, [
        { id: 'call_s2', name: 'search_memory', arguments: '{"query":"pet"}' },
        { id: 'call_w2', name: 'get_weather', arguments: '{"city":"Porto"}' },
      ]);
    case 'echo-paced':
      return answer(body, res, `echo: ${latestUser(body)}`, 30);
    default: {
      const extracted = extractByRule(body);
      if (extracted !== undefined) return json(res, 200, completion(body, { content: extracted }));
      return answer(body, res, `echo: ${latestUser(body)}`);
    }
  }
}
