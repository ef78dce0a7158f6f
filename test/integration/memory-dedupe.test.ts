import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * Updates instead of duplicates, without a model: adding a restatement of a memory of the
 * same tenant and scope updates it and says so (`event: "UPDATE"`); `dedupe: false` stores it
 * beside. Over HTTP through both processes, and after the enclave recovers.
 */

let svc: RunningService;
const api = (method: string, path: string, body?: unknown) => request(svc.baseUrl, method, path, body);

interface Answer { id: string; content: string; event: string; previous_content?: string; created_at: number; updated_at?: number; occurred_at: string; metadata: object }

const add = async (body: Record<string, unknown>, tenant_id = 'dd'): Promise<Answer> => {
  const res = await api('POST', '/v1/memory', { tenant_id, ...body });
  expect(res.status, res.text).toBe(200);
  return res.body;
};
const listed = async (tenant_id: string) => (await api('GET', `/v1/memory?tenant_id=${tenant_id}`)).body.data.map((m: Answer) => m.content);

beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.stop();
});

describe('near-duplicates update the memory they restate', () => {
  it('a restatement updates the memory: same id, new content and occurred_at, the old content in the answer', async () => {
    const first = await add({ content: 'My dog is called Rex', metadata: { source: 'chat' }, occurred_at: '2023-01-01' });
    expect(first.event).toBe('ADD');
    expect(first).not.toHaveProperty('previous_content');
    const again = await add({ content: 'my dog is called Rex!', occurred_at: '2023-06-01' });
    expect(again).toMatchObject({
      id: first.id, event: 'UPDATE', content: 'my dog is called Rex!', previous_content: 'My dog is called Rex',
      metadata: { source: 'chat' }, created_at: first.created_at, occurred_at: '2023-06-01T00:00:00.000Z',
    });
    expect(typeof again.updated_at).toBe('number');
    expect(await listed('dd')).toEqual(['my dog is called Rex!']);
    const found = await api('POST', '/v1/memory/search', { tenant_id: 'dd', query: 'what is the dog called' });
    expect(found.body.data.map((m: Answer) => m.content)).toEqual(['my dog is called Rex!']);
  });

  it('a different fact is added beside', async () => {
    expect((await add({ content: 'My cat is called Tom' }, 'facts')).event).toBe('ADD');
    expect((await add({ content: 'My dog is called Rex' }, 'facts')).event).toBe('ADD');
    expect((await add({ content: 'We live in Lisbon near the river' }, 'facts')).event).toBe('ADD');
    // Embeddings hardly tell these apart (cosine > 0.99): different numbers or letters keep them apart.
    expect((await add({ content: 'Invoice 88213 is due Friday' }, 'facts')).event).toBe('ADD');
    expect((await add({ content: 'Invoice 88214 is due Friday' }, 'facts')).event).toBe('ADD');
    expect((await add({ content: 'Book table two for dinner' }, 'facts')).event).toBe('ADD');
    expect((await add({ content: 'Book table three for dinner' }, 'facts')).event).toBe('ADD');
    expect((await add({ content: 'Plan x is approved' }, 'facts')).event).toBe('ADD');
    expect((await add({ content: 'Plan y is approved' }, 'facts')).event).toBe('ADD');
    // The static model sees words without their order: names must come in the same order.
    expect((await add({ content: 'Yesterday Alice paid Bob back' }, 'facts')).event).toBe('ADD');
    expect((await add({ content: 'Yesterday Bob paid Alice back' }, 'facts')).event).toBe('ADD');
    expect(await listed('facts')).toHaveLength(11);
  });

  it('only within the same scope: another user\'s (or a tenant-wide) memory is not updated', async () => {
    const alice = await add({ content: 'I drink green tea every morning', user_id: 'alice' }, 'scoped');
    const bob = await add({ content: 'I drink green tea every morning', user_id: 'bob' }, 'scoped');
    const everyone = await add({ content: 'I drink green tea every morning' }, 'scoped');
    expect([alice.event, bob.event, everyone.event]).toEqual(['ADD', 'ADD', 'ADD']);
    expect(new Set([alice.id, bob.id, everyone.id]).size).toBe(3);
    expect((await add({ content: 'I drink green tea every morning.', user_id: 'bob' }, 'scoped'))).toMatchObject({ id: bob.id, event: 'UPDATE' });
  });

  it('dedupe: false stores a copy beside', async () => {
    const first = await add({ content: 'The office opens at nine' }, 'copies');
    const copy = await add({ content: 'The office opens at nine', dedupe: false }, 'copies');
    expect(copy.event).toBe('ADD');
    expect(copy.id).not.toBe(first.id);
    expect(await listed('copies')).toHaveLength(2);
  });

  it('within a batch: a later item restating an earlier one updates it', async () => {
    const res = await api('POST', '/v1/memory', {
      memories: [
        { tenant_id: 'batch', content: 'The meeting is on Friday' },
        { tenant_id: 'batch', content: 'Our budget is tight this year' },
        { tenant_id: 'batch', content: 'the meeting is on Friday.' },
      ],
    });
    expect(res.status, res.text).toBe(200);
    const [a, b, c] = res.body.data as Answer[];
    expect([a.event, b.event, c.event]).toEqual(['ADD', 'ADD', 'UPDATE']);
    expect(c).toMatchObject({ id: a.id, previous_content: 'The meeting is on Friday', content: 'the meeting is on Friday.' });
    expect((await listed('batch')).sort()).toEqual(['Our budget is tight this year', 'the meeting is on Friday.']);
  });

  it('the same memory sent eight times at once (a client retrying) is stored once: one ADD, then updates of it', async () => {
    const answers = await Promise.all(Array.from({ length: 8 }, () => add({ content: 'The wifi password is on the fridge' }, 'retries')));
    const added = answers.filter((a) => a.event === 'ADD');
    expect(added).toHaveLength(1);
    for (const a of answers) expect(a.id).toBe(added[0].id);
    expect(await listed('retries')).toEqual(['The wifi password is on the fridge']);
  });

  it('an update by dedupe survives kill -9 of the enclave (journaled as an update)', async () => {
    await svc.killEnclave('SIGKILL');
    await svc.startEnclave();
    expect(await listed('dd')).toEqual(['my dog is called Rex!']);
    expect((await listed('batch')).sort()).toEqual(['Our budget is tight this year', 'the meeting is on Friday.']);
  });
});
