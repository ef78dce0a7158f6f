import type { BlobInfo, BlobStore } from '../../common/blob-store.js';
import type { Logger } from '../../common/logger.js';
import { sameEmbeddingModel } from '../memory/model-change.js';
import type { EmbeddingModelId, MemoryEvent } from '../memory/types.js';
import { CorruptStoreError, PreparedStateStale } from './errors.js';
import { graphName, readGraphs, type TenantGraph } from './graph-file.js';
import { HeadChain } from './head-chain.js';
import { logGeneration, logName } from './log-file.js';
import { decodePayload, isGeneration, READABLE_FORMATS, type FileMeta } from './payloads.js';
import { ReplayIds } from './replay-ids.js';
import { deriveStorageKey, readSealedLog, readSealedStream, type LastFrame, type StorageKey } from './sealed-file.js';
import { readSnapshot, SNAPSHOT_NAME, type SealedEntry, type SnapshotReader } from './snapshot.js';
import { advanceHead, describeHead, genesisHead, sameHead, type StateHead } from './state-head.js';
import type { RecoveryReport, StoreOptions, StoreTarget } from './store-types.js';
import { TenantKeys } from './tenant-keys.js';

/**
 * Reading a durable store's files into memory before anything is written to them (store.ts
 * opens a store from here): the snapshot, its saved graphs and the log segments, each
 * authenticated and chain-checked, applied to the target as they stream in. Apart from the
 * open so that a read can be made ahead, while another owner still writes the store (a
 * planned move, DurableStore.prepare), and continued later from where it ended (readTail),
 * reading from the last frame it read on and applying only what was written since.
 */

/** The blobs' default prefix (store.ts MEMORY_PREFIX; here so that reading does not import the store). */
const DEFAULT_PREFIX = 'memory/';

/** The last log segment as read: where its good frames end, and what follows them (a tail to cut). */
export interface LastSegment {
  generation: number;
  header: Buffer;
  frames: number;
  validEnd: number;
  size: number;
  maxBytes: number;
}

/** Where a read ahead ended: the last segment's good frames, the last of them (its offset and bytes), and the head after them. What readTail continues. */
interface ReadEnd {
  generation: number;
  frames: number;
  validEnd: number;
  header: Buffer;
  last: LastFrame;
  head: StateHead;
}

/** Everything read of a store and applied to its target: what the open then writes from (store.ts), or a later readTail continues. */
export interface StoreRead {
  readonly prefix: string;
  readonly key: StorageKey;
  /** The listing of the last read (the sizes a tail is cut from). */
  listed: BlobInfo[];
  /** The version the snapshot is replaced at: if another writer replaces it after this read, this store's next snapshot is refused. */
  readonly snapshotVersion: string | undefined;
  readonly hasSnapshot: boolean;
  readonly snapshotMeta?: FileMeta;
  /** The generation of the log the snapshot is followed by (1 without one). */
  readonly start: number;
  /** Segments read, in order, and their metadata. */
  live: number[];
  segmentMetas: FileMeta[];
  /** Segments older than the snapshot (a compaction had not deleted them yet). */
  readonly stale: number[];
  /** Counted as the snapshot streamed in: compaction is timed by what the enclave read, not by the size the host lists. */
  readonly snapshotBytes: { read: number };
  readonly chain: ChainCheck;
  /** A file holding vectors of another model than the enclave's, and the memories restored without vectors (to re-embed). */
  readonly changed?: { meta: FileMeta; where: string };
  readonly restoredIds?: Set<string>;
  readonly locks: TenantKeys;
  readonly replays: ReplayIds;
  readonly progress: { events: number; skipped: NonNullable<RecoveryReport['skipped']> };
  readonly graphs?: NonNullable<RecoveryReport['graphs']> & { tenants: string[] };
  last?: LastSegment;
  cutTail?: RecoveryReport['cutTail'];
  /** A read ahead (DurableStore.prepare): where it ended, for readTail to continue from. */
  readonly ahead: boolean;
  end?: ReadEnd;
  /** Set by readTail: the head the earlier read had reached. */
  readAhead?: { seq: number };
  /** Applies a stored change to the target (as given to readStore), or holds it sealed for its tenant's key. */
  readonly apply: (event: MemoryEvent | SealedEntry, at: string) => void;
}

