import { SCOPE_FIELDS, type MemoryRecord } from './types.js';

/**
 * A tenant's memories in the order they were added, as links: the memory held just before
 * and just after each one (a deleted memory's two sides become each other's). It is what
 * tells a query which memories are the turns around a hit (retrieval/neighbour-lending.ts).
 * Rebuilt by replaying the adds (a snapshot keeps the records in this order), so a restart
 * finds the same neighbours. Two maps of ids: no object a memory.
 */
export class AddOrder {
  private readonly before = new Map<string, string>();
  private readonly after = new Map<string, string>();
  private last: string | undefined;

  append(id: string): void {
    if (this.last !== undefined) {
      this.before.set(id, this.last);
      this.after.set(this.last, id);
    }
    this.last = id;
  }

  remove(id: string): void {
    const [previous, next] = [this.before.get(id), this.after.get(id)];
    this.before.delete(id);
    this.after.delete(id);
    if (previous !== undefined) {
      if (next !== undefined) this.after.set(previous, next);
      else this.after.delete(previous);
    }
    if (next !== undefined) {
      if (previous !== undefined) this.before.set(next, previous);
      else this.before.delete(next);
    }
    if (this.last === id) this.last = previous;
  }

  /** The memories added just before and just after `id` that the tenant still holds (none, one or two). */
  beside(id: string): string[] {
    const sides: string[] = [];
    const [previous, next] = [this.before.get(id), this.after.get(id)];
    if (previous !== undefined) sides.push(previous);
    if (next !== undefined) sides.push(next);
    return sides;
  }
}

/**
 * Whether two memories added one after the other are turns of one session: both carry the
 * same run_id (a session, in the API's scopes) and the same user_id and agent_id. Memories
 * without a run_id have no neighbours: facts stored one by one or in a batch are not a
 * conversation, and a fact lending its score to the one stored after it would only push
 * unrelated memories up (the chat's relevance cut would no longer see a first hit far ahead).
 */
export function sameSession(a: MemoryRecord, b: MemoryRecord): boolean {
  return a.run_id !== undefined && SCOPE_FIELDS.every((field) => a[field] === b[field]);
}
