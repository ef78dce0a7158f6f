import { SEALED_REQUEST_TYPE } from '../protocol/sealed.js';
import { MAX_AUTHORIZATION_CHARS } from './bearer.js';
import { limits } from './limits.js';

/**
 * JSON schemas of the API's inputs. The proxy hands them to fastify; the enclave
 * compiles the same objects with ajv (common/validation.ts), so the two sides cannot
 * disagree about what is valid.
 */

export const tenantId = {
  type: 'string', minLength: 1, maxLength: limits.maxTenantIdChars, pattern: limits.tenantIdPattern,
  description: 'may contain only letters, digits and . _ : @ - (1 to 128 characters)',
} as const;

/** A scope inside a tenant (user_id, agent_id, run_id): the same characters as a tenant id. */
export const scopeId = {
  type: 'string', minLength: 1, maxLength: limits.maxTenantIdChars, pattern: limits.tenantIdPattern,
  description: 'may contain only letters, digits and . _ : @ - (1 to 128 characters)',
} as const;

/** user_id, agent_id and run_id: who a memory is about inside its tenant (Mem0's scopes). */
export const scopeProperties = { user_id: scopeId, agent_id: scopeId, run_id: scopeId } as const;

/**
 * A time as RFC 3339 (`2023-05-08T13:56:00Z`, `2023-05-08T13:56:00.5+01:00`), or a date alone
 * (`2023-05-08`, midnight UTC). The enclave also checks that it names a real time.
 */
export const instant = {
  type: 'string', maxLength: 40, pattern: '^\\d{4}-\\d{2}-\\d{2}([Tt ]\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?([Zz]|[+-]\\d{2}:\\d{2}))?$',
  description: 'must be an RFC 3339 date-time (2023-05-08T13:56:00Z) or a date (2023-05-08)',
} as const;

/** `since` and `until`: a search or list keeps the memories that occurred in between (both included). */
export const periodProperties = { since: instant, until: instant } as const;

export interface PeriodInput {
  since?: string;
  until?: string;
}

export interface ScopeInput {
  user_id?: string;
  agent_id?: string;
  run_id?: string;
}

export const metadataSchema = {
  type: 'object',
  maxProperties: limits.maxMetadataKeys,
  propertyNames: { minLength: 1, maxLength: limits.maxMetadataKeyChars },
  properties: { source: { type: 'string', maxLength: limits.maxMetadataValueChars } },
  additionalProperties: {
    anyOf: [
      { type: 'string', maxLength: limits.maxMetadataValueChars },
      { type: 'number' },
      { type: 'boolean' },
      { type: 'null' },
    ],
  },
} as const;

/** Text that must say something: \S, since content that is only whitespace has nothing to remember or find. */
const nonBlankText = (maxLength: number) =>
  ({ type: 'string', minLength: 1, maxLength, pattern: '\\S', description: 'must contain some non-whitespace text' }) as const;

export const addMemorySchema = {
  type: 'object',
  required: ['content', 'tenant_id'],
  additionalProperties: false,
  properties: {
    content: nonBlankText(limits.maxContentChars),
    tenant_id: tenantId,
    metadata: metadataSchema,
    ...scopeProperties,
    occurred_at: instant,
    /** Default true: a restatement of a memory of the same tenant and scope updates it (enclave/memory/near-duplicates.ts). */
    dedupe: { type: 'boolean' },
  },
} as const;

/** POST /v1/memory with `{"memories": [...]}`: up to limits.maxBatchMemories memories at once. */
export const addMemoriesSchema = {
  type: 'object',
  required: ['memories'],
  additionalProperties: false,
  properties: {
    memories: { type: 'array', minItems: 1, maxItems: limits.maxBatchMemories, items: addMemorySchema },
  },
} as const;

/**
 * The body of POST /v1/memory: one memory, or a batch under `memories`. Written as if/then/else
 * rather than oneOf so a refusal names the actual fault ("memories.3.content"), not a mismatch
 * with the other form.
 */
