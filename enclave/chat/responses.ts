import { randomBytes } from 'node:crypto';
import type { ChatCompletionInput, ChatMessage } from '../../common/chat-schema.js';
import { ApiError, badRequest } from '../../common/errors.js';
import type { ResponsesInput } from '../../common/schemas.js';
import type { Completion, Usage } from './types.js';

/**
 * OpenAI's Responses API, for text, as a view of chat completions: a request becomes a chat
 * request (so memories, the model and the offline responder work the same way), and the
 * completion becomes a `response` object or the Responses event stream.
 */

/** Options that ask for what this service does not keep or run: refused rather than ignored. */
const UNSUPPORTED = ['previous_response_id', 'conversation', 'tools', 'background', 'prompt'] as const;

/** What the chat request is built from: every Responses option with a chat equivalent. */
export function chatRequestOf(input: ResponsesInput, stream: boolean): ChatCompletionInput {
  for (const option of UNSUPPORTED) {
    const value = input[option];
    if (value !== undefined && value !== null && !(Array.isArray(value) && value.length === 0)) {
      // Tools are the common case (the AI SDK's default provider sends them here): say where they work.
      const instead = option === 'tools' ? '; for tools use POST /v1/chat/completions (with the AI SDK: provider.chat(model))' : '';
      throw badRequest(`'${option}' is not supported: /v1/responses takes text input and answers with text${instead}`, option, 'unknown_parameter');
    }
  }
  const messages: ChatMessage[] = [];
  if (input.instructions) messages.push({ role: 'system', content: input.instructions });
  if (typeof input.input === 'string') {
    messages.push({ role: 'user', content: input.input });
  } else {
    input.input.forEach((item, i) => {
      const content = typeof item.content === 'string' ? item.content : item.content.map((part, j) => {
        if ((part.type === 'input_text' || part.type === 'output_text' || part.type === 'text') && typeof part.text === 'string') return part.text;
        throw new ApiError('unsupported_content', `input.${i}.content.${j} is a '${part.type}' part; only text parts are supported`, { param: `input.${i}.content.${j}.type` });
      }).join('\n\n');
      messages.push({ role: item.role === 'developer' ? 'system' : item.role, content });
    });
  }
  return {
    model: input.model,
    messages,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    ...(input.max_output_tokens != null ? { max_tokens: input.max_output_tokens } : {}),
    ...(input.temperature != null ? { temperature: input.temperature } : {}),
    ...(input.top_p != null ? { top_p: input.top_p } : {}),
  };
}

export const newResponseId = () => `resp_${randomBytes(16).toString('hex')}`;
export const newMessageId = () => `msg_${randomBytes(16).toString('hex')}`;

export interface ResponseParts {
  id: string;
  messageId: string;
  model: string;
  createdAt: number;
  instructions: string | null;
  memoryIds: string[];
}

export const outputMessage = (messageId: string, text: string, status: 'in_progress' | 'completed') => ({
  type: 'message', id: messageId, status, role: 'assistant',
  content: status === 'completed' ? [{ type: 'output_text', text, annotations: [] }] : [],
});

const usageOf = (usage: Usage | null | undefined) => usage
  ? { input_tokens: usage.prompt_tokens, output_tokens: usage.completion_tokens, total_tokens: usage.total_tokens, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } }
  : null;

/** The `response` object, as created (in progress) or finished. */
export function responseObject(parts: ResponseParts, state: { status: 'in_progress' | 'completed' | 'incomplete'; text?: string; usage?: Usage | null; reason?: string }) {
  return {
    id: parts.id,
    object: 'response',
    created_at: parts.createdAt,
    status: state.status,
    error: null,
    incomplete_details: state.status === 'incomplete' ? { reason: state.reason ?? 'max_output_tokens' } : null,
    instructions: parts.instructions,
    model: parts.model,
    output: state.text === undefined ? [] : [outputMessage(parts.messageId, state.text, 'completed')],
    output_text: state.text ?? '',
    usage: usageOf(state.usage),
    memory_ids: parts.memoryIds,
  };
}

/** A chat completion as a finished `response`. */
export function responseFromCompletion(parts: Omit<ResponseParts, 'memoryIds' | 'model'>, completion: Completion) {
  const choice = completion.choices[0];
  const text = typeof choice?.message.content === 'string' ? choice.message.content : '';
  return responseObject({ ...parts, model: completion.model, memoryIds: completion.memory_ids ?? [] }, {
    status: choice?.finish_reason === 'length' ? 'incomplete' : 'completed',
    text,
    usage: completion.usage,
  });
}