/**
 * Reads the store in full into `target`, writing nothing; refuses damaged, altered, foreign or
 * out-of-chain blobs with a named reason. The snapshot and the segments are streamed, never held
 * whole, and a segment is read no further than its writer could have written (`max_bytes`):
 * sizes the host lists are never trusted. The snapshot's reader is pushed to `reading` (closed by the caller).
 */
export async function readStore(options: StoreOptions, target: StoreTarget, reading: SnapshotReader[], ahead = false): Promise<StoreRead> {
  const { blobs, log } = options;
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const key = deriveStorageKey(options.sealingKey);
  const listed = await blobs.list(prefix);
  const names = listed.map((b) => b.name.slice(prefix.length));
  const snapshotVersion = listed.find((b) => b.name === prefix + SNAPSHOT_NAME)?.version;
  const chain = new ChainCheck(prefix);

  let start = 1;
  let snapshot: SnapshotReader | undefined;
  // Counted as the snapshot streams in: a host listing a huge size would otherwise postpone compaction for ever.
  const snapshotBytes = { read: 0 };
  const hasSnapshot = names.includes(SNAPSHOT_NAME);
  if (hasSnapshot) {
    const where = prefix + SNAPSHOT_NAME;
    const chunks = await blobs.read(where);
    if (!chunks) throw new CorruptStoreError(`${where} was listed by the host store but cannot be read`);
    snapshot = await readSnapshot(counted(chunks, snapshotBytes), key, where);
    reading.push(snapshot);
    checkMeta(snapshot.meta, 'snapshot', where);
    chain.file(snapshot.meta, where);
    chain.snapshotHeads(snapshot, where);
    start = snapshot.meta.generation;
  }

  const generations = names.map(logGeneration).filter((g): g is number => g !== undefined).sort((a, b) => a - b);
  const stale = generations.filter((g) => g < start);
  const live = generations.filter((g) => g >= start);
  if (hasSnapshot || live.length > 0) {
    live.forEach((g, i) => {
      if (g !== start + i) {
        throw new CorruptStoreError(`${prefix}${logName(start + i)} is missing (${hasSnapshot ? `${SNAPSHOT_NAME} is followed by` : 'found'} ${live.map(logName).join(', ') || 'no log'})`);
      }
    });
    if (live.length === 0) throw new CorruptStoreError(`${prefix}${logName(start)} is missing (${SNAPSHOT_NAME} is followed by no log)`);
  }

  // First the segments' headers only (their first frame): every file's model and store are
  // known before anything is applied. Then the snapshot is streamed in, and each segment is
  // read, chain-checked and applied in turn, never all of them held at once.
  const metas: Array<{ meta: FileMeta; where: string }> = snapshot ? [{ meta: snapshot.meta, where: prefix + SNAPSHOT_NAME }] : [];
  const segmentMetas: FileMeta[] = [];
  for (const generation of live) {
    const name = prefix + logName(generation);
    const meta = await readSegmentHeader(blobs, name, key);
    checkMeta(meta, 'log', name);
    if (meta.generation !== generation) throw new CorruptStoreError(`${name} holds log ${meta.generation}: it was renamed or copied`);
    chain.file(meta, name);
    metas.push({ meta, where: name });
    segmentMetas.push(meta);
  }
  // Checked before anything is applied: a shard's folder holding another shard's (or another service's) store.
  if (options.storeId !== undefined && chain.storeId !== undefined && chain.storeId !== options.storeId) {
    throw new CorruptStoreError(
      `${options.name ?? prefix} holds store ${chain.storeId}, but the shard map says it is store ${options.storeId} ` +
      '(its blobs were swapped with another shard\'s, or brought from elsewhere)',
    );
  }

  // Vectors from another model cannot be compared with new ones: such a store is restored
  // without its vectors, to be re-embedded, or refused. An empty one simply starts over.
  const changed = metas.find(({ meta }) => !sameEmbeddingModel(storedModel(meta), options.embedding));
  // The memories restored (tenant and id) when the model changed: how many to re-embed.
  const restoredIds = changed ? new Set<string>() : undefined;
  const progress: StoreRead['progress'] = { events: 0, skipped: [] };
  // A keyed tenant's changes stay sealed until a call brings its key (tenant-keys.ts).
  const locks = new TenantKeys(options.embedding);
  const replays = new ReplayIds();
  const apply = (event: MemoryEvent | SealedEntry, at: string) => {
    progress.events++;
    if (event.type === 'sealed') {
      locks.hold(event.tenant_id, event.payload);
      return;
    }
    try {
      target.apply(changed && (event.type === 'add' || event.type === 'update') ? { ...event, vector: null } : event);
    } catch (err) {
      // Damage (e.g. a change of another shard's tenant in a shard's files) refuses the store.
      if (err instanceof CorruptStoreError) throw err;
      // A change that cannot be applied must not stop every start after it (the enclave
      // would never come up, and nothing could be deleted): skipped, by name, never content.
      const id = event.type === 'delete' || event.type === 'tombstone' ? event.id : event.record.id;
      const reason = err instanceof Error ? `${err.name}: ${err.message}` : 'not an Error';
      progress.skipped.push({ change: event.type, id, at, reason });
      log?.error({ change: event.type, id, at, reason }, 'a stored change failed to apply at recovery; skipped it and went on');
      return;
    }
    if (restoredIds) {
      if (event.type === 'delete') restoredIds.delete(`${event.tenant_id}\0${event.id}`);
      else if (event.type !== 'tombstone') restoredIds.add(`${event.record.tenant_id}\0${event.record.id}`);
    }
  };
  // The snapshot's vector graphs, opened before its memories, which confirm them (graph-file.ts).
  const graphs = snapshot && !changed && !chain.legacy && target.restoreGraph && names.includes(graphName(start))
    ? await restoreGraphs(blobs, prefix, key, snapshot.meta, target, log)
    : undefined;
  if (snapshot) {
    let record = 0;
    for await (const event of snapshot.events) {
      if (event.type === 'replays') event.marks.forEach((mark) => replays.add(mark));
      else apply(event, `${prefix}${SNAPSHOT_NAME} record ${record++}`);
    }
    if (graphs?.tenants.length) {
      const dropped = target.settleGraphs?.(graphs.tenants) ?? 0;
      if (dropped > 0) log?.info({ dropped }, 'restored vector graphs held memories the snapshot does not: removed them');
    }
  }

  const read: StoreRead = {
    prefix, key, listed, snapshotVersion, hasSnapshot, ...(snapshot ? { snapshotMeta: snapshot.meta } : {}), start, live, segmentMetas, stale,
    snapshotBytes, chain, ...(changed ? { changed, restoredIds } : {}), locks, replays, progress, ...(graphs ? { graphs } : {}), apply, ahead,
  };
  for (let i = 0; i < live.length; i++) await readSegment(options, read, i);
  return read;
}

