import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, jsonSchema, streamText } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { startModelServer, type ModelServer } from '../helpers/model-server.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * Clients nobody on the project wrote, used the way their documentation says, against
 * both real processes and a loopback model: the official `openai` client, the Vercel AI
 * SDK (`ai` + `@ai-sdk/openai`, whose default provider calls /v1/responses) and LangChain
 * (`@langchain/openai`). Each gets the tenant from its own organization option.
 */

let model: ModelServer;
let svc: RunningService;
const ORG = 'clients-org';

const baseURL = () => `${svc.baseUrl}/v1`;
const weather = {
  type: 'function' as const,
  function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};
const lastModelRequest = () => model.requests[model.requests.length - 1];
const memoriesSentToModel = () => JSON.stringify(lastModelRequest().body.messages ?? []);

beforeAll(async () => {
  model = await startModelServer();
  svc = await startService({ MODEL_BASE_URL: model.url, MODEL_API_KEY: 'sk-model', MODEL_NAMES: 'echo,tool-client' });
  const added = await request(svc.baseUrl, 'POST', '/v1/memory', { content: 'The spare key is under the blue flowerpot', tenant_id: ORG });
  expect(added.status).toBe(200);
});
afterAll(async () => {
  await svc?.stop();
  await model?.close();
});

describe('openai', () => {
  const client = () => new OpenAI({ baseURL: baseURL(), apiKey: 'any', organization: ORG, maxRetries: 0 });

  it('chat, plain and streamed, with the tenant\'s memories', async () => {
    const completion = await client().chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'where is the spare key?' }] });
    expect(completion.choices[0].message.content).toBe('echo: where is the spare key?');
    expect(memoriesSentToModel()).toContain('blue flowerpot');
    const stream = await client().chat.completions.create({ model: 'echo', stream: true, messages: [{ role: 'user', content: 'streamed' }] });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('echo: streamed');
  });

  it('role developer and content as text parts, as current clients send them', async () => {
    const completion = await client().chat.completions.create({
      model: 'echo',
      messages: [{ role: 'developer', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'parts' }, { type: 'text', text: 'joined' }] }],
    });
    expect(completion.choices[0].message.content).toBe('echo: parts\n\njoined');
    const sent = lastModelRequest().body.messages;
    // Every OpenAI-compatible server knows `system`; not all know `developer`.
    expect(sent[0]).toEqual({ role: 'system', content: 'Be brief.' });
    await expect(client().chat.completions.create({
      model: 'echo', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }],
    })).rejects.toMatchObject({ status: 400, code: 'unsupported_content' });
  });

  it('tools: the model\'s call to a client tool comes back to the client', async () => {
    const completion = await client().chat.completions.create({ model: 'tool-client', tools: [weather], messages: [{ role: 'user', content: 'weather in Lisbon?' }] });
    expect(completion.choices[0].finish_reason).toBe('tool_calls');
    expect(completion.choices[0].message.tool_calls?.[0]).toMatchObject({ type: 'function', function: { name: 'get_weather' } });
  });

  it('the SDK\'s stream helpers: responses.stream().finalResponse(), chat.completions.stream().finalChatCompletion() and runTools (first hour, 5)', async () => {
    const openai = new OpenAI({ baseURL: baseURL(), apiKey: 'any', organization: ORG });
    const response = await openai.responses.stream({ model: 'echo', input: 'helpers please' }).finalResponse();
    expect(response.output_text).toBe('echo: helpers please');
    expect(response.status).toBe('completed');

    const completion = await openai.chat.completions.stream({ model: 'echo', messages: [{ role: 'user', content: 'chat helper' }] }).finalChatCompletion();
    expect(completion.choices[0].message.content).toBe('echo: chat helper');

    const calls: string[] = [];
    const runner = openai.chat.completions.runTools({
      model: 'tool-client',
      messages: [{ role: 'user', content: 'weather in Lisbon?' }],
      tools: [{ type: 'function', function: { ...weather.function, function: (args: { city: string }) => { calls.push(args.city); return 'sunny'; }, parse: JSON.parse } }],
      stream: true,
    } as Parameters<typeof openai.chat.completions.runTools>[0], { maxChatCompletions: 2 });
    // The stand-in model asks for the tool every time: the runner calls it, then stops at its limit.
    const errors: unknown[] = [];
    runner.on('error', (e) => errors.push(e));
    await runner.done().catch(() => undefined);
    expect(calls.length).toBeGreaterThan(0);
    expect(new Set(calls)).toEqual(new Set(['Lisbon']));
    expect(errors.map(String).join(' ')).not.toMatch(/Unhandled|tee\.signature/);
  });

  it('models.list and models.retrieve: the configured models and the offline local-memory', async () => {
    const ids: string[] = [];
    for await (const m of client().models.list()) ids.push(m.id);
    expect(ids).toEqual(expect.arrayContaining(['echo', 'tool-client', 'local-memory']));
    expect(await client().models.retrieve('local-memory')).toMatchObject({ id: 'local-memory', object: 'model' });
    await expect(client().models.retrieve('gpt-nothing')).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
  });

  it('embeddings.create: floats and base64 give the same unit vectors', async () => {
    const floats = await client().embeddings.create({ model: 'static-sif-100d', input: ['the cat sat', 'a dog ran'], encoding_format: 'float' });
    expect(floats.data).toHaveLength(2);
    expect(floats.data[0].embedding).toHaveLength(100);
    expect(Math.hypot(...floats.data[0].embedding)).toBeCloseTo(1, 4);
    // The client asks for base64 by default and decodes it itself.
    const decoded = await client().embeddings.create({ model: 'static-sif-100d', input: 'the cat sat' });
    expect(decoded.data[0].embedding.map((x) => Number(x.toFixed(5)))).toEqual(floats.data[0].embedding.map((x) => Number(x.toFixed(5))));
    expect(floats.usage.total_tokens).toBeGreaterThan(0);
  });
});

