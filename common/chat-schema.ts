import { limits } from './limits.js';
import { knownStateHeadersSchema, scopeProperties, tenantId } from './schemas.js';

/**
 * The chat-completions request, in OpenAI's format. The proxy validates it with fastify and
 * the enclave validates the same schema again. Only what the service acts on is checked
 * closely (model, messages, stream, n, tools, tool_choice); every other option
 * (temperature, top_p, max_tokens, stop, seed, user, response_format, vendor extensions…)
 * passes through to the model untouched, so clients written for any OpenAI-compatible
 * server keep working.
 */

const toolCall = {
  type: 'object',
  required: ['id', 'type', 'function'],
  properties: {
    id: { type: 'string', minLength: 1, maxLength: 256 },
    type: { type: 'string' },
    function: {
      type: 'object',
      required: ['name', 'arguments'],
      properties: { name: { type: 'string', minLength: 1, maxLength: 256 }, arguments: { type: 'string' } },
    },
  },
} as const;

/** Content as an array of parts (current OpenAI clients); the enclave takes text parts only. */
const contentParts = {
  type: 'array',
  maxItems: 256,
  items: { type: 'object', required: ['type'], properties: { type: { type: 'string', maxLength: 64 }, text: { type: 'string' } } },
} as const;

export const chatMessageSchema = {
  type: 'object',
  required: ['role'],
  properties: {
    role: { type: 'string', enum: ['system', 'developer', 'user', 'assistant', 'tool'] },
    content: { anyOf: [{ type: ['string', 'null'] }, contentParts] },
    name: { type: 'string', maxLength: 256 },
    tool_calls: { type: 'array', maxItems: limits.maxChatTools, items: toolCall },
    tool_call_id: { type: 'string', minLength: 1, maxLength: 256 },
  },
  allOf: [
    // Content is text (a string or text parts), except for an assistant message that
    // carries tool calls (OpenAI clients send `content: null` there).
    {
      if: { properties: { role: { const: 'assistant' } }, required: ['role', 'tool_calls'] },
      else: { required: ['content'], properties: { content: { anyOf: [{ type: 'string' }, contentParts] } } },
    },
    { if: { properties: { role: { const: 'tool' } }, required: ['role'] }, then: { required: ['tool_call_id'] } },
  ],
} as const;

const tool = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { type: 'string' },
    function: {
      type: 'object',
      required: ['name'],
      properties: { name: { type: 'string', minLength: 1, maxLength: 256 } },
    },
  },
} as const;

export const chatCompletionSchema = {
  type: 'object',
  required: ['model', 'messages'],
  properties: {
    model: { type: 'string', minLength: 1, maxLength: 256 },
    messages: { type: 'array', minItems: 1, maxItems: limits.maxChatMessages, items: chatMessageSchema },
    stream: { type: ['boolean', 'null'] },
    stream_options: { type: ['object', 'null'] },
    n: { type: ['integer', 'null'], minimum: 1, maximum: 128 },
    tools: { type: ['array', 'null'], maxItems: limits.maxChatTools, items: tool },
    tool_choice: { type: ['string', 'object', 'null'] },
    // The memory scopes the chat uses, as Mem0's chat proxy takes them: never sent to the model.
    ...scopeProperties,
    // After answering, extract the conversation's memories (POST /v1/memory's infer: true): never sent to the model.
    memory_infer: { type: ['boolean', 'null'] },
  },
  additionalProperties: true,
} as const;

/** The chat tenant headers, checked by the proxy; the enclave checks `organization` itself. */
export const chatHeadersSchema = {
  type: 'object',
  properties: { organization_id: tenantId, 'openai-organization': tenantId, ...knownStateHeadersSchema.properties },
} as const;

export type Role = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

export interface ContentPart {
  type: string;
  text?: string;
  [field: string]: unknown;
}

export interface ToolCall {
  id: string;
  type: string;
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: Role;
  /** Text parts are joined into a string by the enclave before anything reads them (enclave/chat/messages.ts). */
  content?: string | ContentPart[] | null;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  [option: string]: unknown;
}

export interface ToolDefinition {
  type: string;
  function?: { name: string; description?: string; parameters?: object; [option: string]: unknown };
  [option: string]: unknown;
}

export interface ChatCompletionInput {
  model: string;
  messages: ChatMessage[];
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean; [option: string]: unknown } | null;
  n?: number | null;
  tools?: ToolDefinition[] | null;
  tool_choice?: string | { type?: string; function?: { name?: string } } | null;
  [option: string]: unknown;
}
