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

export const addMemorySchema = {
  type: 'object',
  required: ['content', 'tenant_id'],
  additionalProperties: false,
  properties: {
    // \S: content that is only whitespace has nothing to remember.
    content: { type: 'string', minLength: 1, maxLength: limits.maxContentChars, pattern: '\\S', description: 'must contain some non-whitespace text' },
    tenant_id: tenantId,
    metadata: metadataSchema,
  },
} as const;

export const queryMemorySchema = {
  type: 'object',
  required: ['query', 'tenant_id'],
  additionalProperties: false,
  properties: {
    query: { type: 'string', minLength: 1, maxLength: limits.maxQueryChars, pattern: '\\S', description: 'must contain some non-whitespace text' },
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
