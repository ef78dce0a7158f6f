import { chatMessageSchema } from './chat-schema.js';
import type { ChatMessage } from './chat-schema.js';
import { limits } from './limits.js';
import { addMemoryRequestSchema, instant, metadataSchema, scopeProperties, tenantId, type AddMemoryRequest, type ScopeInput } from './schemas.js';

/**
 * POST /v1/memory with `messages` and `infer: true`: a conversation (chat messages) from which
 * the enclave's model extracts the memories to keep (enclave/chat/extraction.ts), with the
 * scope fields, metadata and occurred_at an add takes, and optionally the model to ask.
 */
export const inferMemorySchema = {
  type: 'object',
  required: ['messages', 'tenant_id', 'infer'],
  additionalProperties: false,
  properties: {
    messages: { type: 'array', minItems: 1, maxItems: limits.maxChatMessages, items: chatMessageSchema },
    tenant_id: tenantId,
    /** Only true: a conversation is always extracted from (add its text as memories to store it as it is). */
    infer: { const: true },
    model: { type: 'string', minLength: 1, maxLength: 256 },
    metadata: metadataSchema,
    occurred_at: instant,
    ...scopeProperties,
  },
} as const;

export interface InferMemoryInput extends ScopeInput {
  messages: ChatMessage[];
  tenant_id: string;
  infer: true;
  model?: string;
  metadata?: Record<string, string | number | boolean | null>;
  occurred_at?: string;
}

/** The body of POST /v1/memory: a conversation to extract from (`messages`), or one memory or a batch (schemas.ts). */
export const memoryRequestSchema = {
  type: 'object',
  if: { required: ['messages'] },
  then: inferMemorySchema,
  else: addMemoryRequestSchema,
} as const;

export type MemoryRequest = AddMemoryRequest | InferMemoryInput;
