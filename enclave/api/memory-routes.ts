import { badRequest, internal, notFound } from '../../common/errors.js';
import { limits } from '../../common/limits.js';
import type { ApiReply } from '../../common/proto.js';
import { authorize, requireWholeTenant, scopeFor, type Caller } from '../auth/caller.js';
import { inScope, scopeOf } from '../memory/memory-scope.js';
import { normalizeInstant, type Period } from '../memory/memory-time.js';
import type { PeriodInput } from '../../common/schemas.js';
import type { AddOutcome, ChangeAuthor, MemoryService } from '../memory/memory-service.js';
import { importedItem } from '../memory/import.js';
import type { MemoryRecord, MemoryVersion, ScoredMemory } from '../memory/types.js';
import { TENANT_HEADER } from '../../protocol/response-signature.js';
import { jsonReply } from './request.js';
import { EXTRACTION_PROMPT_VERSION, type ExtractionOutcome, type Extractor } from '../chat/extraction.js';
import { normalizeChat } from '../chat/messages.js';
import type { DeletionReceipt, UnsignedReceipt } from '../../protocol/deletion-receipt.js';

/** Signs a deletion's receipt once it is durable (signing.ts deletionReceipt). */
export type Receipts = (deletion: Omit<UnsignedReceipt, 'state' | 'store' | 'deleted_at'>) => DeletionReceipt;
import type { CallContext, RouteCall, RouteHandler } from './resolve-call.js';

/** Names the tenant an answer acted for; it is signed with the answer (protocol/response-signature.ts). */
const forTenant = (...tenants: string[]) => ({ [TENANT_HEADER]: [...new Set(tenants)].sort().join(',') });

/** Who a change is made by, as history records it. */
const authorOf = (caller: Caller): ChangeAuthor => ({ keyId: caller.keyId, replay: caller.replay });

/** A version as GET /v1/memory/{id}/history shows it: `memory` is null once the memory is deleted. */
const versionReply = (version: MemoryVersion, i: number) => ({
  object: 'memory.version', version: i + 1, event: version.event, at: version.at, key_id: version.key_id, extracted: version.extracted, memory: version.record ?? null,
});

/**
 * A search's answer: the list shape, each memory with its scores. Object.assign, not
 * `{ ...record, score, scores }`: V8 (Node 20) promoted what such literals made
 * (docs/performance-log.md#collections-again-2026-11-25-afternoon).
 */
const searchReply = (tenantId: string, query: string, topK: number, results: ScoredMemory[]) => jsonReply(200, {
  object: 'list',
  data: results.map(({ record, score, scores }) => Object.assign({}, record, { score, scores })),
  tenant_id: tenantId,
  query,
  top_k: topK,
}, forTenant(tenantId));

/**
 * An add's answer: the memory, and what was done (`event`, as Mem0 names it): `ADD`, or
 * `UPDATE` when it restated a memory of its tenant and scope, which now holds it, with that
 * memory's content before (`previous_content`).
 */
const addAnswer = (outcome: AddOutcome) => (outcome.event === 'ADD'
  ? Object.assign({}, outcome.record, { event: outcome.event })
  : Object.assign({}, outcome.record, { event: outcome.event, previous_content: outcome.previous.content }));

/**
 * An extraction's answer: what was done per fact (`event`, the memory's `id` and text, and
 * for an update the text before), the prompt version and model that decided it; the signed
 * headers name the tenant, where the conversation and memories went, and which held
 * memories were shown to the model (x-memory-ids, as chat's).
 */
const extractReply = (tenantId: string, outcome: ExtractionOutcome) => jsonReply(200, {
  object: 'list', data: outcome.results, tenant_id: tenantId, model: outcome.model, prompt_version: EXTRACTION_PROMPT_VERSION, memory_ids: outcome.shownIds,
}, { ...forTenant(tenantId), ...outcome.upstream.headers(), 'x-memory-ids': outcome.shownIds.join(',') });

/** A time the schema let through, as the enclave keeps it; 400 when it names no real time. */
function instant<T extends string | undefined>(value: T, param: string): T {
  if (value === undefined) return value;
  const normalized = normalizeInstant(value);
  if (normalized === undefined) throw badRequest(`'${param}' names no real time: ${JSON.stringify(value)}`, param, 'invalid_value');
  return normalized as T;
}

