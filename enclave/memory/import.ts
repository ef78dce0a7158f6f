import { badRequest } from '../../common/errors.js';
import { addMemorySchema, type AddMemoryInput } from '../../common/schemas.js';
import { validator } from '../../common/validation.js';
import { SCOPE_FIELDS, type ChangeInfo, type MemoryRecord, type MemoryVersion, type Metadata } from './types.js';
import { scopeOf } from './memory-scope.js';
import { normalizeInstant } from './memory-time.js';

/** A memory to restore with its id (POST /v1/memory/import). */
export interface ImportedMemory {
  record: MemoryRecord;
  /** Who made its current version and when, as the export says; absent for other sources. */
  change?: ChangeInfo;
  /** Its versions before the current one (an export of this service). */
  past?: MemoryVersion[];
}

/** A deleted memory's history to restore with its id (a "deleted" line of an export of this service). */
export interface ImportedDeletion {
  deleted: { id: string; versions: MemoryVersion[] };
}

export type ImportItem = ImportedMemory | ImportedDeletion;

const ID = /^[A-Za-z0-9._:@-]{1,128}$/;
const validAdd = validator<AddMemoryInput>(addMemorySchema, 'body');

/** Unix seconds from a number of seconds or a date string (Mem0 writes ISO 8601); undefined when neither. */
function seconds(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return Math.floor(value);
  if (typeof value === 'string') {
    const ms = Date.parse(value);
    if (Number.isFinite(ms) && ms >= 0) return Math.floor(ms / 1000);
  }
  return undefined;
}

const changeOf = (version: Record<string, unknown> | undefined): ChangeInfo | undefined =>
  version && typeof version.at === 'number' ? { at: version.at, key_id: typeof version.key_id === 'string' ? version.key_id : null, extracted: version.extracted === true } : undefined;

/**
 * One item of an import, as a memory of `tenantId` with its id kept: a line of this service's
 * export ({type: "memory", memory, history}) or an item of a Mem0 export ({id, memory,
 * metadata, created_at, updated_at, …}). Content and metadata are held to the same limits as
 * an add; `where` names the item in a refusal.
 */
export function importedMemory(tenantId: string, item: unknown, where: string, now: number): ImportedMemory {
  const value = (item ?? {}) as Record<string, unknown>;
  const ours = value.type === 'memory' && typeof value.memory === 'object' && value.memory !== null;
  const source = (ours ? value.memory : value) as Record<string, unknown>;
  const content = ours ? source.content : source.memory;
  if (typeof source.id !== 'string' || !ID.test(source.id)) throw badRequest(`${where}: id must be 1 to 128 letters, digits or . _ : @ -`, where, 'invalid_value');
  let input: AddMemoryInput;
  try {
    // Scopes (Mem0's user_id, agent_id, run_id have the same names) and when it happened come along, checked like an add's.
    const scopes = Object.fromEntries(SCOPE_FIELDS.filter((field) => typeof source[field] === 'string').map((field) => [field, source[field]]));
    input = validAdd({
      tenant_id: tenantId, content, ...scopes,
      ...(typeof source.occurred_at === 'string' ? { occurred_at: source.occurred_at } : {}),
      ...(source.metadata === undefined || source.metadata === null ? {} : { metadata: source.metadata }),
    });
  } catch (err) {
    throw badRequest(`${where}: ${(err as Error).message}`, where, 'invalid_value');
  }
  const createdAt = seconds(source.created_at) ?? now;
  const updatedAt = seconds(source.updated_at);
  const occurred = input.occurred_at === undefined ? undefined : normalizeInstant(input.occurred_at);
  if (input.occurred_at !== undefined && occurred === undefined) throw badRequest(`${where}: occurred_at is not an RFC 3339 time`, where, 'invalid_value');
  const record: MemoryRecord = {
    id: source.id, object: 'memory', tenant_id: tenantId, content: input.content, metadata: { ...(input.metadata ?? {}) } as Metadata, created_at: createdAt,
    ...(updatedAt !== undefined && updatedAt !== createdAt ? { updated_at: updatedAt } : {}),
    occurred_at: occurred ?? new Date(createdAt * 1000).toISOString(), ...scopeOf(input),
  };
  if (!ours || !Array.isArray(value.history) || value.history.length === 0) return { record };
  const history = value.history as Array<Record<string, unknown>>;
  // Past versions are restored as recorded, under this tenant; only their content is checked again.
  const past: MemoryVersion[] = [];
  for (const [i, version] of history.slice(0, -1).entries()) {
    const change = changeOf(version);
    const event = version.event === 'add' || version.event === 'update' ? version.event : undefined;
    const old = version.record as Record<string, unknown> | undefined;
    if (!change || !event || !old || typeof old.content !== 'string') throw badRequest(`${where}: history ${i} is not a version of a memory`, where, 'invalid_value');
    const checked = validAdd({ tenant_id: tenantId, content: old.content, ...(old.metadata ? { metadata: old.metadata } : {}) });
    const oldUpdated = seconds(old.updated_at);
    past.push({
      event, ...change,
      record: { id: record.id, object: 'memory', tenant_id: tenantId, content: checked.content, metadata: { ...(checked.metadata ?? {}) } as Metadata, created_at: createdAt, ...(oldUpdated !== undefined ? { updated_at: oldUpdated } : {}) },
    });
  }
  const change = changeOf(history.at(-1));
  return { record, ...(change ? { change } : {}), ...(past.length > 0 ? { past } : {}) };
}

/**
 * A "deleted" line of an export ({type: "deleted", id, history}): the history of a memory the
 * tenant deleted, its times, events and key ids, without content (none is taken if sent).
 */
export function importedDeletion(item: Record<string, unknown>, where: string): ImportedDeletion {
  if (typeof item.id !== 'string' || !ID.test(item.id)) throw badRequest(`${where}: id must be 1 to 128 letters, digits or . _ : @ -`, where, 'invalid_value');
  const history = Array.isArray(item.history) ? (item.history as Array<Record<string, unknown> | null>) : [];
  const versions: MemoryVersion[] = [];
  for (const [i, version] of history.entries()) {
    const change = changeOf(version ?? undefined);
    const event = version?.event;
    if (!change || (event !== 'add' && event !== 'update' && event !== 'delete')) throw badRequest(`${where}: history ${i} is not a version of a deleted memory`, where, 'invalid_value');
    versions.push({ event, ...change });
  }
  if (versions.at(-1)?.event !== 'delete') throw badRequest(`${where}: a deleted memory's history ends with its delete`, where, 'invalid_value');
  return { deleted: { id: item.id, versions } };
}

/** One item of an import: a deleted memory's history, or a memory (importedMemory). */
export function importedItem(tenantId: string, item: unknown, where: string, now: number): ImportItem {
  const value = item as Record<string, unknown> | null;
  return value?.type === 'deleted' ? importedDeletion(value, where) : importedMemory(tenantId, item, where, now);
}
