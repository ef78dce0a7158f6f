import { randomBytes } from 'node:crypto';
import type { ChatCompletionInput } from '../../common/chat-schema.js';
import type { MemoryRecord } from '../memory/types.js';
import type { Completion, CompletionChunk, Usage } from './types.js';

/**
 * `local-memory`: the built-in responder used when no chat model is configured (or when a
 * client asks for it by name). It is not a language model: it answers by listing the
 * memories retrieved for the latest user message, most relevant first, so a fresh install
 * works end to end offline. The same request and memories always give the same answer.
 */

export const OFFLINE_MODEL = 'local-memory';

export interface OfflineInput {
  request: ChatCompletionInput;
  tenant: string | undefined;
  memories: readonly MemoryRecord[];
}

/**
 * What the offline responder cannot honour, refused at once (400) rather than answered with
 * prose a client then fails to parse: LangChain's withStructuredOutput, for one, retried such
 * answers for 90 s. `undefined` when it can answer.
 */
export function offlineRefusal(request: ChatCompletionInput): { param: string; message: string } | undefined {
  const setModel = 'set MODEL_BASE_URL to a model that can, or leave it out';
  const format = (request as { response_format?: { type?: unknown } | null }).response_format;
  if (format && typeof format === 'object' && format.type !== undefined && format.type !== 'text') {
    return { param: 'response_format', message: `${OFFLINE_MODEL}, the built-in offline responder, answers only in prose, not as response_format ${JSON.stringify(format.type)}: ${setModel}` };
  }
  const choice = request.tool_choice;
  const forced = choice === 'required' || (typeof choice === 'object' && choice !== null && choice.type === 'function');
  if (forced && (request.tools ?? []).length > 0) {
    return { param: 'tool_choice', message: `${OFFLINE_MODEL}, the built-in offline responder, cannot call tools, and tool_choice requires one: ${setModel}` };
  }
  return undefined;
}

export function offlineAnswer({ tenant, memories }: OfflineInput): string {
  if (memories.length > 0) {
    const lines = memories.map((m, i) => `${i + 1}. ${m.content.replace(/\s*\n\s*/g, ' ')}`);
    return `Here is what I remember that relates to your message, most relevant first:\n${lines.join('\n')}`;
  }
  const why = tenant
    ? 'I have no memories that relate to your message.'
    : 'No organization was given (organization_id or OpenAI-Organization header), so I have no memories to answer from.';
  return `${why}\n(I am ${OFFLINE_MODEL}, the built-in offline responder: I answer only from stored memories. `
    + 'Set MODEL_BASE_URL to chat with a language model.)';
}

export function offlineCompletion(input: OfflineInput, now = Date.now()): Completion {
  const content = offlineAnswer(input);
  const choices = Array.from({ length: choiceCount(input.request) }, (_, index) => ({
    index, message: { role: 'assistant' as const, content }, finish_reason: 'stop', logprobs: null,
  }));
  return {
    id: `chatcmpl-local-${randomBytes(12).toString('hex')}`,
    object: 'chat.completion',
    created: Math.floor(now / 1000),
    model: OFFLINE_MODEL,
    choices,
    usage: usage(input.request, content, choices.length),
  };
}

/** The same answer as chunks: a role chunk, one chunk per line, the finish, and usage if asked for. */
export function offlineChunks(input: OfflineInput, now = Date.now()): CompletionChunk[] {
  const completion = offlineCompletion(input, now);
  const content = completion.choices[0].message.content ?? '';
  const base = { id: completion.id, object: 'chat.completion.chunk' as const, created: completion.created, model: OFFLINE_MODEL };
  const pieces = content.split(/(?<=\n)/);
  const chunks: CompletionChunk[] = [];
  for (const choice of completion.choices) {
    const index = choice.index;
    chunks.push({ ...base, choices: [{ index, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
    for (const piece of pieces) chunks.push({ ...base, choices: [{ index, delta: { content: piece }, finish_reason: null }] });
    chunks.push({ ...base, choices: [{ index, delta: {}, finish_reason: 'stop' }] });
  }
  if (input.request.stream_options?.include_usage) chunks.push({ ...base, choices: [], usage: completion.usage });
  return chunks;
}

function choiceCount(request: ChatCompletionInput): number {
  return Math.max(1, Math.min(request.n ?? 1, 128));
}

/** Usage counted in words (whitespace-separated), as there is no tokenizer behind this responder. */
function usage(request: ChatCompletionInput, content: string, choices: number): Usage {
  const words = (text: string) => text.split(/\s+/).filter(Boolean).length;
  const prompt = request.messages.reduce((n, m) => n + (typeof m.content === 'string' ? words(m.content) : 0), 0);
  const completion = words(content) * choices;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}