const periodOf = (input: PeriodInput): Period => ({ since: instant(input.since, 'since'), until: instant(input.until, 'until') });

/**
 * The memory endpoints, on the enclave's side (inputs already validated against the route
 * table): check the caller's key holds the tenant, act, answer. The key is checked before
 * any lookup, so a refused caller learns nothing about what exists.
 */
export function memoryRoutes(memory: MemoryService, receipt?: Receipts, extractor?: Extractor): {
  [N in 'AddMemory' | 'ImportMemories' | 'ListMemories' | 'DeleteMemories' | 'SearchMemory' | 'GetMemory' | 'GetMemoryHistory' | 'UpdateMemory' | 'DeleteMemory']: RouteHandler<N>
} {
  /** The key holds the tenant, and the call carries its tenant key if it has one (MemoryService.admitTenant). */
  const admit = (caller: Caller, tenantId: string): void => {
    authorize(caller, tenantId);
    memory.admitTenant(tenantId, caller.tenantKey);
  };
  const lookup = (caller: Caller, tenantId: string, id: string): MemoryRecord => {
    admit(caller, tenantId);
    const record = memory.get(tenantId, id);
    // The same answer whether the id does not exist or belongs to another tenant, or to a
    // scope the caller's key is not limited to.
    if (!record || !inScope(record, caller.scope ?? {})) throw notFound(`no memory '${id}' for tenant '${tenantId}'`, 'memory_not_found');
    return record;
  };

  return {
    async AddMemory({ caller, body: input }, context) {
      if ('messages' in input) {
        // Admitted like any add: a keyed tenant's memories go to no model without its key.
        admit(caller, input.tenant_id);
        if (!extractor) throw internal();
        return extractReply(input.tenant_id, await extractor.extract(
          { tenant: input.tenant_id, scope: scopeFor(caller, scopeOf(input)), messages: normalizeChat(input).messages, model: input.model, occurred_at: instant(input.occurred_at, 'occurred_at'), metadata: input.metadata },
          { keyTenants: caller.tenants, keyId: caller.keyId, replay: caller.replay, meter: context?.meter, signal: context?.signal ?? new AbortController().signal },
        ));
      }
      // A batch is validated whole, and every tenant in it authorized, before anything is stored.
      if ('memories' in input) {
        for (const item of input.memories) admit(caller, item.tenant_id);
        const items = input.memories.map((item, i) =>
          ({ ...item, occurred_at: instant(item.occurred_at, `memories.${i}.occurred_at`), dedupe: item.dedupe ?? true, ...scopeFor(caller, scopeOf(item)) }));
        const data = (await memory.remember(items, caller.tenants, context?.meter, authorOf(caller))).map(addAnswer);
        return jsonReply(200, { object: 'list', data }, forTenant(...input.memories.map((m) => m.tenant_id)));
      }
      admit(caller, input.tenant_id);
      const item = { ...input, occurred_at: instant(input.occurred_at, 'occurred_at'), dedupe: input.dedupe ?? true, ...scopeFor(caller, scopeOf(input)) };
      const [outcome] = await memory.remember([item], caller.tenants, context?.meter, authorOf(caller));
      return jsonReply(200, addAnswer(outcome), forTenant(input.tenant_id));
    },

    async ImportMemories({ caller, body: { tenant_id, memories } }, context) {
      admit(caller, tenant_id);
      requireWholeTenant(caller);
      const now = Math.floor(Date.now() / 1000);
      const items = memories.map((item, i) => importedItem(tenant_id, item, `memories.${i}`, now));
      const { imported, deleted, skipped } = await memory.importMany(tenant_id, items, caller.tenants, context?.meter, authorOf(caller));
      return jsonReply(200, { object: 'memory.import', tenant_id, imported: imported.length, deleted: deleted.length, skipped }, forTenant(tenant_id));
    },

    async ListMemories({ caller, query: input }: RouteCall<'ListMemories'>, context?: CallContext): Promise<ApiReply> {
      admit(caller, input.tenant_id);
      const scope = scopeFor(caller, scopeOf(input));
      const period = periodOf(input);
      if (input.query !== undefined) {
        if (input.limit !== undefined || input.after !== undefined) {
          throw badRequest('limit and after page a list; a query takes top_k', input.limit !== undefined ? 'limit' : 'after', 'invalid_value');
        }
        const topK = input.top_k ?? limits.defaultTopK;
        return searchReply(input.tenant_id, input.query, topK, await memory.query({ tenant_id: input.tenant_id, query: input.query, top_k: topK, ...scope, ...period }, undefined, context?.meter));
      }
      if (input.top_k !== undefined) throw badRequest('top_k needs a query; a list takes limit and after', 'top_k', 'invalid_value');
      const limit = input.limit ?? limits.defaultListLimit;
      const page = memory.list(input.tenant_id, limit, input.after, scope, period);
      if (!page) throw badRequest(`'after' names no memory of tenant '${input.tenant_id}'`, 'after', 'invalid_value');
      return jsonReply(200, {
        object: 'list',
        data: page.data,
        first_id: page.data[0]?.id ?? null,
        last_id: page.data.at(-1)?.id ?? null,
        has_more: page.hasMore,
      }, forTenant(input.tenant_id));
    },

    async DeleteMemories({ caller, query }) {
      const { tenant_id } = query;
      admit(caller, tenant_id);
      const scope = scopeFor(caller, scopeOf(query));
      const count = await memory.deleteAll(tenant_id, scope, authorOf(caller));
      // A key limited to scopes deletes only within them: the receipt says what was deleted, not more.
      const signed = receipt?.(Object.keys(scope).length > 0 ? { scope: 'scope', tenant_id, where: scope, ids: [], count } : { scope: 'tenant', tenant_id, ids: [], count });
      return jsonReply(200, { object: 'memory.deleted', deleted: true, count, ...(signed ? { receipt: signed } : {}) }, forTenant(tenant_id));
    },

    async SearchMemory({ caller, body: input }, context) {
      admit(caller, input.tenant_id);
      const query = { ...input, ...scopeFor(caller, scopeOf(input)), ...periodOf(input) };
      return searchReply(input.tenant_id, input.query, input.top_k, await memory.query(query, undefined, context?.meter));
    },

    async GetMemory({ caller, query: { tenant_id }, params: { id } }) {
      return jsonReply(200, lookup(caller, tenant_id, id), forTenant(tenant_id));
    },

    async GetMemoryHistory({ caller, query: { tenant_id }, params: { id } }) {
      admit(caller, tenant_id);
      const history = memory.historyOf(tenant_id, id);
      // As GetMemory: the same answer for an id never seen, forgotten, or another tenant's.
      if (!history) throw notFound(`no memory '${id}' for tenant '${tenant_id}'`, 'memory_not_found');
      const deletion = history.deleted ? history.versions.at(-1)! : undefined;
      return jsonReply(200, {
        object: 'list', id, tenant_id, deleted: history.deleted, deleted_at: deletion?.at ?? null, data: history.versions.map(versionReply),
      }, forTenant(tenant_id));
    },

    async UpdateMemory({ caller, query: { tenant_id }, params: { id }, body }, context) {
      lookup(caller, tenant_id, id);
      const updated = await memory.update(tenant_id, id, { ...body, occurred_at: instant(body.occurred_at, 'occurred_at') }, context?.meter, authorOf(caller));
      if (!updated) throw notFound(`no memory '${id}' for tenant '${tenant_id}'`, 'memory_not_found');
      return jsonReply(200, updated, forTenant(tenant_id));
    },

    async DeleteMemory({ caller, query: { tenant_id }, params: { id } }) {
      const record = lookup(caller, tenant_id, id);
      await memory.delete(tenant_id, record.id, authorOf(caller));
      const signed = receipt?.({ scope: 'memory', tenant_id, ids: [record.id], count: 1 });
      return jsonReply(200, { id: record.id, object: 'memory.deleted', deleted: true, ...(signed ? { receipt: signed } : {}) }, forTenant(tenant_id));
    },
  };
}
