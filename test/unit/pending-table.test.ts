import { describe, expect, it } from 'vitest';
import { PendingTable } from '../../common/pending-table.js';

describe('PendingTable', () => {
  it('keeps entries by number like a map, reusing freed slots', () => {
    const table = new PendingTable<{ name: string }>();
    const ids = [1, 7, 0xffffffff, 42];
    for (const id of ids) table.set(id, { name: `n${id}` });
    expect(table.size).toBe(4);
    expect(table.get(0xffffffff)).toEqual({ name: 'n4294967295' });
    expect(table.has(7)).toBe(true);
    expect(table.delete(7)).toBe(true);
    expect(table.delete(7)).toBe(false);
    expect(table.has(7)).toBe(false);
    expect(table.get(7)).toBeUndefined();
    // A new entry takes the freed slot and is not confused with the old one.
    table.set(8, { name: 'n8' });
    expect(table.get(8)).toEqual({ name: 'n8' });
    expect(table.get(7)).toBeUndefined();
    table.set(8, { name: 'replaced' });
    expect(table.size).toBe(4);
    expect(table.list().sort(([a], [b]) => a - b)).toEqual([[1, { name: 'n1' }], [8, { name: 'replaced' }], [42, { name: 'n42' }], [0xffffffff, { name: 'n4294967295' }]]);
  });

  it('can be emptied while going through its list, and cleared', () => {
    const table = new PendingTable<number>();
    for (let id = 0; id < 100; id++) table.set(id, id * 2);
    for (const [id, value] of table.list()) {
      expect(value).toBe(id * 2);
      table.delete(id);
    }
    expect(table.size).toBe(0);
    for (let id = 0; id < 10; id++) table.set(id, id);
    table.clear();
    expect(table.size).toBe(0);
    expect(table.get(3)).toBeUndefined();
    table.set(3, 9);
    expect(table.get(3)).toBe(9);
  });
});
