import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * A fresh install with no chat model configured answers end to end, offline, from memory:
 * the built-in `local-memory` responder.
 */

let svc: RunningService;
const ids: Record<string, string> = {};
const client = (organization?: string) =>
  new OpenAI({ baseURL: `${svc.baseUrl}/v1`, apiKey: 'unused', organization, maxRetries: 0 });
const question = [{ role: 'user' as const, content: 'what is my dog called?' }];

const addMemory = async (tenant_id: string, content: string) => {
  const res = await request(svc.baseUrl, 'POST', '/v1/memory', { content, tenant_id });
  expect(res.status, res.text).toBe(200);
  return res.body.id as string;
};

beforeAll(async () => {
  svc = await startService({ MODEL_BASE_URL: '' });
  ids.rex = await addMemory('home', 'My dog is called Rex');
  ids.tea = await addMemory('home', 'I drink green tea every morning');
  ids.other = await addMemory('neighbour', 'Their dog is called Bolt');
});
afterAll(async () => {
  await svc?.stop();
});

describe('no MODEL_BASE_URL: the offline responder', () => {
  it('answers from the tenant\'s memories, most relevant first, and says what it is', async () => {
    const completion = await client('home').chat.completions.create({ model: 'gpt-4o-mini', messages: question });
    expect(completion.model).toBe('local-memory');
    expect(completion.object).toBe('chat.completion');
    const text = completion.choices[0].message.content!;
    expect(text.split('\n')[1]).toBe('1. My dog is called Rex');
    expect(text).not.toContain('Bolt');
    expect(completion.choices[0].finish_reason).toBe('stop');
    expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + completion.usage!.completion_tokens);
    expect((completion as any).memory_ids[0]).toBe(ids.rex);
    expect((completion as any).memory_ids).not.toContain(ids.other);
  });

  it('is deterministic', async () => {
    const a = await client('home').chat.completions.create({ model: 'local-memory', messages: question });
    const b = await client('home').chat.completions.create({ model: 'local-memory', messages: question });
    expect(a.choices[0].message.content).toBe(b.choices[0].message.content);
  });

  it('streams the same answer', async () => {
    const whole = await client('home').chat.completions.create({ model: 'local-memory', messages: question });
    const stream = await client('home').chat.completions.create({ model: 'local-memory', messages: question, stream: true, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(whole.choices[0].message.content);
    // The last chunk is the enclave's signature of the stream (no choices, no model).
    const signature = chunks.pop() as unknown as { type: string; choices: unknown[] };
    expect(signature).toMatchObject({ type: 'tee.signature', choices: [] });
    expect(chunks.every((c) => c.model === 'local-memory' && c.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks.at(-1)!.usage).toEqual(whole.usage);
  });

  it('without an organization it says there are no memories to answer from', async () => {
    const completion = await client().chat.completions.create({ model: 'local-memory', messages: question });
    expect(completion.choices[0].message.content).toMatch(/^No organization was given/);
    expect(completion.choices[0].message.content).not.toMatch(/Rex|Bolt/);
    expect((completion as any).memory_ids).toEqual([]);
  });

  it('a tenant with no related memories is told so', async () => {
    const completion = await client('nobody').chat.completions.create({ model: 'local-memory', messages: question });
    expect(completion.choices[0].message.content).toMatch(/^I have no memories that relate to your message\./);
  });
});

describe('no MODEL_BASE_URL: extraction', () => {
  it('infer: true is a clear 400, and nothing is stored', async () => {
    const res = await request(svc.baseUrl, 'POST', '/v1/memory', { tenant_id: 'home', infer: true, model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'I moved to Porto.' }] });
    expect(res.status, res.text).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'unsupported_by_offline_model', param: 'infer' });
    expect(res.body.error.message).toMatch(/MODEL_BASE_URL/);
    const list = await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=home');
    expect(list.body.data.map((m: { content: string }) => m.content)).not.toContain('I moved to Porto.');
  });
});