/**
 * Continues a read made ahead (readStore with `ahead`, while another owner may have gone on
 * writing) to the log's end now, reading only what was written since: the segment it ended in
 * from the last frame it read, which must be found there again byte for byte (sealed-file.ts
 * `after`), then every frame past it, and every segment after it, read, checked and applied as a
 * full read would, the chain of heads going on from the head the read reached. Throws
 * PreparedStateStale, having applied nothing, when the files no longer continue what was read
 * (the snapshot replaced by a compaction, the segment gone, shorter, rewritten or swapped at
 * that point, a segment since that needs the store rewritten); a full read is then the way to
 * open the store.
 *
 * The part before that frame is not read again. Whatever the host has done to it since, what
 * this read applies is the log the host could have served a full open: authentic frames of that
 * segment in order, that is, what was read then and the frames that follow it now. So the head
 * reached faces the same checks as a full open's (owner generations, acceptHead), and a prefix
 * rewritten on disk is seen by the next full read of the store, whoever makes it.
 */
export async function readTail(options: StoreOptions, read: StoreRead): Promise<void> {
  const { blobs } = options;
  const from = read.end;
  const where = options.name ?? read.prefix;
  const stale = (why: string) => new PreparedStateStale(`${where}: the store read ahead can no longer be continued: ${why}`);
  if (!read.ahead || !from) throw stale('it held no chained log segment then');
  read.readAhead = { seq: from.head.seq };
  const listed = await blobs.list(read.prefix);
  if (listed.find((b) => b.name === read.prefix + SNAPSHOT_NAME)?.version !== read.snapshotVersion) throw stale('its snapshot was replaced since (a compaction)');
  const after = listed.map((b) => logGeneration(b.name.slice(read.prefix.length))).filter((g): g is number => g !== undefined && g >= from.generation).sort((a, b) => a - b);
  if (after[0] !== from.generation) throw stale(`${logName(from.generation)} is gone`);
  after.forEach((g, i) => {
    if (g !== from.generation + i) throw stale(`${logName(from.generation + i)} is missing (found ${after.map(logName).join(', ')})`);
  });
  const at = read.live.indexOf(from.generation);
  const metas = read.segmentMetas.slice(0, at + 1);
  for (const generation of after.slice(1)) {
    const name = read.prefix + logName(generation);
    const meta = await readSegmentHeader(blobs, name, read.key);
    checkMeta(meta, 'log', name);
    if (meta.generation !== generation) throw new CorruptStoreError(`${name} holds log ${meta.generation}: it was renamed or copied`);
    // A segment made since under another model, or unchained, is what a full open rewrites.
    if (meta.format < 3 || !sameEmbeddingModel(storedModel(meta), options.embedding)) throw stale(`${name} needs the store rewritten`);
    read.chain.file(meta, name);
    metas.push(meta);
  }
  read.live = [...read.live.slice(0, at), ...after];
  read.segmentMetas = metas;
  read.listed = listed;
  read.last = undefined;
  read.cutTail = undefined;
  for (let i = at; i < read.live.length; i++) await readSegment(options, read, i, i === at ? from : undefined);
}

