import type { MemoryEvent, MemoryRecord } from './types.js';

/** A memory's new content whose change is logged (or being logged) but not yet applied. */
export interface UnappliedContent {
  record: MemoryRecord;
  vector: Float32Array;
  /** Settles when its change is applied or has failed. */
  settled: Promise<void>;
}

/**
 * The changes between a decision and its application: logged, or waiting to be, but not yet
 * applied (MemoryService.commit registers each batch until its journal commit settles). A
 * decision made now must see them, or two calls racing through the journal each decide
 * from the state before the other: two identical adds both stored, or an add taken as a
 * restatement of a memory whose delete is already on its way, answered UPDATE and then
 * applied to nothing (its content lost).
 *
 * New content is found by its exact text (an identical add sent twice at once is the race
 * that happens: a retry, a double submit), not by the near-duplicate search over vectors,
 * which would cost a comparison with every unapplied memory of the tenant for every add.
 */
export class ChangesInFlight {
  private readonly contents = new Map<string, Map<string, UnappliedContent[]>>();
  private readonly deletes = new Map<string, Map<string, number>>();

  /** Registers a batch until `settled`; returns the function that ends its registration. */
  begin(events: readonly MemoryEvent[], settled: Promise<void>): () => void {
    const undo: Array<() => void> = [];
    for (const event of events) {
      if (event.type === 'add' || event.type === 'update') {
        const entry: UnappliedContent = { record: event.record, vector: event.vector, settled };
        const byText = inner(this.contents, event.record.tenant_id);
        const list = byText.get(event.record.content) ?? [];
        list.push(entry);
        byText.set(event.record.content, list);
        undo.push(() => {
          list.splice(list.indexOf(entry), 1);
          if (list.length === 0) byText.delete(event.record.content);
          if (byText.size === 0) this.contents.delete(event.record.tenant_id);
        });
      } else if (event.type === 'delete') {
        const ids = inner(this.deletes, event.tenant_id);
        ids.set(event.id, (ids.get(event.id) ?? 0) + 1);
        undo.push(() => {
          const left = ids.get(event.id)! - 1;
          if (left > 0) ids.set(event.id, left);
          else ids.delete(event.id);
          if (ids.size === 0) this.deletes.delete(event.tenant_id);
        });
      }
    }
    return () => undo.forEach((end) => end());
  }

  /** Unapplied memories of the tenant with exactly this content (not those being deleted), oldest first. */
  withContent(tenantId: string, content: string): readonly UnappliedContent[] {
    const found = this.contents.get(tenantId)?.get(content) ?? [];
    return found.filter((entry) => !this.deleting(tenantId, entry.record.id));
  }

  /** Whether a delete of the memory is logged, or being logged, and not yet applied. */
  deleting(tenantId: string, id: string): boolean {
    return this.deletes.get(tenantId)?.has(id) ?? false;
  }
}

function inner<V>(outer: Map<string, Map<string, V>>, key: string): Map<string, V> {
  let map = outer.get(key);
  if (!map) outer.set(key, map = new Map());
  return map;
}
