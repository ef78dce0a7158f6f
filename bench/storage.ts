/**
 * Durable writes: acknowledged writes per second and writes per fsync, with and without
 * group commit, at several numbers of concurrent writers; then the time to snapshot and
 * to recover a store, and to re-embed and rewrite it after a model change. Every write goes
 * through the real sealed log (secretbox) and the real host store over gRPC on loopback
 * (write + fdatasync there) before it counts as acknowledged.
 *
 *   BENCH_DIR   folder for the files (default: the OS temp folder; put it on the disk you care about)
 *   BENCH_QUICK 1 for fewer writes
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { modelsDir } from '../common/paths.js';
import { loadEmbedder } from '../enclave/embedding/embedder.js';
import { MemoryService } from '../enclave/memory/memory-service.js';
import { newMemoryId } from '../enclave/memory/memory-ids.js';
import type { MemoryEvent, MemoryRecord } from '../enclave/memory/types.js';
import { listen } from '../common/grpc-listen.js';
import { freePort } from '../scripts/lib/run-service.js';
import { createLogger } from '../common/logger.js';
import { GrpcBlobStore } from '../enclave/storage/grpc-blob-store.js';
import { DurableStore } from '../enclave/storage/store.js';
import { FsBlobStore } from '../host-store/fs-blob-store.js';
import { createHostStoreServer } from '../host-store/grpc-service.js';

const DIMENSION = 100;
const quick = process.env.BENCH_QUICK === '1';
const base = process.env.BENCH_DIR ?? tmpdir();

function randomEvent(i: number): MemoryEvent & { type: 'add' } {
  const record: MemoryRecord = {
    id: newMemoryId(),
    object: 'memory',
    tenant_id: `tenant-${i % 10}`,
    content: `Memory ${i}: ${'the quick brown fox jumps over the lazy dog '.repeat(6)}`.slice(0, 300),
    metadata: { source: 'bench' },
    created_at: Math.floor(Date.now() / 1000),
  };
  const vector = Float32Array.from({ length: DIMENSION }, () => Math.random() - 0.5);
  const norm = Math.hypot(...vector);
  return { type: 'add', record, vector: vector.map((x) => x / norm) };
}

/** A store with nothing behind it but a map: measures the log alone. */
function mapTarget() {
  const records = new Map<string, { record: MemoryRecord; vector: Float32Array }>();
  return {
    apply: (e: MemoryEvent) => { if (e.type === 'delete') records.delete(e.id); else if (e.type !== 'tombstone') records.set(e.record.id, e); },
    entries: () => records.values(),
  };
}

/** A host store on `dir`, served over gRPC on loopback, and the enclave's client for it. */
async function hostStore(dir: string) {
  const files = new FsBlobStore(dir);
  const server = createHostStoreServer(files, createLogger('bench-host-store', 'warn'));
  const port = await listen(server, `127.0.0.1:${await freePort()}`);
  const blobs = new GrpcBlobStore(`127.0.0.1:${port}`);
  // The host store keeps the files it appends to open: closed with it, not left to the collector.
  return { blobs, close: async () => { await blobs.close(); server.forceShutdown(); await files.close(); } };
}

