/**
 * What waits on work in flight (a request's reply, its cancel handle), by number. The entries
 * sit in an array whose slot is cleared on delete, and the Map holds slot numbers only: a Map
 * that sees a set and a delete per request makes V8 promote what its entries reach
 * (docs/performance-log.md#a-second-thread-for-large-tenants-2026-11-25-last-stop).
 */
export class PendingTable<T> {
  private readonly slotOf = new Map<number, number>();
  private readonly entries: Array<T | undefined> = [];
  private readonly free: number[] = [];

  get size(): number {
    return this.slotOf.size;
  }

  has(id: number): boolean {
    return this.slotOf.has(id);
  }

  get(id: number): T | undefined {
    const slot = this.slotOf.get(id);
    return slot === undefined ? undefined : this.entries[slot];
  }

  set(id: number, entry: T): void {
    let slot = this.slotOf.get(id);
    if (slot === undefined) {
      slot = this.free.pop() ?? this.entries.length;
      this.slotOf.set(id, slot);
    }
    this.entries[slot] = entry;
  }

  delete(id: number): boolean {
    const slot = this.slotOf.get(id);
    if (slot === undefined) return false;
    this.slotOf.delete(id);
    this.entries[slot] = undefined;
    this.free.push(slot);
    return true;
  }

  /** The entries now, with their numbers (a copy: deleting while going through it is safe). */
  list(): Array<[number, T]> {
    return [...this.slotOf].map(([id, slot]) => [id, this.entries[slot]!]);
  }

  clear(): void {
    this.slotOf.clear();
    this.entries.length = 0;
    this.free.length = 0;
  }
}
