import { SEALED_REQUEST_TYPE } from '../sdk/protocol/sealed.js';
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

export const queryMemorySchema = {
  type: 'object',
  required: ['query', 'tenant_id'],
  additionalProperties: false,
  properties: {
    query: nonBlankText(limits.maxQueryChars),
    tenant_id: tenantId,
    top_k: { type: 'integer', minimum: 1, maximum: limits.maxTopK, default: limits.defaultTopK },
  },
} as const;

export const tenantQuerySchema = {
  type: 'object',
  required: ['tenant_id'],
  additionalProperties: false,
  properties: { tenant_id: tenantId },
} as const;

export const memoryIdParamsSchema = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 128 } },
} as const;

export interface AddMemoryInput {
  content: string;
  tenant_id: string;
  metadata?: Record<string, string | number | boolean | null>;
}

export interface AddMemoriesInput {
  memories: AddMemoryInput[];
}

export type AddMemoryRequest = AddMemoryInput | AddMemoriesInput;

export interface QueryMemoryInput {
  query: string;
  tenant_id: string;
  top_k: number;
}

export interface TenantInput {
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

// Sealed requests (sdk/protocol/sealed.ts describes the envelopes).

const base64 = (description: string, minLength: number, maxLength: number) => ({
  type: 'string', minLength, maxLength, pattern: '^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$', description,
} as const);

/** POST /v1/sealed: what the host sees, and all it can check. */
export const sealedEnvelopeSchema = {
  type: 'object',
  required: ['client_public_key', 'nonce', 'ciphertext'],
  additionalProperties: false,
  properties: {
    client_public_key: base64('must be 32 bytes of base64 (an X25519 public key)', 44, 44),
    nonce: base64('must be 24 bytes of base64', 32, 32),
    // At least the 16-byte authenticator.
    ciphertext: base64('must be base64', 24, limits.maxSealedEnvelopeBytes),
  },
} as const;

/** The decrypted request inside a sealed envelope; only the enclave ever sees it. */
export const sealedPayloadSchema = {
  type: 'object',
  required: ['type', 'method', 'target', 'body', 'timestamp'],
  additionalProperties: false,
  properties: {
    type: { const: SEALED_REQUEST_TYPE },
    method: { type: 'string', enum: ['GET', 'POST', 'DELETE'] },
    target: { type: 'string', minLength: 1, maxLength: 16 * 1024, pattern: '^/', description: 'must be a path starting with /' },
    body: base64('must be base64', 0, limits.maxSealedEnvelopeBytes),
    authorization: { type: 'string', maxLength: MAX_AUTHORIZATION_CHARS },
    organization: { type: 'string', maxLength: 256 },
    timestamp: { type: 'integer', minimum: 0 },
    /** Spaces that round the plaintext's size up to a bucket (sdk/protocol/sealed.ts paddedSize). */
    pad: { type: 'string', maxLength: 65536, pattern: '^ *$' },
  },
} as const;

export interface SealedEnvelopeInput {
  client_public_key: string;
  nonce: string;
  ciphertext: string;
}