export const addMemoryRequestSchema = {
  type: 'object',
  if: { required: ['memories'] },
  then: addMemoriesSchema,
  else: addMemorySchema,
} as const;

/**
 * GET /v1/memory: with `query`, the top-k search (`top_k`); without, a page of the tenant's
 * memories, newest first (`limit`, `after`).
 */
export const listOrQueryMemorySchema = {
  type: 'object',
  required: ['tenant_id'],
  additionalProperties: false,
  properties: {
    query: nonBlankText(limits.maxQueryChars),
    tenant_id: tenantId,
    top_k: { type: 'integer', minimum: 1, maximum: limits.maxTopK },
    limit: { type: 'integer', minimum: 1, maximum: limits.maxListLimit },
    after: { type: 'string', minLength: 1, maxLength: 128, description: 'the id of the last memory of the previous page' },
    ...scopeProperties,
    ...periodProperties,
  },
} as const;

/** A metadata value a filter matches by equality. */
const filterScalar = {
  anyOf: [{ type: 'string', maxLength: limits.maxMetadataValueChars }, { type: 'number' }, { type: 'boolean' }, { type: 'null' }],
} as const;

/** `filters`: metadata keys matched by equality, or by membership with `{"$in": [...]}`; all must match. */
export const metadataFilterSchema = {
  type: 'object',
  maxProperties: limits.maxMetadataKeys,
  propertyNames: { minLength: 1, maxLength: limits.maxMetadataKeyChars },
  additionalProperties: {
    description: `must be a string, number, boolean or null (equal to the metadata value), or {"$in": [...]} with 1 to ${limits.maxFilterValues} of those (one of them); no other operators`,
    anyOf: [
      filterScalar,
      {
        type: 'object', required: ['$in'], additionalProperties: false,
        properties: { $in: { type: 'array', minItems: 1, maxItems: limits.maxFilterValues, items: filterScalar } },
      },
    ],
  },
} as const;

/** POST /v1/memory/search. */
export const searchMemorySchema = {
  type: 'object',
  required: ['query', 'tenant_id'],
  additionalProperties: false,
  properties: {
    query: nonBlankText(limits.maxQueryChars),
    tenant_id: tenantId,
    top_k: { type: 'integer', minimum: 1, maximum: limits.maxTopK, default: limits.defaultTopK },
    filters: metadataFilterSchema,
    ...scopeProperties,
    ...periodProperties,
  },
} as const;

/** PATCH /v1/memory/{id}: what changes (metadata is replaced whole). */
export const updateMemorySchema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    content: nonBlankText(limits.maxContentChars),
    metadata: metadataSchema,
    occurred_at: instant,
  },
} as const;

export const tenantQuerySchema = {
  type: 'object',
  required: ['tenant_id'],
  additionalProperties: false,
  properties: { tenant_id: tenantId },
} as const;

/** DELETE /v1/memory: every memory of the tenant, or only those of the scopes named. */
export const deleteMemoriesQuerySchema = {
  type: 'object',
  required: ['tenant_id'],
  additionalProperties: false,
  properties: { tenant_id: tenantId, ...scopeProperties },
} as const;

/** GET /v1/memory/export: the tenant, and the X25519 key the export is sealed to. */
export const exportQuerySchema = {
  type: 'object',
  required: ['tenant_id', 'public_key'],
  additionalProperties: false,
  properties: {
    tenant_id: tenantId,
    public_key: { type: 'string', pattern: '^[A-Za-z0-9+/]{43}=$', description: 'the X25519 public key to seal the export to, base64 (32 bytes)' },
  },
} as const;

/**
 * POST /v1/memory/import: memories restored with their ids, each a line of an export of this
 * service ({type: "memory", memory, history}) or an item of a Mem0 export ({id, memory,
 * metadata, created_at, …}); checked item by item in the enclave (memory/import.ts).
 */
