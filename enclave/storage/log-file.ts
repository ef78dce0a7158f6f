import { randomBytes } from 'node:crypto';
import { BlobConflictError, type BlobStore } from '../../common/blob-store.js';
import { encodeFence, encodeHeader, type FileMeta } from './payloads.js';
import { newHeader, sealFrame, type StorageKey } from './sealed-file.js';
import type { HeadChain } from './head-chain.js';
import { advanceHead, type StateHead } from './state-head.js';

/** An open log segment that batches of sealed entries are appended to. */
export interface LogFile {
  readonly generation: number;
  /** Bytes in the segment, header included. */
  readonly size: number;
  /** The state head after the segment's last durable entry. */
  readonly head: StateHead;
  /** Seals each payload as the next frame, writes them, and returns once they are on disk. */
  append(payloads: Uint8Array[]): Promise<void>;
  /** Fails (BlobConflictError) if another writer has appended to the segment since this one did. */
  confirm(): Promise<void>;
  close(): Promise<void>;
}

/** Log segment blob names sort by generation: memory/log-000000000001.sealed, … */
export const logName = (generation: number) => `log-${String(generation).padStart(12, '0')}.sealed`;
export const logGeneration = (name: string): number | undefined => {
  const m = /^log-(\d{12})\.sealed$/.exec(name);
  return m ? Number(m[1]) : undefined;
};

/**
 * A log segment kept by the host store. The enclave knows the segment's length and
 * appends at exactly that offset, so the host can neither make it skip nor repeat bytes
 * without the next read noticing (every frame is sealed with its position). The host
 * refuses an append anywhere but at the end (BlobConflictError), so of two writers of one
 * segment only the one that wrote last can go on: the other's next append fails.
 */
export class SealedLog implements LogFile {
  private constructor(
    private readonly blobs: BlobStore,
    private readonly name: string,
    private readonly key: StorageKey,
    private readonly header: Buffer,
    readonly generation: number,
    private nextSeq: number,
    private bytes: number,
    private current: StateHead,
    private readonly maxBytes: number,
    /** Told of every head this segment makes durable (the store's chain of heads). */
    private readonly heads?: HeadChain,
  ) {}

  /**
   * The end the segment may have after an append whose outcome is unknown (the host store
   * did not answer): its bytes may have landed. The next append first cuts them, if the
   * segment is exactly that long (a conditional truncate), so a later append never fails
   * against the writer's own bytes.
   */
  private unsure?: number;

  get size(): number {
    return this.bytes;
  }

  get head(): StateHead {
    return this.current;
  }

  /**
   * Creates a segment: its header and first frame (the metadata, with the head it starts
   * from) in one atomic put, so a segment that exists is complete up to its first frame.
   */
  static async create(blobs: BlobStore, name: string, key: StorageKey, meta: FileMeta & { head: StateHead }, heads?: HeadChain): Promise<SealedLog> {
    const header = newHeader('log', key);
    const start = Buffer.concat([header, sealFrame(key, header, 0, encodeHeader(meta))]);
    try {
      // Only if absent: a segment another writer made is never replaced.
      await blobs.put(name, start, { ifAbsent: true });
    } catch (err) {
      if (err instanceof BlobConflictError) throw err;
      throw new Error(`cannot create ${name}: ${(err as Error).message}`);
    }
    return new SealedLog(blobs, name, key, header, meta.generation, 1, start.length, meta.head, meta.max_bytes ?? Infinity, heads);
  }

  /**
   * Continues an already verified segment after its last good frame: cuts what follows (if
   * the segment is still the size it was read at), then appends a fence naming the owner's
   * generation, so a writer that had the segment before (an enclave thought dead) fails at
   * its next append, and a later opener of a lower generation is refused.
   */
  static async reopen(
    blobs: BlobStore, name: string, key: StorageKey,
    at: { header: Buffer; generation: number; frames: number; validEnd: number; size: number; head: StateHead; maxBytes: number; owner: number },
    heads?: HeadChain,
  ): Promise<SealedLog> {
    if (at.size !== at.validEnd) await blobs.truncate(name, at.validEnd, at.size);
    const log = new SealedLog(blobs, name, key, at.header, at.generation, at.frames, at.validEnd, at.head, at.maxBytes, heads);
    await log.write([encodeFence(randomBytes(8).toString('hex'), at.owner)], false);
    return log;
  }

  append(payloads: Uint8Array[]): Promise<void> {
    return this.write(payloads, true);
  }

  async confirm(): Promise<void> {
    // An empty append, refused unless the segment still ends where this writer left it.
    if (this.unsure === undefined) await this.blobs.append(this.name, this.bytes, new Uint8Array(0));
  }

  /** Seals and appends frames; `changes`: they are changes, each a step of the chain of heads (a fence is not). */
  private async write(payloads: Uint8Array[], changes: boolean): Promise<void> {
    const frames = payloads.map((p, i) => sealFrame(this.key, this.header, this.nextSeq + i, p));
    const data = frames.length === 1 ? frames[0] : Buffer.concat(frames);
    // The segment's header promised readers it never grows past maxBytes (compaction has
    // been failing for long if it gets there): the write is refused, not the promise broken.
    if (this.bytes + data.length > this.maxBytes) {
      throw new Error(`log segment ${this.name} is full (${this.maxBytes} bytes) and compaction has not started a new one`);
    }
    if (this.unsure !== undefined) {
      // Refused if the failed bytes never landed (the segment ends here): the append below then fits.
      await this.blobs.truncate(this.name, this.bytes, this.unsure).catch((err: unknown) => {
        if (!(err instanceof BlobConflictError)) throw err;
      });
      this.unsure = undefined;
    }
    try {
      await this.blobs.append(this.name, this.bytes, data);
    } catch (err) {
      // A refused append wrote nothing; any other failure may have written all of it.
      if (!(err instanceof BlobConflictError)) this.unsure = this.bytes + data.length;
      throw err;
    }
    // Only once durable: a failed append leaves the head where the segment ends.
    if (changes) {
      let head = this.current;
      for (const p of payloads) {
        head = advanceHead(head, p);
        this.heads?.push(head);
      }
      this.current = head;
    }
    this.nextSeq += payloads.length;
    this.bytes += data.length;
  }

  async close(): Promise<void> {
    await this.blobs.release(this.name);
  }
}
