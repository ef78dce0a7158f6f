import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, ResponseSignatureError } from '../../sdk/client.js';
import { expectError, request } from '../helpers/http.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { startService, waitFor, type RunningService } from '../helpers/service.js';
import { logsCaughtUp } from '../helpers/log-barrier.js';

/**
 * Chat completions through both real processes, with a real HTTP server on loopback as the
 * upstream model, called by the official `openai` client exactly as an application would.
 */

const MODEL_KEY = 'sk-enclave-only-model-key-4f1c';
let model: ModelServer;
let svc: RunningService;
const ids: Record<string, string> = {};

const client = (organization?: string) =>
  new OpenAI({ baseURL: `${svc.baseUrl}/v1`, apiKey: 'client-side-key', organization, maxRetries: 0 });

const addMemory = async (tenant_id: string, content: string) => {
  const res = await request(svc.baseUrl, 'POST', '/v1/memory', { content, tenant_id });
  expect(res.status).toBe(200);
  return res.body.id as string;
};

const lastRequest = () => model.requests[model.requests.length - 1];
const memoryMessages = (body: any) =>
  body.messages.filter((m: any) => m.role === 'system' && String(m.content).includes('<memories>'));

beforeAll(async () => {
  model = await startModelServer();
  svc = await startService({ MODEL_BASE_URL: model.url, MODEL_API_KEY: MODEL_KEY });
  ids.rex = await addMemory('org-a', 'My dog is called Rex');
  ids.lisbon = await addMemory('org-a', 'Our office is in Lisbon near the river');
  ids.whiskers = await addMemory('org-b', 'My cat is called Whiskers');
});
afterAll(async () => {
  await svc?.stop();
  await model?.close();
});