/**
 * Reads segment `read.live[i]` and applies its changes. `from`: where a read ahead of it ended
 * (readTail): the segment is read from the last frame that read found, which must be the same
 * (sealed-file.ts `after`), so only the frames after it are opened and applied, and the chain
 * goes on from the head that read reached.
 */
async function readSegment(options: StoreOptions, read: StoreRead, i: number, from?: ReadEnd): Promise<void> {
  const { prefix, key, chain, live, segmentMetas } = read;
  const generation = live[i];
  const name = prefix + logName(generation);
  const isLast = i === live.length - 1;
  // Continuing a read ahead: from the frame it ended at, not from the segment's start.
  const chunks = await options.blobs.read(name, from?.last.offset ?? 0);
  if (!chunks) throw new CorruptStoreError(`${name} was listed by the host store but cannot be read`);
  const maxBytes = segmentMetas[i].max_bytes ?? segmentLimit(options.snapshotLogBytes, read.snapshotBytes.read);
  const reading = {
    allowTail: isLast, maxBytes,
    ...(read.ahead && isLast && !from ? { keepLast: true } : {}),
    ...(from ? { after: { bytes: from.validEnd, frames: from.frames, header: from.header, last: from.last } } : {}),
  };
  const file = await readSealedLog(chunks, 'log', key, name, reading, (payload, f) => {
    const p = decodePayload(payload, `${name} frame ${f}`);
    if (f === 0) {
      if (p.type !== 'header' || JSON.stringify(p.meta) !== JSON.stringify(segmentMetas[i])) throw new CorruptStoreError(`${name} changed while it was being read`);
      chain.segment(p.meta, name, i === 0 && read.hasSnapshot ? read.snapshotMeta : undefined);
      return;
    }
    // Where a writer took the log over: not a change, and no step of the chain of heads.
    if (p.type === 'fence') {
      chain.owner(p.generation, `${name} frame ${f}`);
      return;
    }
    if (p.type !== 'event' && p.type !== 'sealed') throw new CorruptStoreError(`${name} holds an entry that is not a change`);
    chain.advance(payload);
    if (p.replay) read.replays.add(p.replay);
    read.apply(p.type === 'event' ? p.event : p, `${name} frame ${f}`);
  });
  if (file.frames === 0) throw new CorruptStoreError(`${name} changed while it was being read`);
  if (file.tail) read.cutTail = { file: name, offset: file.tail.offset, bytes: file.tail.bytes };
  // The size the tail is cut from (a conditional truncate): a junk tail is read no further
  // than the segment's limit, so the host's listing is the better guess of where it ends.
  const listedSize = read.listed.find((b) => b.name === name)?.size ?? 0;
  const size = file.tail ? Math.max(file.validEnd + file.tail.bytes, listedSize) : file.validEnd;
  if (isLast) {
    read.last = { generation, header: file.header, frames: file.frames, validEnd: file.validEnd, size, maxBytes };
    read.end = chain.head && file.last ? { generation, frames: file.frames, validEnd: file.validEnd, header: file.header, last: file.last, head: chain.head } : undefined;
  }
}

