/**
 * Two enclaves' stores on one host store: an old owner that wakes up after a new one opened
 * the same store must fail at its next write and refuse every change after it, never answer
 * for a change it could not store, and never leave the new owner's changes behind a
 * compaction. In process, over the host store's real folder (one FsBlobStore, as one host
 * store process serves both), and once over its gRPC service.
 */
import { randomBytes } from 'node:crypto';
import type * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import type { BlobStore } from '../../common/blob-store.js';
import { listen } from '../../common/grpc-listen.js';
import { createLogger } from '../../common/logger.js';
import { MemoryService } from '../../enclave/memory/memory-service.js';
import { GrpcBlobStore } from '../../enclave/storage/grpc-blob-store.js';
import { DurableStore } from '../../enclave/storage/store.js';
import { storeFixture } from '../helpers/store-fixture.js';
import { createHostStoreServer } from '../../host-store/grpc-service.js';
import { freePort } from '../helpers/service.js';

const fx = storeFixture('two-writers');
const sealingKey = randomBytes(32);

/** An enclave's memory and store on `blobs`, opened as owner `generation` (default 0); `outrank`: as OWNER_GENERATION unset. */
async function enclave(blobs: BlobStore, generation?: number, outrank?: boolean) {
  const memory = new MemoryService(fx.embedder);
  const store = await DurableStore.open({ blobs, prefix: 'memory/', name: 'shard 0 (memory/)', generation, outrank, sealingKey, embedding: memory.embeddingModel, snapshotLogBytes: 1 << 30 }, memory);
  memory.useJournal(store);
  fx.track(store);
  return { memory, store };
}
const add = (e: { memory: MemoryService }, content: string) => e.memory.add({ tenant_id: 't', content });
const contents = (e: { memory: MemoryService }) => [...e.memory.entries()].map((x) => x.record.content).sort();

describe('two writers of one store', () => {
  it('the old owner fails at its next write once a new owner opened the store, and refuses every change after it', async () => {
    const blobs = fx.host();
    const old = await enclave(blobs);
    await add(old, 'before the takeover');
    const owner = await enclave(blobs);
    expect(contents(owner)).toEqual(['before the takeover']);

    await expect(add(old, 'written by the old owner after the takeover')).rejects.toMatchObject({ status: 503, code: 'shard_not_owned' });
    expect(old.store.takenOver).toBe(true);
    await expect(add(old, 'and another')).rejects.toMatchObject({ status: 503 });
    await add(owner, 'written by the new owner');

    const later = await enclave(blobs);
    expect(contents(later)).toEqual(['before the takeover', 'written by the new owner']);
  });

  it('the old owner\'s writes fail even when the new owner has not written yet, and its compaction deletes nothing', async () => {
    const blobs = fx.host();
    const old = await enclave(blobs);
    await add(old, 'first');
    const owner = await enclave(blobs);
    await expect(old.store.compact()).rejects.toThrow(/refused/);
    expect(old.store.takenOver).toBe(true);
    await add(owner, 'second');
    await owner.store.compact();
    await add(owner, 'third');
    // A compaction the old owner might still try after the new one's: refused too.
    await expect(old.store.compact()).rejects.toThrow();
    const later = await enclave(blobs);
    expect(contents(later)).toEqual(['first', 'second', 'third']);
  });

  it('many writes racing from both: every acknowledged one is stored, none refused is', async () => {
    const blobs = fx.host();
    const old = await enclave(blobs);
    const owner = await enclave(blobs);
    const results = await Promise.allSettled(Array.from({ length: 40 }, (_, i) => add(i % 2 ? owner : old, `racing write ${i}`)));
    const acknowledged = results.flatMap((r, i) => (r.status === 'fulfilled' ? [`racing write ${i}`] : []));
    expect(acknowledged.length).toBeGreaterThan(0);
    const later = await enclave(blobs);
    expect(contents(later)).toEqual(acknowledged.sort());
  });

  it('over the host store\'s gRPC service, one client each, as two enclave processes would', async () => {
    const server: grpc.Server = createHostStoreServer(fx.host(), createLogger('test-host-store', 'silent'));
    const address = `127.0.0.1:${await listen(server, `127.0.0.1:${await freePort()}`)}`;
    const clients = [new GrpcBlobStore(address, { callTimeoutMs: 5000 }), new GrpcBlobStore(address, { callTimeoutMs: 5000 }), new GrpcBlobStore(address, { callTimeoutMs: 5000 })];
    // Closed before their clients are.
    const opened: DurableStore[] = [];
    const over = async (client: GrpcBlobStore) => {
      const e = await enclave(client);
      opened.push(e.store);
      return e;
    };
    try {
      const old = await over(clients[0]);
      await add(old, 'before');
      const owner = await over(clients[1]);
      await expect(add(old, 'after, by the old owner')).rejects.toMatchObject({ status: 503 });
      await add(owner, 'after, by the new owner');
      const later = await over(clients[2]);
      expect(contents(later)).toEqual(['after, by the new owner', 'before']);
    } finally {
      for (const store of opened) await fx.stop(store).catch(() => {});
      for (const client of clients) await client.close();
      server.forceShutdown();
    }
  });

  it('the old owner\'s refusal names the shard and says it is no longer its owner, the first time and every later one', async () => {
    const blobs = fx.host();
    const old = await enclave(blobs, 1);
    await add(old, 'first');
    await enclave(blobs, 2);
    for (const content of ['after', 'again']) {
      await expect(add(old, content)).rejects.toMatchObject({
        status: 503, code: 'shard_not_owned', message: expect.stringMatching(/^shard 0 \(memory\/\) is no longer owned by this enclave \(owner generation 1\)/),
      });
    }
  });
});

