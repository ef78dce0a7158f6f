import type { MetadataFilter, ScopeInput } from '../../common/schemas.js';
import { metadataMatcher } from './metadata-filter.js';
import { inPeriod, isOpen, type Period } from './memory-time.js';
import { SCOPE_FIELDS, type MemoryRecord, type MemoryScope } from './types.js';

/** The scopes `input` names (user_id, agent_id, run_id), without the absent ones. */
export function scopeOf(input: ScopeInput): MemoryScope {
  const scope: MemoryScope = {};
  for (const field of SCOPE_FIELDS) if (input[field] !== undefined) scope[field] = input[field];
  return scope;
}

export const isTenantWide = (scope: MemoryScope): boolean => SCOPE_FIELDS.every((field) => scope[field] === undefined);

/** Whether `record` is in every scope `scope` names: a record without a scope is in none of them. */
export function inScope(record: MemoryRecord, scope: MemoryScope): boolean {
  return SCOPE_FIELDS.every((field) => scope[field] === undefined || record[field] === scope[field]);
}

/**
 * What a search or a list keeps: the scopes named, the period (when it occurred) and the
 * metadata filter; undefined when it keeps everything.
 */
export function recordMatcher(scope: MemoryScope, period: Period = {}, filters?: MetadataFilter): ((record: MemoryRecord) => boolean) | undefined {
  const metadata = filters && metadataMatcher(filters);
  if (!metadata && isTenantWide(scope) && isOpen(period)) return undefined;
  return (record) => inScope(record, scope) && inPeriod(record, period) && (!metadata || metadata(record.metadata));
}
