import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { modelsDir } from '../../common/paths.js';
import { loadEmbedder, type Embedder } from '../../enclave/embedding/embedder.js';
import type { MemoryJournal } from '../../enclave/memory/journal.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import type { MemoryEvent } from '../../enclave/memory/types.js';

/**
 * Calls racing through the journal: each decides while the other's change is logged but not
 * yet applied. A journal that holds every commit until the test lets it go (in log order, as
 * the store's group commit does) makes each race happen every time.
 */

interface Held {
  events: readonly MemoryEvent[];
  /** Applies the batch and acknowledges it: what a durable write does. */
  store(): void;
  /** Refuses it with nothing applied: what a failed write does. */
  fail(): void;
}

function heldJournal(): { journal: MemoryJournal; held: Held[] } {
  const held: Held[] = [];
  const journal: MemoryJournal = {
    commit: (events, apply) => new Promise<void>((resolve, reject) => {
      held.push({ events, store: () => { apply(); resolve(); }, fail: () => reject(new Error('the host store failed the write')) });
    }),
  };
  return { journal, held };
}

let embedder: Embedder;

/** A memory service on a journal that holds every commit. */
function journaled(): { memory: MemoryService; held: Held[] } {
  const memory = new MemoryService(embedder);
  const { journal, held } = heldJournal();
  memory.useJournal(journal);
  return { memory, held };
}
beforeAll(async () => {
  embedder = await loadEmbedder({ name: 'static', modelsDir });
});
afterAll(async () => {
  await embedder?.close();
});

const TEXT = 'Maya is allergic to peanuts and carries an epinephrine pen';
const contents = (memory: MemoryService, tenant = 't') => memory.list(tenant, 100)!.data.map((m) => m.content);

describe('decisions see the changes still in flight', () => {
  it('the same memory added twice at once is stored once: the second waits for the first, then updates it', async () => {
    const { memory, held } = journaled();
    const first = memory.remember([{ tenant_id: 't', content: TEXT, dedupe: true }]);
    const second = memory.remember([{ tenant_id: 't', content: TEXT, dedupe: true }]);
    await vi.waitFor(() => expect(held.length).toBe(1));
    // The second add does not log anything while the memory it restates is still being stored.
    await new Promise((r) => setTimeout(r, 20));
    expect(held.length).toBe(1);
    held[0].store();
    const [[a]] = await Promise.all([first, vi.waitFor(() => expect(held.length).toBe(2))]);
    held[1].store();
    const [b] = await second;
    expect(a.event).toBe('ADD');
    expect(b).toMatchObject({ event: 'UPDATE', record: { id: a.record.id } });
    expect(contents(memory)).toEqual([TEXT]);
  });

  it('a restatement of a memory whose store fails is added, not logged as an update of nothing', async () => {
    const { memory, held } = journaled();
    const first = memory.remember([{ tenant_id: 't', content: TEXT, dedupe: true }]);
    const second = memory.remember([{ tenant_id: 't', content: TEXT, dedupe: true }]);
    await vi.waitFor(() => expect(held.length).toBe(1));
    held[0].fail();
    await expect(first).rejects.toThrow('failed the write');
    await vi.waitFor(() => expect(held.length).toBe(2));
    expect(held[1].events.map((e) => e.type)).toEqual(['add']);
    held[1].store();
    const [b] = await second;
    expect(b.event).toBe('ADD');
    expect(contents(memory)).toEqual([TEXT]);
  });

  it('a restatement of a memory whose delete is on its way is a new memory, not an update the delete then erases', async () => {
    const { memory, held } = journaled();
    const adding = memory.add({ tenant_id: 't', content: TEXT, dedupe: true });
    await vi.waitFor(() => expect(held.length).toBe(1));
    held[0].store();
    const old = await adding;
    const deleting = memory.delete('t', old.id);
    await vi.waitFor(() => expect(held.length).toBe(2));
    const again = memory.remember([{ tenant_id: 't', content: TEXT, dedupe: true }]);
    await vi.waitFor(() => expect(held.length).toBe(3));
    held[1].store();
    held[2].store();
    await deleting;
    const [outcome] = await again;
    expect(outcome.event).toBe('ADD');
    expect(outcome.record.id).not.toBe(old.id);
    expect(memory.get('t', outcome.record.id)?.content).toBe(TEXT);
    expect(contents(memory)).toEqual([TEXT]);
  });

  it('extraction\'s update of a memory whose delete is on its way changes nothing (memory_changed)', async () => {
    const { memory, held } = journaled();
    const adding = memory.add({ tenant_id: 't', content: 'Maya lives in Lisbon' });
    await vi.waitFor(() => expect(held.length).toBe(1));
    held[0].store();
    const old = await adding;
    const deleting = memory.delete('t', old.id);
    await vi.waitFor(() => expect(held.length).toBe(2));
    const change = memory.change('t', { adds: [], updates: [{ id: old.id, content: 'Maya lives in Porto' }], deletes: [] });
    // Decided while the delete is still held: refused at once, or logged behind the delete.
    const first = await Promise.race([change.then((outcome) => ({ outcome })), vi.waitFor(() => expect(held.length).toBe(3)).then(() => 'logged an update')]);
    expect(first).toEqual({ outcome: undefined });
    held[1].store();
    await deleting;
    expect(held.length).toBe(2);
    expect(contents(memory)).toEqual([]);
  });

  it('dedupe: false is stored beside whatever is in flight', async () => {
    const { memory, held } = journaled();
    const first = memory.remember([{ tenant_id: 't', content: TEXT, dedupe: true }]);
    const second = memory.remember([{ tenant_id: 't', content: TEXT, dedupe: false }]);
    await vi.waitFor(() => expect(held.length).toBe(2));
    held[0].store();
    held[1].store();
    expect((await first)[0].event).toBe('ADD');
    expect((await second)[0].event).toBe('ADD');
    expect(contents(memory)).toEqual([TEXT, TEXT]);
  });
});