export const importMemoriesSchema = {
  type: 'object',
  required: ['tenant_id', 'memories'],
  additionalProperties: false,
  properties: {
    tenant_id: tenantId,
    memories: { type: 'array', minItems: 1, maxItems: limits.maxBatchMemories, items: { type: 'object' } },
  },
} as const;

export interface ImportMemoriesInput {
  tenant_id: string;
  memories: unknown[];
}

export interface ExportQuery {
  tenant_id: string;
  public_key: string;
}

export const memoryIdParamsSchema = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 128 } },
} as const;

export interface AddMemoryInput extends ScopeInput {
  content: string;
  tenant_id: string;
  metadata?: Record<string, string | number | boolean | null>;
  /** When what it records happened (RFC 3339); default: when it is stored. */
  occurred_at?: string;
  /** Update a near-duplicate of the same tenant and scope rather than add beside it: the API's default is true, MemoryService's false. */
  dedupe?: boolean;
}

export interface AddMemoriesInput {
  memories: AddMemoryInput[];
}

export type AddMemoryRequest = AddMemoryInput | AddMemoriesInput;

export interface QueryMemoryInput extends ScopeInput, PeriodInput {
  query: string;
  tenant_id: string;
  top_k: number;
  filters?: MetadataFilter;
}

export interface ListOrQueryMemoryInput extends ScopeInput, PeriodInput {
  tenant_id: string;
  query?: string;
  top_k?: number;
  limit?: number;
  after?: string;
}

export type FilterValue = string | number | boolean | null;
export type MetadataFilter = Record<string, FilterValue | { $in: FilterValue[] }>;

export interface SearchMemoryInput extends ScopeInput, PeriodInput {
  query: string;
  tenant_id: string;
  top_k: number;
  filters?: MetadataFilter;
}

export interface UpdateMemoryInput {
  content?: string;
  metadata?: Record<string, FilterValue>;
  occurred_at?: string;
}

export interface TenantInput {
  tenant_id: string;
}

export interface TenantScopeInput extends ScopeInput {
  tenant_id: string;
}

export const attestationQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    // A client nonce for freshness: hex, 1–64 bytes.
    nonce: { type: 'string', pattern: '^(?:[0-9a-fA-F]{2}){1,64}$', description: 'must be hex, 1 to 64 bytes' },
  },
} as const;

export interface AttestationQuery {
  nonce?: string;
}

// Sealed requests (protocol/sealed.ts describes the envelopes).

const base64 = (description: string, minLength: number, maxLength: number) => ({
  type: 'string', minLength, maxLength, pattern: '^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$', description,
} as const);

/** The heads a client has seen, `<shard>/<seq>:<sha256 hex>` comma-separated (protocol/response-signature.ts parseKnownStates). */
const knownStates = { type: 'string', pattern: '^[0-9]{1,2}/[0-9]{1,15}:[0-9a-f]{64}(,[0-9]{1,2}/[0-9]{1,15}:[0-9a-f]{64}){0,63}$', maxLength: 64 * 86 } as const;

/**
 * The header every API route takes: the newest state head the client has seen of each shard,
 * which the enclave places on the chain of the answer's shard in the signed answer
 * (x-tee-ancestor). A value that is not that is a 400 here; the enclave ignores one (and
 * signs that none was sent).
 */
export const knownStateHeadersSchema = {
  type: 'object',
  properties: {
    'x-tee-known-state': { ...knownStates, description: 'must be state heads <shard>/<seq>:<64 lowercase hex>, comma-separated in shard order: the newest x-tee-state the client has seen of each shard (x-tee-shard); the signed answer says in x-tee-ancestor whether the one of its shard is on its chain' },
  },
} as const;

