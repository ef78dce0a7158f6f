import type { ChatCompletionInput, ChatMessage, ToolCall } from '../../common/chat-schema.js';
import { isMemoryTool, withMemoryTools } from './memory-tools.js';
import type { Completion, Usage } from './types.js';

/**
 * The memory tools loop for a non-streamed answer: call the model; while it asks only for
 * memory tools, run them and call it again with their results; stop at the first answer
 * that needs nothing more from the enclave. The last allowed round is made without the
 * memory tools, so the loop always ends with an answer.
 */

/** Runs one memory tool call and answers with the tool message (MemoryToolRunner). */
export interface ToolRunner {
  run(call: ToolCall): Promise<ChatMessage>;
}

export interface MemoryToolLoop {
  /** Memory tools offered to the model (empty: no loop). */
  offered: ReadonlySet<string>;
  runner?: ToolRunner;
  /** Rounds in which memory tools are offered. */
  maxRounds: number;
}

export async function completeWithMemoryTools(
  call: (request: ChatCompletionInput) => Promise<Completion>,
  request: ChatCompletionInput,
  loop: MemoryToolLoop,
): Promise<Completion> {
  let messages = request.messages;
  let usage: Usage | undefined;
  for (let round = 0; ; round++) {
    const offered = round < loop.maxRounds && loop.runner ? loop.offered : new Set<string>();
    const completion = await call(withMemoryTools({ ...request, messages }, offered));
    usage = addUsage(usage, completion.usage);
    const message = completion.choices[0].message;
    const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
    const mine = calls.filter((c) => isMemoryTool(c.function?.name, offered));
    if (mine.length === 0) return withUsage(completion, usage);

    const results: ChatMessage[] = [];
    for (const c of mine) results.push(await loop.runner!.run(c));
    const theirs = calls.filter((c) => !mine.includes(c));
    if (theirs.length > 0) {
      // The client's own tools were called too: the memory calls are done, the rest is the client's to run.
      message.tool_calls = theirs;
      return withUsage(completion, usage);
    }
    messages = [...messages, assistantToolMessage(message.content, mine), ...results];
  }
}

/** The assistant turn that asked for tools, rebuilt from known fields only (servers differ in extras they accept). */
export function assistantToolMessage(content: string | null | undefined, calls: ToolCall[]): ChatMessage {
  return {
    role: 'assistant',
    content: content ?? null,
    tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.function.name, arguments: c.function.arguments } })),
  };
}

export function addUsage(total: Usage | undefined, more: Usage | null | undefined): Usage | undefined {
  if (!more || typeof more.prompt_tokens !== 'number') return total;
  if (!total) return { prompt_tokens: more.prompt_tokens, completion_tokens: more.completion_tokens ?? 0, total_tokens: more.total_tokens ?? 0 };
  return {
    prompt_tokens: total.prompt_tokens + more.prompt_tokens,
    completion_tokens: total.completion_tokens + (more.completion_tokens ?? 0),
    total_tokens: total.total_tokens + (more.total_tokens ?? 0),
  };
}

/** Usage over several rounds replaces the last round's own (which counted only that round). */
function withUsage(completion: Completion, usage: Usage | undefined): Completion {
  if (usage && completion.usage && usage.total_tokens !== completion.usage.total_tokens) return { ...completion, usage };
  return completion;
}