async function writes(groupCommit: boolean, writers: number, total: number) {
  const dir = mkdtempSync(join(base, 'bench-store-'));
  const host = await hostStore(dir);
  try {
    const target = mapTarget();
    const store = await DurableStore.open({ blobs: host.blobs, sealingKey: randomBytes(32), embedding: { id: 'bench', dimension: DIMENSION, sha256: 'bench' }, snapshotLogBytes: 2 ** 40, groupCommit }, target);
    const events = Array.from({ length: total }, (_, i) => randomEvent(i));
    const latencies: number[] = [];
    let next = 0;
    const started = performance.now();
    await Promise.all(Array.from({ length: writers }, async () => {
      while (next < total) {
        const event = events[next++];
        const t = performance.now();
        await store.commit([event], () => target.apply(event));
        latencies.push(performance.now() - t);
      }
    }));
    const seconds = (performance.now() - started) / 1000;
    const stats = store.stats();
    await store.close();
    latencies.sort((a, b) => a - b);
    return {
      writesPerSecond: total / seconds,
      perFsync: stats.commits / stats.syncs,
      fsyncs: stats.syncs,
      p50: latencies[Math.floor(total * 0.5)],
      p99: latencies[Math.floor(total * 0.99)],
    };
  } finally {
    await host.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function endToEnd(writers: number, total: number) {
  const dir = mkdtempSync(join(base, 'bench-e2e-'));
  const host = await hostStore(dir);
  const embedder = await loadEmbedder({ name: 'static', modelsDir });
  try {
    const memory = new MemoryService(embedder);
    const store = await DurableStore.open({ blobs: host.blobs, sealingKey: randomBytes(32), embedding: memory.embeddingModel, snapshotLogBytes: 64 * 1024 * 1024 }, memory);
    memory.useJournal(store);
    let next = 0;
    const started = performance.now();
    await Promise.all(Array.from({ length: writers }, async () => {
      while (next < total) await memory.add({ tenant_id: `t${next % 10}`, content: `note ${next++} about gardens, rivers and the winter market` });
    }));
    const seconds = (performance.now() - started) / 1000;
    const stats = store.stats();
    await store.close();
    return { writesPerSecond: total / seconds, perFsync: stats.commits / stats.syncs };
  } finally {
    await embedder.close();
    await host.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function snapshotAndRecovery(count: number) {
  const dir = mkdtempSync(join(base, 'bench-snap-'));
  const host = await hostStore(dir);
  const embedder = await loadEmbedder({ name: 'static', modelsDir });
  const sealingKey = randomBytes(32);
  const options = { blobs: host.blobs, sealingKey, embedding: { id: embedder.id, dimension: embedder.dimension, sha256: embedder.sha256 }, snapshotLogBytes: 2 ** 40 };
  try {
    const memory = new MemoryService(embedder);
    const store = await DurableStore.open(options, memory);
    memory.useJournal(store);
    const events = Array.from({ length: count }, (_, i) => randomEvent(i));
    for (let i = 0; i < count; i += 1000) await Promise.all(events.slice(i, i + 1000).map((e) => store.commit([e], () => memory.apply(e))));
    await store.close();
    // Recovery from the log alone, then from a snapshot.
    const fromLog = new MemoryService(embedder);
    let t = performance.now();
    const reopened = await DurableStore.open(options, fromLog);
    const logRecoveryMs = performance.now() - t;
    t = performance.now();
    await reopened.compact();
    const snapshotMs = performance.now() - t;
    const snapshotBytes = reopened.stats().lastSnapshotBytes;
    await reopened.close();
    t = performance.now();
    const again = await DurableStore.open(options, new MemoryService(embedder));
    const snapshotRecoveryMs = performance.now() - t;
    await again.close();
    // As after a model change (here: the static model rebuilt, so another hash): every memory
    // re-embedded from its content, then the store rewritten under the new model.
    const changed = new MemoryService(embedder);
    t = performance.now();
    const reembedded = await DurableStore.open({ ...options, embedding: { ...options.embedding, sha256: 'rebuilt' }, reembed: () => changed.reembed(embedder) }, changed);
    const reembedMs = performance.now() - t;
    await reembedded.close();
    return { logRecoveryMs, snapshotMs, snapshotBytes, snapshotRecoveryMs, reembedMs };
  } finally {
    await embedder.close();
    await host.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

export async function run(): Promise<void> {
  process.stdout.write(`files in ${base}; ${DIMENSION}-dimension vectors, 300-character contents\n\n`);
  process.stdout.write('| group commit | concurrent writers | writes | acknowledged writes/s | writes per fsync | p50 ms | p99 ms |\n|---|---|---|---|---|---|---|\n');
  for (const writers of [1, 16, 64]) {
    for (const groupCommit of [false, true]) {
      const total = quick ? 500 : groupCommit && writers > 1 ? 10_000 : 2_000;
      const r = await writes(groupCommit, writers, total);
      process.stdout.write(`| ${groupCommit ? 'on' : 'off'} | ${writers} | ${total} | ${fmt(r.writesPerSecond)} | ${fmt(r.perFsync, 1)} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} |\n`);
    }
  }

  const e2e = await endToEnd(64, quick ? 500 : 5_000);
  process.stdout.write(`\nMemoryService.add end to end (embed, log + fsync, HNSW insert), 64 writers, group commit: ${fmt(e2e.writesPerSecond)} writes/s, ${fmt(e2e.perFsync, 1)} writes per fsync\n`);

  const count = quick ? 2_000 : 20_000;
  const s = await snapshotAndRecovery(count);
  process.stdout.write(`\n${fmt(count)} memories: recovery from the log ${fmt(s.logRecoveryMs)} ms; snapshot written in ${fmt(s.snapshotMs)} ms (${fmt(s.snapshotBytes / 1024 / 1024, 1)} MiB); recovery from the snapshot ${fmt(s.snapshotRecoveryMs)} ms (both include rebuilding the HNSW indexes); after a model change, re-embedded with the static model and rewritten in ${fmt(s.reembedMs)} ms\n`);
}