/**
 * The most bytes a log segment may hold. Compaction starts a new segment once one passes
 * max(SNAPSHOT_LOG_BYTES, the last snapshot's size), and the next snapshot is at most about
 * the last one plus that segment; four times that leaves room for writes made while a
 * snapshot is written, and for a snapshot that failed and was retried.
 */
export function segmentLimit(snapshotLogBytes: number, lastSnapshotBytes: number): number {
  return 4 * Math.max(snapshotLogBytes, lastSnapshotBytes) + 128 * 1024 * 1024;
}

/**
 * Opens the graphs saved with the snapshot into `target`, each tenant's alone: a graph that
 * does not open (seal, snapshot, format, settings) is refused, logged, and its tenant's index
 * rebuilt from the snapshot as if there were none.
 */
async function restoreGraphs(
  blobs: BlobStore, prefix: string, key: StorageKey, snapshot: FileMeta, target: StoreTarget, log?: Logger,
): Promise<NonNullable<RecoveryReport['graphs']> & { tenants: string[] }> {
  const where = prefix + graphName(snapshot.generation);
  let saved: TenantGraph[];
  try {
    const chunks = await blobs.read(where);
    if (!chunks) throw new CorruptStoreError(`${where} was listed by the host store but cannot be read`);
    saved = await readGraphs(chunks, key, where, { store_id: snapshot.store_id!, generation: snapshot.generation, head: snapshot.head! });
  } catch (err) {
    const refused = (err as Error).message;
    log?.warn({ file: where, err: refused }, 'the saved vector graphs were refused: rebuilding every index from the snapshot');
    return { restored: 0, refused, tenants: [] };
  }
  const tenants: string[] = [];
  let refused: string | undefined;
  for (const { tenantId, graph } of saved) {
    try {
      target.restoreGraph!(tenantId, graph);
      tenants.push(tenantId);
    } catch (err) {
      refused = (err as Error).message;
      log?.warn({ file: where, err: refused }, 'a saved vector graph was refused: rebuilding its index from the snapshot');
    }
  }
  return { restored: tenants.length, ...(refused ? { refused } : {}), tenants };
}

/** Counts the bytes that pass, into `into.read`. */
async function* counted(chunks: AsyncIterable<Buffer>, into: { read: number }): AsyncIterable<Buffer> {
  for await (const chunk of chunks) {
    into.read += chunk.length;
    yield chunk;
  }
}

/** A segment's metadata: its first frame, read without fetching the rest of it. */
async function readSegmentHeader(blobs: BlobStore, name: string, key: StorageKey): Promise<FileMeta> {
  const chunks = await blobs.read(name);
  if (!chunks) throw new CorruptStoreError(`${name} was listed by the host store but cannot be read`);
  const frames = readSealedStream(chunks, 'log', key, name);
  try {
    const first = await frames.next();
    const header = first.done ? undefined : decodePayload(first.value, `${name} frame 0`);
    if (header?.type !== 'header') throw new CorruptStoreError(`${name} has no log header`);
    return header.meta;
  } finally {
    await frames.return(undefined);
  }
}