describe('the openai client works unchanged', () => {
  it('plain call: a chat.completion from the upstream model, called with the enclave\'s key', async () => {
    const before = model.requests.length;
    const completion = await client().chat.completions.create({
      model: 'echo', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hello there' }],
      temperature: 0.3, max_tokens: 20, seed: 7, user: 'end-user-1',
    });
    expect(completion).toMatchObject({
      object: 'chat.completion', model: 'echo',
      choices: [{ index: 0, message: { role: 'assistant', content: 'echo: hello there' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    });
    expect(typeof completion.id).toBe('string');
    expect(typeof completion.created).toBe('number');
    expect((completion as any).memory_ids).toEqual([]);

    expect(model.requests.length).toBe(before + 1);
    const sent = lastRequest();
    expect(sent.method).toBe('POST');
    expect(sent.path).toBe('/v1/chat/completions');
    expect(sent.headers.authorization).toBe(`Bearer ${MODEL_KEY}`);
    // Options pass through untouched; the client's own key never reaches the model.
    expect(sent.body).toMatchObject({ model: 'echo', temperature: 0.3, max_tokens: 20, seed: 7, user: 'end-user-1' });
    expect(JSON.stringify(sent.headers)).not.toContain('client-side-key');
  });

  it('streaming call: chat.completion.chunk events as they come, ending with [DONE]', async () => {
    const stream = await client().chat.completions.create({
      model: 'echo', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'stream me please' }],
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
    expect(new Set(chunks.filter((c) => c.choices.length > 0).map((c) => c.id)).size).toBe(1);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe('echo: stream me please');
    expect(chunks.filter((c) => c.choices[0]?.finish_reason === 'stop')).toHaveLength(1);
    expect(chunks.find((c) => c.usage)).toMatchObject({ choices: [], usage: { total_tokens: 15 } });
    // The last chunk carries the enclave's signature of the stream: no choices, so clients pass over it.
    expect(chunks.at(-1)).toMatchObject({ object: 'chat.completion.chunk', type: 'tee.signature', choices: [], tee_signature: { signature: expect.any(String) } });
    expect(lastRequest().body.stream).toBe(true);
  });

  it('streaming arrives as Server-Sent Events, ending with data: [DONE]', async () => {
    const res = await fetch(`${svc.baseUrl}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo', stream: true, messages: [{ role: 'user', content: 'sse' }] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = (await res.text()).split('\n\n').filter(Boolean);
    // Just before [DONE], a chunk with no choices that carries the enclave's signature of the stream.
    expect(events.at(-2)).toMatch(/^data: \{"object":"chat\.completion\.chunk","type":"tee\.signature","choices":\[\],"tee_signature":\{"signature":"[A-Za-z0-9+/=]+","timestamp":"\d+","state":"\d+:[0-9a-f]{64}","store":"[0-9a-f]{32}","shard":"\d+\/\d+"(,"tenant":"[^"]*")?(,"upstream":"[^"]*")?\}\}$/);
    expect(events.every((e) => e.startsWith('data: '))).toBe(true);
    expect(events.at(-1)).toBe('data: [DONE]');
  });

  it('a streamed answer is signed by the enclave: the sdk verifies it and catches a changed byte', async () => {
    const tee = await connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem: readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8') });
    const body = JSON.stringify({ model: 'echo', stream: true, messages: [{ role: 'user', content: 'signed stream' }] });
    const res = await fetch(`${svc.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const transcript = new Uint8Array(await res.arrayBuffer());
    const request = { method: 'POST', target: '/v1/chat/completions', organization: '', body: new Uint8Array(Buffer.from(body)) };
    const { body: verified } = tee.verifyStream(request, res.status, transcript);
    expect(Buffer.from(verified).toString()).toContain('"finish_reason":"stop"');
    expect(Buffer.from(transcript).toString()).toMatch(/data: \[DONE\]\n\n$/);

    const at = Buffer.from(transcript).indexOf('chat.completion.chunk');
    expect(at).toBeGreaterThan(0);
    const tampered = Uint8Array.from(transcript);
    tampered[at] ^= 0x01;
    expect(() => tee.verifyStream(request, res.status, tampered)).toThrow(ResponseSignatureError);
  });

  it('a streamed Responses answer carries its signature inside response.completed: the sdk verifies it and catches a changed byte there', async () => {
    const tee = await connect({ insecureSkipPcrPinning: true, baseUrl: svc.baseUrl, rootPem: readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8') });
    const body = JSON.stringify({ model: 'echo', stream: true, input: 'signed responses stream' });
    const res = await fetch(`${svc.baseUrl}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const transcript = new Uint8Array(await res.arrayBuffer());
    const events = Buffer.from(transcript).toString().split('\n\n').filter(Boolean);
    expect(events.at(-1)).toMatch(/^data: \{"type":"response\.completed",.*"tee_signature":\{"signature":"[A-Za-z0-9+/=]+"/);
    expect(events.some((e) => e.includes('"type":"tee.signature"'))).toBe(false);
    const request = { method: 'POST', target: '/v1/responses', organization: '', body: new Uint8Array(Buffer.from(body)) };
    expect(Buffer.from(tee.verifyStream(request, res.status, transcript).body).toString()).toContain('"output_text":"echo: signed responses stream"');

    const tampered = Buffer.from(Buffer.from(transcript).toString().replace('"output_text":"echo: signed', '"output_text":"ECHO: signed'));
    expect(() => tee.verifyStream(request, res.status, new Uint8Array(tampered))).toThrow(ResponseSignatureError);
  });

  it('the SDK\'s stream helper accumulates the answer', async () => {
    const runner = client().chat.completions.stream({ model: 'echo', messages: [{ role: 'user', content: 'accumulate' }] });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0].message.content).toBe('echo: accumulate');
  });
});

describe('memory augmentation, per tenant', () => {
  it('the organization option selects the tenant: its memories reach the model, another tenant\'s never', async () => {
    const { data: completion, response } = await client('org-a').chat.completions
      .create({ model: 'echo', messages: [{ role: 'system', content: 'You are helpful.' }, { role: 'user', content: 'what is my dog called?' }] })
      .withResponse();
    const sent = lastRequest().body;
    const [memory] = memoryMessages(sent);
    expect(memory.content).toContain('My dog is called Rex');
    expect(memory.content).toContain(`id="${ids.rex}"`);
    expect(JSON.stringify(sent)).not.toContain('Whiskers');
    // Delimited, just before the question; the client's system prompt stays first.
    expect(memory.content).toMatch(/<memories>\n[\s\S]*<\/memories>$/);
    expect(sent.messages.map((m: any) => m.role)).toEqual(['system', 'system', 'user']);
    expect(sent.messages[0].content).toBe('You are helpful.');
    expect(sent.messages[2].content).toBe('what is my dog called?');
    // Audit: the ids used, in the body and in a header.
    const used = (completion as any).memory_ids as string[];
    expect(used).toContain(ids.rex);
    expect(used).not.toContain(ids.whiskers);
    expect(response.headers.get('x-memory-ids')!.split(',')).toEqual(used);

    await client('org-b').chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'what is my cat called?' }] });
    const sentB = JSON.stringify(lastRequest().body);
    expect(sentB).toContain('My cat is called Whiskers');
    expect(sentB).not.toContain('Rex');
    expect(sentB).not.toContain('Lisbon');
  });

  it('the organization_id header selects the tenant too', async () => {
    const res = await request(svc.baseUrl, 'POST', '/v1/chat/completions',
      { model: 'echo', messages: [{ role: 'user', content: 'what is my cat called?' }] }, { organization_id: 'org-b' });
    expect(res.status).toBe(200);
    expect(res.body.memory_ids).toEqual([ids.whiskers]);
    expect(res.headers.get('x-memory-ids')).toBe(ids.whiskers);
    expect(memoryMessages(lastRequest().body)[0].content).toContain('Whiskers');
    // The tenant is the service's business: it is not passed on to the model.
    expect(lastRequest().headers).not.toHaveProperty('organization_id');
    expect(lastRequest().headers).not.toHaveProperty('openai-organization');
  });

  it('no organization: no memories and no memory tools', async () => {
    const messages = [{ role: 'user' as const, content: 'what is my dog called?' }];
    const completion = await client().chat.completions.create({ model: 'echo', messages });
    expect(lastRequest().body.messages).toEqual(messages);
    expect(lastRequest().body.tools).toBeUndefined();
    expect((completion as any).memory_ids).toEqual([]);
  });

  it('an organization without memories gets none, and sees no other tenant\'s', async () => {
    await client('org-empty').chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'what is my dog called?' }] });
    expect(memoryMessages(lastRequest().body)).toEqual([]);
    expect(JSON.stringify(lastRequest().body)).not.toMatch(/Rex|Whiskers/);
  });

  it('streaming reports the memories used too', async () => {
    const { data: stream, response } = await client('org-a').chat.completions
      .create({ model: 'echo', stream: true, messages: [{ role: 'user', content: 'what is my dog called?' }] })
      .withResponse();
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk as any);
    expect(response.headers.get('x-memory-ids')!.split(',')).toContain(ids.rex);
    expect(chunks[0].memory_ids).toContain(ids.rex);
    expect(chunks.find((c) => c.choices[0]?.finish_reason).memory_ids).toContain(ids.rex);
    expect(memoryMessages(lastRequest().body)[0].content).toContain('Rex');
  });
});

describe('memory tools', () => {
  it('the model searches memory, the enclave runs it for the tenant, the model answers', async () => {
    const before = model.requests.length;
    const completion = await client('org-a').chat.completions.create({ model: 'tool-search', messages: [{ role: 'user', content: 'remind me about my pet' }] });
    expect(completion.choices[0].finish_reason).toBe('stop');
    expect(completion.choices[0].message.tool_calls).toBeUndefined();
    expect(completion.choices[0].message.content).toContain('My dog is called Rex');
    expect((completion as any).memory_ids).toContain(ids.rex);
    expect(completion.usage?.total_tokens).toBe(30); // two rounds of 15

    expect(model.requests.length).toBe(before + 2);
    const [first, second] = model.requests.slice(before).map((r) => r.body);
    expect(first.tools.map((t: any) => t.function.name)).toEqual(['search_memory', 'add_memory']);
    const toolMessage = second.messages.find((m: any) => m.role === 'tool');
    expect(toolMessage.tool_call_id).toBe('call_s1');
    expect(JSON.parse(toolMessage.content).memories[0]).toMatchObject({ id: ids.rex, content: 'My dog is called Rex' });
    expect(second.messages.find((m: any) => m.role === 'assistant').tool_calls[0]).toMatchObject({ id: 'call_s1', function: { name: 'search_memory' } });
  });

  it('a search runs against the request\'s tenant only', async () => {
    const completion = await client('org-b').chat.completions.create({ model: 'tool-search', messages: [{ role: 'user', content: 'remind me about my pet' }] });
    expect(completion.choices[0].message.content).toContain('Whiskers');
    expect(completion.choices[0].message.content).not.toContain('Rex');
  });

  it('streaming: tool rounds are invisible to the client, the answer streams on', async () => {
    const stream = await client('org-a').chat.completions.create({ model: 'tool-search', stream: true, messages: [{ role: 'user', content: 'remind me about my pet' }] });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.some((c) => c.choices[0]?.delta.tool_calls)).toBe(false);
    expect(chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean)).toEqual(['stop']);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toContain('My dog is called Rex');
  });

  it('the model saves a memory with add_memory, into the request\'s tenant', async () => {
    const completion = await client('org-c').chat.completions.create({ model: 'tool-add', messages: [{ role: 'user', content: 'I love green tea' }] });
    expect(completion.choices[0].message.content).toMatch(/^saved: .*"saved":true/);
    const found = await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=org-c&query=green%20tea');
    expect(found.body.data[0]).toMatchObject({ content: 'I love green tea (saved by the model)', metadata: { source: 'add_memory' } });
    const elsewhere = await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=org-a&query=green%20tea&top_k=100');
    expect(elsewhere.body.data.map((d: any) => d.content)).not.toContain('I love green tea (saved by the model)');
  });

  const weather = {
    type: 'function' as const,
    function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
  };

  it('client tools pass through untouched, and the model\'s call to them comes back to the client', async () => {
    const completion = await client('org-a').chat.completions.create({
      model: 'tool-client', tools: [weather], tool_choice: 'auto', messages: [{ role: 'user', content: 'weather in Lisbon?' }],
    });
    expect(completion.choices[0].finish_reason).toBe('tool_calls');
    expect(completion.choices[0].message.tool_calls).toEqual([{ id: 'call_w1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lisbon"}' } }]);
    const sent = lastRequest().body;
    expect(sent.tools[0]).toEqual(weather);
    expect(sent.tools.map((t: any) => t.function.name)).toEqual(['get_weather', 'search_memory', 'add_memory']);
    expect(sent.tool_choice).toBe('auto');

    // The client runs its tool and continues the conversation.
    const next = await client('org-a').chat.completions.create({
      model: 'echo', tools: [weather],
      messages: [
        { role: 'user', content: 'weather in Lisbon?' },
        completion.choices[0].message,
        { role: 'tool', tool_call_id: 'call_w1', content: '{"sky":"clear"}' },
        { role: 'user', content: 'thanks' },
      ],
    });
    expect(next.choices[0].message.content).toBe('echo: thanks');
  });

  it('streaming: the client\'s tool call streams to the client', async () => {
    const runner = client('org-a').chat.completions.stream({ model: 'tool-client', tools: [weather], messages: [{ role: 'user', content: 'weather?' }] });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0].finish_reason).toBe('tool_calls');
    expect(final.choices[0].message.tool_calls).toEqual([{ id: 'call_w1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lisbon"}' } }]);
  });

  it('when the model calls a memory tool and a client tool together, the client gets only its own', async () => {
    const completion = await client('org-a').chat.completions.create({ model: 'tool-both', tools: [weather], messages: [{ role: 'user', content: 'pet and weather' }] });
    expect(completion.choices[0].message.tool_calls!.map((c) => c.id)).toEqual(['call_w2']);

    const runner = client('org-a').chat.completions.stream({ model: 'tool-both', tools: [weather], messages: [{ role: 'user', content: 'pet and weather' }] });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0].message.tool_calls).toEqual([{ id: 'call_w2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Porto"}' } }]);
  });

  it('a client tool with a memory tool\'s name wins: the enclave does not offer its own', async () => {
    const own = { type: 'function' as const, function: { name: 'search_memory', parameters: { type: 'object' } } };
    const completion = await client('org-a').chat.completions.create({ model: 'tool-search', tools: [own], messages: [{ role: 'user', content: 'x' }] });
    expect(completion.choices[0].message.tool_calls![0]).toMatchObject({ type: 'function', function: { name: 'search_memory' } });
    expect(lastRequest().body.tools.map((t: any) => t.function.name)).toEqual(['search_memory', 'add_memory']);
    expect(lastRequest().body.tools[0]).toEqual(own);
  });
});

describe('the offline responder by name', () => {
  it('model "local-memory" is answered inside the enclave, even with an upstream configured', async () => {
    const before = model.requests.length;
    const completion = await client('org-a').chat.completions.create({ model: 'local-memory', messages: [{ role: 'user', content: 'what is my dog called?' }] });
    expect(completion.model).toBe('local-memory');
    expect(completion.choices[0].message.content).toContain('1. My dog is called Rex');
    expect(model.requests.length).toBe(before);
  });
});

describe('a client that goes away cancels the model call', () => {
  it('streaming: the upstream sees its connection closed', async () => {
    const abandoned = model.abandoned.length;
    const stream = await client('org-a').chat.completions.create({ model: 'slow-stream', stream: true, messages: [{ role: 'user', content: 'long answer' }] });
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) break; // leaving the loop aborts the request
    }
    await model.waitForAbandoned(abandoned + 1);
    expect(model.abandoned.at(-1)!.body.model).toBe('slow-stream');
  });

  it('not streaming: the upstream sees its connection closed', async () => {
    const abandoned = model.abandoned.length;
    const requests = model.requests.length;
    const controller = new AbortController();
    const pending = client().chat.completions.create({ model: 'hang', messages: [{ role: 'user', content: 'never answered' }] }, { signal: controller.signal });
    await waitFor(async () => model.requests.length > requests, 10_000);
    controller.abort();
    await expect(pending).rejects.toThrow();
    await model.waitForAbandoned(abandoned + 1);
    expect(model.abandoned.at(-1)!.body.model).toBe('hang');
  });

  it('the service keeps serving', async () => {
    const completion = await client().chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'still there?' }] });
    expect(completion.choices[0].message.content).toBe('echo: still there?');
  });
});

describe('bad chat requests are refused with 4xx', () => {
  const post = (body: unknown, headers?: Record<string, string>) => request(svc.baseUrl, 'POST', '/v1/chat/completions', body, headers);
  const user = { role: 'user', content: 'hi' };

  it.each([
    ['missing model', { messages: [user] }, 'model'],
    ['empty messages', { model: 'echo', messages: [] }, 'messages'],
    ['missing messages', { model: 'echo' }, 'messages'],
    ['unknown role', { model: 'echo', messages: [{ role: 'wizard', content: 'hi' }] }, 'messages.0.role'],
    ['non-string content', { model: 'echo', messages: [{ role: 'user', content: 42 }] }, 'messages.0.content'],
    ['an image part (only text is taken)', { model: 'echo', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }] }] }, 'messages.0.content.0.type'],
    ['stream not a boolean', { model: 'echo', messages: [user], stream: 'yes' }, 'stream'],
  ])('%s', async (_name, body, param) => {
    const before = model.requests.length;
    const err = expectError(await post(body), 400);
    expect(err.param).toBe(param);
    expect(err.type).toBe('invalid_request_error');
    expect(model.requests.length).toBe(before);
  });

  it('an invalid organization', async () => {
    expect(expectError(await post({ model: 'echo', messages: [user] }, { organization_id: 'a/b' }), 400).param).toBe('organization_id');
    expect(expectError(await post({ model: 'echo', messages: [user] }, { 'openai-organization': 'x'.repeat(200) }), 400).param).toBe('openai-organization');
  });

  it('deeply nested JSON in a field passed on to the model: 400, never a 500 or a stack trace', async () => {
    const before = model.requests.length;
    const deep = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
    for (const levels of [65, 5_000]) {
      const body = `{"model":"echo","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":${deep(levels)}}}]}`;
      const err = expectError(await post(body, { 'content-type': 'application/json' }), 400, 'invalid_json');
      expect(err.message).toMatch(/nested more than 64 levels/);
    }
    expect(model.requests.length).toBe(before);
    expect(svc.output()).not.toMatch(/Maximum call stack|RangeError/);
  });

  it('invalid JSON and a non-object body', async () => {
    expectError(await post('{"model":', { 'content-type': 'application/json' }), 400, 'invalid_json');
    expectError(await post('[1]'), 400, 'invalid_type');
  });

  it('the openai client raises them as BadRequestError', async () => {
    await expect(client().chat.completions.create({ model: 'echo', messages: [] })).rejects.toMatchObject({ status: 400, code: 'empty_array', param: 'messages' });
    await expect(client().chat.completions.create({ model: 'echo', stream: true, messages: [{ role: 'wizard' as 'user', content: 'x' }] }))
      .rejects.toBeInstanceOf(OpenAI.BadRequestError);
  });
});

describe('secrets and logs', () => {
  it('the model key and the conversation never reach the logs', async () => {
    const marker = 'Quetzalcoatl-private-question';
    await client('org-a').chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: marker }] });
    await client('org-a').chat.completions.create({ model: 'tool-search', messages: [{ role: 'user', content: marker }] });
    await logsCaughtUp(svc.baseUrl, svc.output);
    expect(svc.output()).toContain('"route":"ChatCompletion"');
    expect(svc.output()).not.toContain(MODEL_KEY);
    expect(svc.output()).not.toContain(marker);
    expect(svc.output()).not.toContain('My dog is called Rex');
  });
});