/** The head line of the plaintext inside a sealed envelope (protocol/sealed.ts); only the enclave ever sees it. */
export const sealedRequestHeadSchema = {
  type: 'object',
  required: ['type', 'method', 'target', 'timestamp', 'body_bytes'],
  additionalProperties: false,
  properties: {
    type: { const: SEALED_REQUEST_TYPE },
    method: { type: 'string', enum: ['GET', 'POST', 'PATCH', 'DELETE'] },
    target: { type: 'string', minLength: 1, maxLength: 16 * 1024, pattern: '^/', description: 'must be a path starting with /' },
    authorization: { type: 'string', maxLength: MAX_AUTHORIZATION_CHARS },
    organization: { type: 'string', maxLength: 256 },
    /** The x-tee-known-state header of a plain call. */
    known_state: knownStates,
    /** The secret the tenant's memories are sealed under (base64 of 32 to 256 bytes). */
    tenant_key: base64('must be base64 of 32 to 256 bytes', 44, 344),
    timestamp: { type: 'integer', minimum: 0 },
    /** How many bytes of body follow the head line (the rest is zero padding). */
    body_bytes: { type: 'integer', minimum: 0 },
  },
} as const;

export const modelIdParamsSchema = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 256 } },
} as const;

/** POST /v1/embeddings: OpenAI's request; token-id input is not taken (the service embeds text). */
export const embeddingsRequestSchema = {
  type: 'object',
  required: ['input', 'model'],
  properties: {
    model: { type: 'string', minLength: 1, maxLength: 256 },
    input: {
      anyOf: [
        { type: 'string', maxLength: limits.maxContentChars },
        { type: 'array', minItems: 1, maxItems: limits.maxEmbeddingInputs, items: { type: 'string', maxLength: limits.maxContentChars } },
      ],
      description: 'a string or an array of strings',
    },
    encoding_format: { type: 'string', enum: ['float', 'base64'] },
    dimensions: { type: 'integer', minimum: 1 },
    user: { type: 'string', maxLength: 256 },
  },
  additionalProperties: false,
} as const;

export interface EmbeddingsInput {
  model: string;
  input: string | string[];
  encoding_format?: 'float' | 'base64';
  dimensions?: number;
  user?: string;
}

/** One input item of the Responses API: a message whose content is text or text parts. */
const responsesInputItem = {
  type: 'object',
  required: ['role', 'content'],
  properties: {
    type: { const: 'message' },
    role: { type: 'string', enum: ['user', 'assistant', 'system', 'developer'] },
    content: {
      anyOf: [
        { type: 'string' },
        {
          type: 'array', maxItems: 256,
          items: { type: 'object', required: ['type'], properties: { type: { type: 'string' }, text: { type: 'string' } } },
        },
      ],
    },
  },
} as const;

/**
 * POST /v1/responses, for text: `input` as a string or messages, `instructions`, `stream`.
 * Other options pass through to the model as chat options where they have a chat
 * equivalent (enclave/chat/responses.ts).
 */
export const responsesRequestSchema = {
  type: 'object',
  required: ['model', 'input'],
  properties: {
    model: { type: 'string', minLength: 1, maxLength: 256 },
    input: {
      anyOf: [{ type: 'string', minLength: 1 }, { type: 'array', minItems: 1, maxItems: limits.maxChatMessages, items: responsesInputItem }],
    },
    instructions: { type: ['string', 'null'] },
    stream: { type: ['boolean', 'null'] },
    max_output_tokens: { type: ['integer', 'null'], minimum: 1 },
    temperature: { type: ['number', 'null'] },
    top_p: { type: ['number', 'null'] },
  },
  additionalProperties: true,
} as const;

export interface ResponsesInputMessage {
  type?: 'message';
  role: 'user' | 'assistant' | 'system' | 'developer';
  content: string | Array<{ type: string; text?: string }>;
}

export interface ResponsesInput {
  model: string;
  input: string | ResponsesInputMessage[];
  instructions?: string | null;
  stream?: boolean | null;
  max_output_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  [option: string]: unknown;
}