/** Every blob's name and size: what a refused opener must leave as it found. */
const sizes = async (blobs: BlobStore) => (await blobs.list()).map((b) => `${b.name} ${b.size}`);

describe('owner generations (the fencing token)', () => {
  it('an opener of a lower generation than the store\'s last owner is refused, naming the store and both generations, and writes nothing', async () => {
    const blobs = fx.host();
    const owner = await enclave(blobs, 5);
    await add(owner, 'by owner 5');
    const before = await sizes(blobs);
    await expect(enclave(blobs, 4)).rejects.toMatchObject({
      name: 'StaleOwnerError', message: expect.stringMatching(/^shard 0 \(memory\/\) belongs to a newer owner: memory\/log-000000000001\.sealed( frame \d+)? names owner generation 5, and this enclave opens it as generation 4/),
    });
    expect(await sizes(blobs)).toEqual(before);
    // The owner was not disturbed: its next write is stored.
    await add(owner, 'by owner 5, later');
    expect(contents(await enclave(blobs, 5))).toEqual(['by owner 5', 'by owner 5, later']);
  });

  it('a higher generation takes the store over; the same one reopens it (a restart)', async () => {
    const blobs = fx.host();
    const first = await enclave(blobs, 5);
    await add(first, 'by 5');
    const again = await enclave(blobs, 5);
    await add(again, 'by 5 again');
    const next = await enclave(blobs, 6);
    await expect(add(again, 'by 5, after 6 opened')).rejects.toMatchObject({ code: 'shard_not_owned' });
    await add(next, 'by 6');
    await expect(enclave(blobs, 5)).rejects.toMatchObject({ name: 'StaleOwnerError' });
    expect(contents(await enclave(blobs, 6))).toEqual(['by 5', 'by 5 again', 'by 6']);
  });

  it('the generation outlives a compaction that deletes the segment holding the fence', async () => {
    const blobs = fx.host();
    await add(await enclave(blobs, 1), 'by 1');
    const owner = await enclave(blobs, 7);
    await add(owner, 'by 7');
    await owner.store.compact();
    expect((await blobs.list('memory/')).map((b) => b.name)).toEqual(['memory/log-000000000002.sealed', 'memory/snapshot.sealed']);
    await expect(enclave(blobs, 6)).rejects.toThrow(/memory\/(log-000000000002|snapshot)\.sealed names owner generation 7/);
  });

  it('unset (outrank), an enclave whose clock went back still opens its store, as its newest owner, and fences the one before', async () => {
    const blobs = fx.host();
    const before = await enclave(blobs, 2_000, true);
    await add(before, 'before the clock went back');
    const after = await enclave(blobs, 1_000, true);
    await expect(add(before, 'by the one before')).rejects.toMatchObject({ code: 'shard_not_owned' });
    await add(after, 'after the clock went back');
    // It opened as generation 2000 (the highest found), and wrote that: a strict 1999 is refused.
    await expect(add(after, 'x').then(() => enclave(blobs, 1_999))).rejects.toThrow(/names owner generation 2000, and this enclave opens it as generation 1999/);
    expect(contents(await enclave(blobs, 2_000))).toEqual(['after the clock went back', 'before the clock went back', 'x']);
  });
});

