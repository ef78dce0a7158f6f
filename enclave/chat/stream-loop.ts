import type { ChatCompletionInput, ChatMessage, ToolCall } from '../../common/chat-schema.js';
import { isMemoryTool, withMemoryTools } from './memory-tools.js';
import { addUsage, assistantToolMessage, type MemoryToolLoop } from './tool-loop.js';
import type { ChunkChoice, CompletionChunk, Usage } from './types.js';

/**
 * The memory tools loop for a streamed answer. Chunks are passed on to the client as they
 * arrive, except the pieces of memory tool calls, which are collected and run here; the
 * model is then called again and its new chunks continue the same stream. To the client it
 * is one completion: one id, the client's tool calls numbered from 0, one finish, and
 * usage summed over the rounds (sent once at the end, when the model reports usage).
 */

export interface StreamOutput {
  /** Called once, when the model has accepted the first request (errors before it are plain replies). */
  start(): void;
  chunk(chunk: CompletionChunk): Promise<void>;
}

export async function streamWithMemoryTools(
  open: (request: ChatCompletionInput) => Promise<AsyncIterable<CompletionChunk>>,
  request: ChatCompletionInput,
  loop: MemoryToolLoop,
  memoryIds: { injected: readonly string[]; all(): string[] },
  out: StreamOutput,
): Promise<void> {
  let messages = request.messages;
  let usage: Usage | undefined;
  let last: CompletionChunk | undefined;
  let id: string | undefined;
  let sentFirst = false;

  for (let round = 0; ; round++) {
    const offered = round < loop.maxRounds && loop.runner ? loop.offered : new Set<string>();
    const chunks = await open(withMemoryTools({ ...request, messages }, offered));
    if (round === 0) out.start();
    const state = new RoundRewriter(offered);
    for await (const chunk of chunks) {
      if (chunk.choices.length === 0 && chunk.usage) {
        usage = addUsage(usage, chunk.usage);
        last = chunk;
        continue;
      }
      const rewritten = state.rewrite(chunk);
      if (!rewritten) continue;
      id ??= rewritten.id;
      rewritten.id = id;
      if (!sentFirst) {
        rewritten.memory_ids = [...memoryIds.injected];
        sentFirst = true;
      }
      if (rewritten.choices.some((c) => c.index === 0 && c.finish_reason)) rewritten.memory_ids = memoryIds.all();
      last = rewritten;
      await out.chunk(rewritten);
    }

    const mine = state.memoryCalls();
    if (mine.length === 0) break;
    const results: ChatMessage[] = [];
    for (const call of mine) results.push(await loop.runner!.run(call));
    if (!state.continues) break; // the client's tools were called too: the answer ends here
    messages = [...messages, assistantToolMessage(state.content || null, mine), ...results];
  }

  if (usage && last) {
    await out.chunk({ id: id ?? last.id, object: 'chat.completion.chunk', created: last.created, model: last.model, choices: [], usage });
  }
}

/**
 * Rewrites the chunks of one round: memory tool call pieces are removed and collected,
 * the client's tool calls renumbered, and the finish withheld when the round only asked
 * for memory tools (the answer continues in the next round).
 */
export class RoundRewriter {
  private readonly memory = new Map<number, ToolCall>();
  private readonly clientIndex = new Map<number, number>();
  /** Text the model wrote in this round before calling tools. */
  content = '';

  constructor(private readonly offered: ReadonlySet<string>) {}

  /** True when the round asked only for memory tools, so the model must be called again. */
  get continues(): boolean {
    return this.memory.size > 0 && this.clientIndex.size === 0;
  }

  memoryCalls(): ToolCall[] {
    return [...this.memory.values()];
  }

  rewrite(chunk: CompletionChunk): CompletionChunk | undefined {
    if (this.offered.size === 0) return chunk;
    const choices: ChunkChoice[] = [];
    for (const choice of chunk.choices) {
      if (choice.index !== 0) {
        choices.push(choice);
        continue;
      }
      const delta = { ...(choice.delta ?? {}) };
      if (typeof delta.content === 'string') this.content += delta.content;
      if (Array.isArray(delta.tool_calls)) {
        const theirs = delta.tool_calls.flatMap((piece) => {
          const known = this.memory.get(piece.index);
          if (known) {
            known.function.arguments += piece.function?.arguments ?? '';
            return [];
          }
          if (!this.clientIndex.has(piece.index) && isMemoryTool(piece.function?.name, this.offered)) {
            this.memory.set(piece.index, {
              id: piece.id ?? `call_${piece.index}`, type: 'function',
              function: { name: piece.function!.name!, arguments: piece.function?.arguments ?? '' },
            });
            return [];
          }
          if (!this.clientIndex.has(piece.index)) this.clientIndex.set(piece.index, this.clientIndex.size);
          return [{ ...piece, index: this.clientIndex.get(piece.index)! }];
        });
        if (theirs.length > 0) delta.tool_calls = theirs;
        else delete delta.tool_calls;
      }
      const finish = choice.finish_reason && this.continues ? null : choice.finish_reason;
      const next: ChunkChoice = { ...choice, delta, finish_reason: finish };
      if (Object.keys(delta).length > 0 || next.finish_reason || next.logprobs) choices.push(next);
    }
    return choices.length > 0 ? { ...chunk, choices } : undefined;
  }
}
