import { describe, expect, it } from 'vitest';
import type { ChatCompletionInput, ChatMessage, ToolCall } from '../../common/chat-schema.js';
import { memoryToolsToOffer, withMemoryTools } from '../../enclave/chat/memory-tools.js';
import { RoundRewriter, streamWithMemoryTools } from '../../enclave/chat/stream-loop.js';
import { completeWithMemoryTools, type ToolRunner } from '../../enclave/chat/tool-loop.js';
import type { Completion, CompletionChunk } from '../../enclave/chat/types.js';

/** The tool loops as pure logic: a scripted model (a function) and a recording tool runner. */

const ALL = new Set(['search_memory', 'add_memory']);
const base: ChatCompletionInput = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };

const call = (id: string, name: string, args = '{}'): ToolCall => ({ id, type: 'function', function: { name, arguments: args } });
const completion = (message: object, finish = 'stop'): Completion => ({
  id: 'c', object: 'chat.completion', created: 1, model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content: null, ...message }, finish_reason: finish }], usage,
});

class Runner implements ToolRunner {
  calls: ToolCall[] = [];
  async run(c: ToolCall): Promise<ChatMessage> {
    this.calls.push(c);
    return { role: 'tool', tool_call_id: c.id, content: `result of ${c.function.name}` };
  }
}

describe('which memory tools are offered', () => {
  it('both, after the client\'s own tools', () => {
    const weather = { type: 'function', function: { name: 'get_weather' } };
    const offered = memoryToolsToOffer({ ...base, tools: [weather] }, true);
    expect([...offered]).toEqual(['search_memory', 'add_memory']);
    expect(withMemoryTools({ ...base, tools: [weather] }, offered).tools!.map((t) => t.function!.name)).toEqual(['get_weather', 'search_memory', 'add_memory']);
  });

  it('none without a tenant, with tool_choice "none", or with n > 1', () => {
    expect(memoryToolsToOffer(base, false).size).toBe(0);
    expect(memoryToolsToOffer({ ...base, tool_choice: 'none' }, true).size).toBe(0);
    expect(memoryToolsToOffer({ ...base, n: 2 }, true).size).toBe(0);
  });

  it('not one whose name a client tool uses', () => {
    expect([...memoryToolsToOffer({ ...base, tools: [{ type: 'function', function: { name: 'add_memory' } }] }, true)]).toEqual(['search_memory']);
  });
});

describe('memory tools loop, not streamed', () => {
  it('runs memory calls and calls the model again with their results', async () => {
    const runner = new Runner();
    const seen: ChatCompletionInput[] = [];
    const result = await completeWithMemoryTools(async (r) => {
      seen.push(r);
      return seen.length === 1 ? completion({ tool_calls: [call('a', 'search_memory', '{"query":"x"}')] }, 'tool_calls') : completion({ content: 'done' });
    }, base, { offered: ALL, runner, maxRounds: 3 });
    expect(result.choices[0].message.content).toBe('done');
    expect(result.usage!.total_tokens).toBe(10);
    expect(runner.calls.map((c) => c.id)).toEqual(['a']);
    expect(seen[1].messages.slice(1)).toEqual([
      { role: 'assistant', content: null, tool_calls: [call('a', 'search_memory', '{"query":"x"}')] },
      { role: 'tool', tool_call_id: 'a', content: 'result of search_memory' },
    ]);
  });

  it('is bounded: the last round is made without memory tools', async () => {
    const runner = new Runner();
    const seen: ChatCompletionInput[] = [];
    // A model that would call search_memory for ever, while it is offered.
    const result = await completeWithMemoryTools(async (r) => {
      seen.push(r);
      return r.tools ? completion({ tool_calls: [call(`c${seen.length}`, 'search_memory')] }, 'tool_calls') : completion({ content: 'final' });
    }, base, { offered: ALL, runner, maxRounds: 2 });
    expect(seen).toHaveLength(3);
    expect(seen.map((r) => Boolean(r.tools))).toEqual([true, true, false]);
    expect(result.choices[0].message.content).toBe('final');
    expect(runner.calls).toHaveLength(2);
  });

  it('client tool calls go back to the client; memory calls in the same turn are run, not returned', async () => {
    const runner = new Runner();
    const result = await completeWithMemoryTools(async () => completion({
      tool_calls: [call('m', 'add_memory', '{"content":"x"}'), call('w', 'get_weather')],
    }, 'tool_calls'), base, { offered: ALL, runner, maxRounds: 4 });
    expect(result.choices[0].message.tool_calls!.map((c) => c.id)).toEqual(['w']);
    expect(result.choices[0].finish_reason).toBe('tool_calls');
    expect(runner.calls.map((c) => c.id)).toEqual(['m']);
  });

  it('a call to a memory tool that was not offered is the client\'s', async () => {
    const runner = new Runner();
    const result = await completeWithMemoryTools(async () => completion({ tool_calls: [call('s', 'search_memory')] }, 'tool_calls'),
      base, { offered: new Set(['add_memory']), runner, maxRounds: 4 });
    expect(result.choices[0].message.tool_calls![0].id).toBe('s');
    expect(runner.calls).toEqual([]);
  });
});