describe('Vercel AI SDK (ai + @ai-sdk/openai)', () => {
  const provider = () => createOpenAI({ baseURL: baseURL(), apiKey: 'any', organization: ORG });
  /** Reads a streamText result whole: its text and the types of every part it produced. */
  const readStream = async (result: ReturnType<typeof streamText>) => {
    const parts: string[] = [];
    let text = '';
    for await (const part of result.fullStream) {
      parts.push(part.type);
      if (part.type === 'text-delta') text += part.text;
    }
    return { parts, text, finishReason: await result.finishReason };
  };

  it('generateText with the default provider (the Responses API)', async () => {
    const before = model.requests.length;
    const result = await generateText({ model: provider()('echo'), prompt: 'where is the spare key?' });
    expect(result.text).toBe('echo: where is the spare key?');
    expect(result.finishReason).toBe('stop');
    expect(model.requests.length).toBe(before + 1);
    expect(memoriesSentToModel()).toContain('blue flowerpot');
  });

  it('streamText with the default provider: the text, finish reason stop, no error part', async () => {
    const { parts, text, finishReason } = await readStream(streamText({ model: provider()('echo'), prompt: 'stream via responses' }));
    expect(parts).not.toContain('error');
    expect(text).toBe('echo: stream via responses');
    expect(finishReason).toBe('stop');
  });

  it('tools with the default provider: the 400 says to use provider.chat() (first hour, 6)', async () => {
    const error = await generateText({
      model: provider()('echo'), prompt: 'weather?', maxRetries: 0,
      tools: { get_weather: { description: 'Weather for a city', inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } } }) } },
    }).then(() => undefined, (e: unknown) => e as Error);
    expect(error?.message).toMatch(/provider\.chat\(/);
  });

  it('generateText and streamText with .chat() (chat completions), the stream signature passed over', async () => {
    const plain = await generateText({ model: provider().chat('echo'), prompt: 'chat plain' });
    expect(plain.text).toBe('echo: chat plain');
    expect(plain.finishReason).toBe('stop');
    const { parts, text, finishReason } = await readStream(streamText({ model: provider().chat('echo'), prompt: 'chat streamed' }));
    expect(parts).not.toContain('error');
    expect(text).toBe('echo: chat streamed');
    expect(finishReason).toBe('stop');
  });
});

describe('LangChain (@langchain/openai)', () => {
  const chat = (modelName = 'echo') => new ChatOpenAI({ model: modelName, apiKey: 'any', maxRetries: 0, configuration: { baseURL: baseURL(), organization: ORG } });

  it('invoke', async () => {
    const message = await chat().invoke('where is the spare key?');
    expect(message.content).toBe('echo: where is the spare key?');
    expect(memoriesSentToModel()).toContain('blue flowerpot');
  });

  it('stream', async () => {
    let text = '';
    for await (const chunk of await chat().stream('langchain stream')) text += typeof chunk.content === 'string' ? chunk.content : '';
    expect(text).toBe('echo: langchain stream');
  });

  it('withStructuredOutput on the offline responder: a 400 at once naming what it cannot do, not retries (first hour, 6)', async () => {
    const offline = new ChatOpenAI({ model: 'local-memory', apiKey: 'any', configuration: { baseURL: baseURL(), organization: ORG } });
    const schema = { type: 'object', properties: { place: { type: 'string' } }, required: ['place'], title: 'Place', description: 'Where something is' };
    for (const method of ['jsonSchema', 'functionCalling'] as const) {
      const error = await offline.withStructuredOutput(schema, { method }).invoke('where is the spare key?').then(() => undefined, (e: unknown) => e as Error & { status?: number });
      expect(error?.status, method).toBe(400);
      expect(error?.message, method).toMatch(/offline responder.*(response_format|tool_choice)|(response_format|tool_choice).*offline responder/s);
    }
  });

  it('bindTools: the model\'s tool call comes back as a LangChain tool call', async () => {
    const message = await chat('tool-client').bindTools([weather]).invoke('weather in Lisbon?');
    expect(message.tool_calls?.[0]).toMatchObject({ name: 'get_weather', args: expect.any(Object) });
  });
});
