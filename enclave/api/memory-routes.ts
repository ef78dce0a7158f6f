import { badRequest, notFound } from '../../common/errors.js';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import type { Authorizer } from '../auth/authorizer.js';
import {
  addMemoryRequestSchema, memoryIdParamsSchema, queryMemorySchema, tenantQuerySchema,
  type AddMemoryRequest, type QueryMemoryInput, type TenantInput,
} from '../../common/schemas.js';
import { validator } from '../../common/validation.js';
import type { MemoryRecord, MemoryService } from '../memory/memory-service.js';
import { TENANT_HEADER } from '../../sdk/protocol/response-signature.js';
import { expectPath, jsonReply, parseJsonBody, parseTarget } from './request.js';

/** Names the tenant an answer acted for; it is signed with the answer (sdk/protocol/response-signature.ts). */
const forTenant = (...tenants: string[]) => ({ [TENANT_HEADER]: [...new Set(tenants)].sort().join(',') });

const validAdd = validator<AddMemoryRequest>(addMemoryRequestSchema, 'body');
const validQuery = validator<QueryMemoryInput>(queryMemorySchema, 'querystring');
const validTenant = validator<TenantInput>(tenantQuerySchema, 'querystring');
const validId = validator<{ id: string }>(memoryIdParamsSchema, 'params');

const collection = /^\/v1\/memory\/?$/;
const item = /^\/v1\/memory\/([^/]+)$/;

/**
 * The memory endpoints, on the enclave's side: parse, validate again, check the caller's
 * key holds the tenant, act, answer. The key is checked before any lookup, so a refused
 * caller learns nothing about what exists.
 */
export function memoryRoutes(memory: MemoryService, auth: Authorizer) {
  const lookup = (request: ApiRequest): { record: MemoryRecord; tenantId: string } => {
    const target = parseTarget(request.target);
    const [, rawId] = expectPath(target, item);
    const { tenant_id } = validTenant(target.query);
    const { id } = validId({ id: decodeSegment(rawId) });
    auth.authorize(request.authorization, tenant_id);
    const record = memory.get(tenant_id, id);
    // The same answer whether the id does not exist or belongs to another tenant.
    if (!record) throw notFound(`no memory '${id}' for tenant '${tenant_id}'`, 'memory_not_found');
    return { record, tenantId: tenant_id };
  };

  return {
    async add(request: ApiRequest): Promise<ApiReply> {
      expectPath(parseTarget(request.target), collection);
      const input = validAdd(parseJsonBody(request.body));
      // A batch is validated whole, and every tenant in it authorized, before anything is stored.
      if ('memories' in input) {
        for (const item of input.memories) auth.authorize(request.authorization, item.tenant_id);
        const data = await memory.addMany(input.memories, auth.tenantsOf(request.authorization));
        return jsonReply(200, { object: 'list', data }, forTenant(...input.memories.map((m) => m.tenant_id)));
      }
      auth.authorize(request.authorization, input.tenant_id);
      return jsonReply(200, await memory.add(input, auth.tenantsOf(request.authorization)), forTenant(input.tenant_id));
    },

    async query(request: ApiRequest): Promise<ApiReply> {
      const target = parseTarget(request.target);
      expectPath(target, collection);
      const input = validQuery({ ...target.query });
      auth.authorize(request.authorization, input.tenant_id);
      const results = await memory.query(input);
      return jsonReply(200, {
        object: 'list',
        data: results.map(({ record, score, scores }) => ({ ...record, score, scores })),
        tenant_id: input.tenant_id,
        query: input.query,
        top_k: input.top_k,
      }, forTenant(input.tenant_id));
    },

    async get(request: ApiRequest): Promise<ApiReply> {
      const { record, tenantId } = lookup(request);
      return jsonReply(200, record, forTenant(tenantId));
    },

    async delete(request: ApiRequest): Promise<ApiReply> {
      const { record, tenantId } = lookup(request);
      await memory.delete(tenantId, record.id);
      return jsonReply(200, { id: record.id, object: 'memory.deleted', deleted: true }, forTenant(tenantId));
    },
  };
}

/** A path segment as the proxy's router sees it: percent-decoded (malformed escapes are a 400). */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw badRequest('invalid memory id in the path', 'id');
  }
}
