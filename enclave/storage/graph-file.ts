/**
 * The vector graphs saved with a snapshot (`graph-<generation>.sealed`, beside it): each large
 * tenant's HNSW graph (vectors/hnsw-index.ts SavedGraph), sealed frame by frame like the
 * snapshot (sealed-file.ts, magic PASGRF01), so opening a shard loads each graph instead of
 * inserting every vector again. A graph is only ever a shortcut: the store opens one only when
 * its seal holds and it names the snapshot's own store, generation and state head, then
 * checks every vector against the snapshot's (TieredIndex.restored), and rebuilds the index
 * as before when anything is amiss.
 *
 *   frame 0      meta (JSON): format, store id, generation, head, tenants
 *   per tenant   tenant (JSON: id, dimension, HNSW settings, labels, zero ids, byte counts),
 *                ids (JSON arrays, in label order), then bytes (the rows, then hnswlib's file)
 *   last         end (JSON): tenants
 */
import type { BlobStore } from '../../common/blob-store.js';
import type { SavedGraph } from '../vectors/hnsw-index.js';
import { CorruptStoreError } from './errors.js';
import { newHeader, readSealedStream, sealFrame, type StorageKey } from './sealed-file.js';
import { sameHead, type StateHead } from './state-head.js';

/** Graphs of a format other than this are not opened (rebuilt instead). */
export const GRAPH_FORMAT = 1;

const GRAPH_FILE = /^graph-(\d+)\.sealed$/;
export const graphName = (generation: number): string => `graph-${generation}.sealed`;
/** The snapshot generation a blob's name says it goes with; undefined when it is no graph file. */
export function graphGeneration(name: string): number | undefined {
  const match = GRAPH_FILE.exec(name);
  return match ? Number(match[1]) : undefined;
}

/** Which snapshot the graphs were saved with: opened only with that one. */
export interface GraphMeta {
  format: number;
  store_id: string;
  generation: number;
  head: StateHead;
}

export interface TenantGraph {
  tenantId: string;
  graph: SavedGraph;
}

const META = 1;
const TENANT = 2;
const IDS = 3;
const BYTES = 4;
const END = 5;
const IDS_PER_FRAME = 10_000;
const BYTES_PER_FRAME = 1024 * 1024;

const tagged = (tag: number, value: unknown) => Buffer.concat([Buffer.of(tag), Buffer.from(JSON.stringify(value), 'utf8')]);
const bytesOf = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

/**
 * Seals `graphs` into one blob, frame by frame as the host store takes them (a large graph
 * is tens of megabytes). Returns its size.
 */
export async function writeGraphs(blobs: BlobStore, name: string, key: StorageKey, meta: Omit<GraphMeta, 'format'>, graphs: readonly TenantGraph[]): Promise<number> {
  let bytes = 0;
  async function* sealed(): AsyncIterable<Buffer> {
    const header = newHeader('graph', key);
    let seq = 0;
    const frame = (payload: Buffer) => {
      const sealedFrame = sealFrame(key, header, seq++, payload);
      bytes += sealedFrame.length;
      return sealedFrame;
    };
    bytes += header.length;
    yield Buffer.concat([header, frame(tagged(META, { format: GRAPH_FORMAT, ...meta, tenants: graphs.length }))]);
    for (const { tenantId, graph } of graphs) {
      const rows = bytesOf(graph.rows);
      yield frame(tagged(TENANT, {
        tenant: tenantId, dimension: graph.dimension, m: graph.m, ef_construction: graph.efConstruction,
        labels: graph.ids.length, zeros: graph.zeros, rows_bytes: rows.length, file_bytes: graph.file.length,
      }));
      for (let i = 0; i < graph.ids.length; i += IDS_PER_FRAME) yield frame(tagged(IDS, graph.ids.slice(i, i + IDS_PER_FRAME)));
      for (const part of [rows, graph.file]) {
        for (let at = 0; at < part.length; at += BYTES_PER_FRAME) yield frame(Buffer.concat([Buffer.of(BYTES), part.subarray(at, at + BYTES_PER_FRAME)]));
      }
    }
    yield frame(tagged(END, { tenants: graphs.length }));
  }
  await blobs.put(name, sealed());
  return bytes;
}

interface TenantHeader {
  tenant: string;
  dimension: number;
  m: number;
  ef_construction: number;
  labels: number;
  zeros: string[];
  rows_bytes: number;
  file_bytes: number;
}

/**
 * Opens a graph blob: its meta, then its tenants' graphs, all read before any is handed back.
 * Throws (CorruptStoreError) on anything short of a complete, authentic graph file made for
 * `snapshot`: the caller then rebuilds.
 */
export async function readGraphs(chunks: AsyncIterable<Buffer>, key: StorageKey, name: string, snapshot: Omit<GraphMeta, 'format'>): Promise<TenantGraph[]> {
  const frames = readSealedStream(chunks, 'graph', key, name);
  const next = async (tag: number): Promise<Buffer> => {
    const frame = await frames.next();
    if (frame.done) throw new CorruptStoreError(`${name} ends early`);
    if (frame.value[0] !== tag) throw new CorruptStoreError(`${name}: frame of kind ${frame.value[0]} where ${tag} belongs`);
    return frame.value.subarray(1);
  };
  const json = async <T>(tag: number): Promise<T> => JSON.parse((await next(tag)).toString('utf8')) as T;
  try {
    const meta = await json<GraphMeta & { tenants: number }>(META);
    if (meta.format !== GRAPH_FORMAT) throw new CorruptStoreError(`${name} has graph format ${meta.format}; this enclave reads ${GRAPH_FORMAT}`);
    if (meta.store_id !== snapshot.store_id || meta.generation !== snapshot.generation || !sameHead(meta.head, snapshot.head)) {
      throw new CorruptStoreError(`${name} was saved with another snapshot (store ${meta.store_id}, generation ${meta.generation}, not the snapshot's)`);
    }
    const graphs: TenantGraph[] = [];
    for (let t = 0; t < meta.tenants; t++) {
      const h = await json<TenantHeader>(TENANT);
      const ids: string[] = [];
      while (ids.length < h.labels) ids.push(...await json<string[]>(IDS));
      if (ids.length !== h.labels) throw new CorruptStoreError(`${name}: ${ids.length} ids where ${h.labels} belong`);
      const all = Buffer.allocUnsafe(h.rows_bytes + h.file_bytes);
      for (let at = 0; at < all.length;) {
        const part = await next(BYTES);
        if (at + part.length > all.length) throw new CorruptStoreError(`${name}: more bytes than its tenant header says`);
        all.set(part, at);
        at += part.length;
      }
      // The rows are copied out, so they are aligned for a Float32Array whatever their offset.
      const rows = new Float32Array(h.rows_bytes / 4);
      bytesOf(rows).set(all.subarray(0, h.rows_bytes));
      graphs.push({ tenantId: h.tenant, graph: { dimension: h.dimension, m: h.m, efConstruction: h.ef_construction, ids, zeros: h.zeros, rows, file: all.subarray(h.rows_bytes) } });
    }
    const end = await json<{ tenants: number }>(END);
    if (end.tenants !== graphs.length || !(await frames.next()).done) throw new CorruptStoreError(`${name} holds more than its end mark says`);
    return graphs;
  } finally {
    await frames.return(undefined);
  }
}