function checkMeta(meta: FileMeta, kind: FileMeta['kind'], where: string): void {
  if (!READABLE_FORMATS.includes(meta.format)) throw new CorruptStoreError(`${where} has format ${meta.format}; this enclave reads formats ${READABLE_FORMATS.join(', ')}`);
  if (meta.kind !== kind) throw new CorruptStoreError(`${where} is a ${meta.kind}, not a ${kind}`);
  if (!Number.isSafeInteger(meta.generation) || meta.generation < 1) throw new CorruptStoreError(`${where} has no valid generation`);
  if (meta.max_bytes !== undefined && (!Number.isSafeInteger(meta.max_bytes) || meta.max_bytes < 1)) throw new CorruptStoreError(`${where} has no valid size limit`);
}

/** The model a file's vectors come from; format 1 did not record its hash, so it matches no model. */
export function storedModel(meta: FileMeta): EmbeddingModelId {
  return { id: meta.embedding_model, dimension: meta.dimension, sha256: meta.embedding_sha256 ?? 'unrecorded' };
}

/**
 * Checks that the files form one chain: all from the same store, each segment starting at
 * the state head where its predecessor (or the snapshot it continues) ends. Files from
 * before format 3 carry no chain; a store holding them is accepted and rewritten.
 */
export class ChainCheck {
  storeId?: string;
  /** The head after everything checked so far; undefined while it is unknown (legacy files). */
  head?: StateHead;
  /** Every head since the first one known, up to `head` (from the snapshot, then the segments). */
  heads?: HeadChain;
  legacy = false;
  /** The highest owner generation any file or fence names, and where (undefined: none does). */
  highestOwner?: { generation: number; where: string };
  private previous?: string;

  constructor(private readonly prefix: string) {}

  /** Any file: it must belong to this store. */
  file(meta: FileMeta, where: string): void {
    this.owner(meta.owner_generation, where);
    if (meta.format < 3) {
      this.legacy = true;
      return;
    }
    if (typeof meta.store_id !== 'string' || !meta.head) throw new CorruptStoreError(`${where} has no store id or state head`);
    this.storeId ??= meta.store_id;
    if (meta.store_id !== this.storeId) throw new CorruptStoreError(`${where} belongs to another store (store ${meta.store_id}; this store is ${this.storeId})`);
  }

  /** A snapshot's chain of heads (format 4), which must end at its head. */
  snapshotHeads(snapshot: SnapshotReader, where: string): void {
    const { meta, heads } = snapshot;
    if (meta.format < 4 || !meta.head) return;
    const chain = heads && HeadChain.fromPrefixes(heads.first, heads.pieces, meta.head);
    if (!chain) throw new CorruptStoreError(`${where} has no chain of heads ending at its state ${describeHead(meta.head)}`);
    this.heads = chain;
  }

  /** A log segment, in order: it must start where the previous one (or the snapshot) ended. */
  segment(meta: FileMeta, where: string, snapshot: FileMeta | undefined): void {
    const after = snapshot ? `${this.prefix}${SNAPSHOT_NAME}` : this.previous;
    this.previous = where;
    if (meta.format < 3) {
      this.head = undefined;
      this.heads = undefined;
      return;
    }
    const expected = snapshot ? snapshot.head : after === undefined ? genesisHead(this.storeId!) : this.head;
    if (expected && !sameHead(meta.head, expected)) {
      throw new CorruptStoreError(
        `${where} does not continue ${after ?? 'an empty store'}: it starts at state ${describeHead(meta.head)} but that ends at ${describeHead(expected)} ` +
        '(a segment was dropped, cut short, swapped, replaced by an older copy, or brought from elsewhere)',
      );
    }
    this.head = meta.head;
    // No snapshot chain (a new store's first segment, or a format 3 snapshot): it starts here.
    if (!this.heads || !sameHead(this.heads.head, meta.head!)) this.heads = meta.head ? HeadChain.startingAt(meta.head) : undefined;
  }

  /** An owner generation a file or a fence names. */
  owner(generation: number | undefined, where: string): void {
    if (generation === undefined) return;
    if (!isGeneration(generation)) throw new CorruptStoreError(`${where} names no valid owner generation`);
    if (!this.highestOwner || generation > this.highestOwner.generation) this.highestOwner = { generation, where };
  }

  advance(payload: Uint8Array): void {
    if (!this.head) return;
    this.head = advanceHead(this.head, payload);
    this.heads?.push(this.head);
  }
}