// ----- streaming -----

const chunk = (delta: CompletionChunk['choices'][number]['delta'], finish: string | null = null, id = 'up-1'): CompletionChunk => ({
  id, object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }],
});
const piece = (index: number, name: string | undefined, args: string, id?: string) => ({
  index, ...(id ? { id, type: 'function' } : {}), function: { ...(name ? { name } : {}), arguments: args },
});
async function* from(chunks: CompletionChunk[]) {
  yield* chunks;
}

describe('stream rewriting of one round', () => {
  it('removes memory call pieces, renumbers the client\'s, and passes content through', () => {
    const round = new RoundRewriter(ALL);
    const out = [
      chunk({ role: 'assistant', content: 'Let me check. ' }),
      chunk({ tool_calls: [piece(0, 'search_memory', '{"que', 'm1')] }),
      chunk({ tool_calls: [piece(0, undefined, 'ry":"x"}')] }),
      chunk({ tool_calls: [piece(1, 'get_weather', '{}', 'w1')] }),
      chunk({}, 'tool_calls'),
    ].map((c) => round.rewrite(c));
    expect(out[0]!.choices[0].delta).toEqual({ role: 'assistant', content: 'Let me check. ' });
    expect(out[1]).toBeUndefined();
    expect(out[2]).toBeUndefined();
    expect(out[3]!.choices[0].delta.tool_calls).toEqual([piece(0, 'get_weather', '{}', 'w1')]);
    expect(out[4]!.choices[0].finish_reason).toBe('tool_calls'); // the client's call ends the answer
    expect(round.memoryCalls()).toEqual([call('m1', 'search_memory', '{"query":"x"}')]);
    expect(round.continues).toBe(false);
  });

  it('withholds the finish when the round asked only for memory tools', () => {
    const round = new RoundRewriter(ALL);
    round.rewrite(chunk({ tool_calls: [piece(0, 'add_memory', '{}', 'a1')] }));
    expect(round.rewrite(chunk({}, 'tool_calls'))).toBeUndefined();
    expect(round.continues).toBe(true);
  });
});

describe('memory tools loop, streamed', () => {
  it('streams round after round as one completion', async () => {
    const runner = new Runner();
    const requests: ChatCompletionInput[] = [];
    const rounds = [
      [
        chunk({ role: 'assistant', content: '' }, null, 'up-1'),
        chunk({ tool_calls: [piece(0, 'search_memory', '{"query":"pet"}', 'm1')] }, null, 'up-1'),
        chunk({}, 'tool_calls', 'up-1'),
        { ...chunk({}, null, 'up-1'), choices: [], usage },
      ],
      [
        chunk({ role: 'assistant', content: 'Your dog ' }, null, 'up-2'),
        chunk({ content: 'is Rex.' }, null, 'up-2'),
        chunk({}, 'stop', 'up-2'),
        { ...chunk({}, null, 'up-2'), choices: [], usage },
      ],
    ];
    const out: CompletionChunk[] = [];
    let started = 0;
    await streamWithMemoryTools(
      async (r) => {
        requests.push(r);
        return from(rounds[requests.length - 1]);
      },
      { ...base, stream: true },
      { offered: ALL, runner, maxRounds: 4 },
      { injected: ['mem_1'], all: () => ['mem_1', 'mem_2'] },
      { start: () => { started++; }, chunk: async (c) => { out.push(structuredClone(c)); } },
    );
    expect(started).toBe(1);
    expect(new Set(out.map((c) => c.id))).toEqual(new Set(['up-1']));
    expect(out.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Your dog is Rex.');
    expect(out.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter(Boolean)).toEqual(['stop']);
    expect(out.some((c) => c.choices[0]?.delta.tool_calls)).toBe(false);
    expect(out[0].memory_ids).toEqual(['mem_1']);
    expect(out.find((c) => c.choices[0]?.finish_reason)!.memory_ids).toEqual(['mem_1', 'mem_2']);
    expect(out.at(-1)).toMatchObject({ choices: [], usage: { total_tokens: 10 } });
    expect(runner.calls.map((c) => c.id)).toEqual(['m1']);
    expect(requests[1].messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'm1', content: 'result of search_memory' });
  });
});
