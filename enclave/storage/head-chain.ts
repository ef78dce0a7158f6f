import type { Ancestry } from '../../protocol/response-signature.js';
import type { StateHead } from './state-head.js';

/** Heads per chunk: 64 Ki heads, 512 KiB. Chunks are never copied or resized, only added. */
const CHUNK_HEADS = 65536;
/** Bytes kept of each head's hash. */
export const PREFIX_BYTES = 8;

/**
 * Every state head the store has made durable, from `base` (seq 0 for a store whose whole
 * history is known) to the current one, so the enclave can say whether a head a client
 * saw is on its chain (x-tee-ancestor) in O(1): a client that saw head k of the real history
 * and is then served an older copy of the store, written to since, gets `no` for k, however
 * far the copy's sequence numbers have moved on.
 *
 * Only the first 8 bytes of each hash are kept (8 MiB per million changes, in fixed 512 KiB
 * chunks): the current head is compared whole, older ones by 64 bits. A false `yes` needs
 * the enclave itself to produce, at exactly the client's sequence number, a head agreeing in
 * 64 bits with one it did not produce, from payloads that hold ids and timestamps it makes
 * up: each attempt costs the host a write at that seq on a restored copy, so about 2^63 of
 * them. The prefixes are kept across restarts inside every snapshot (payloads.ts `heads`)
 * and rebuilt from the log segments after it.
 */
export class HeadChain {
  private readonly chunks: Uint32Array[] = [];
  private count = 0;

  /** `baseSeq`: the first head held; `last`: the newest, whose whole hash is kept. */
  private constructor(readonly baseSeq: number, private last: StateHead) {}

  /** A chain whose first known head is `base` (genesis, or the head of a snapshot that kept no earlier heads). */
  static startingAt(base: StateHead): HeadChain {
    const chain = new HeadChain(base.seq, base);
    chain.put(base);
    return chain;
  }

  /** The newest head pushed. */
  get head(): StateHead {
    return this.last;
  }

  /** Heads held, base included. */
  get length(): number {
    return this.count;
  }

  /** Bytes held by the chunks (memory). */
  get bytes(): number {
    return this.chunks.length * CHUNK_HEADS * PREFIX_BYTES;
  }

  /** The next head: it must follow the newest one. */
  push(head: StateHead): void {
    if (head.seq !== this.last.seq + 1) throw new Error(`head ${head.seq} does not follow ${this.last.seq}`);
    this.put(head);
    this.last = head;
  }

  /** Is `known` on this chain (the newest head, or an ancestor of it)? O(1). */
  ancestry(known: StateHead): Ancestry {
    if (known.seq > this.last.seq) return 'no';
    if (known.seq === this.last.seq) return known.hash === this.last.hash ? 'yes' : 'no';
    if (known.seq < this.baseSeq) return 'unknown';
    return this.prefixMatches(known) ? 'yes' : 'no';
  }

  /**
   * The prefixes of heads base.seq … upTo, as bytes (8 per head, in order), in pieces of at
   * most CHUNK_HEADS heads: what a snapshot of head `upTo` keeps. Earlier entries never
   * change, so this may run while later heads are pushed.
   */
  *prefixes(upTo: number): Iterable<Uint8Array> {
    const heads = upTo - this.baseSeq + 1;
    if (heads > this.count) throw new Error(`the chain ends at ${this.last.seq}, before ${upTo}`);
    for (let c = 0; c * CHUNK_HEADS < heads; c++) {
      const n = Math.min(CHUNK_HEADS, heads - c * CHUNK_HEADS);
      const out = new Uint8Array(n * PREFIX_BYTES);
      const view = new DataView(out.buffer);
      const chunk = this.chunks[c];
      for (let i = 0; i < n; i++) {
        view.setUint32(i * 8, chunk[i * 2]);
        view.setUint32(i * 8 + 4, chunk[i * 2 + 1]);
      }
      yield out;
    }
  }

  /**
   * A chain from a snapshot's prefixes (seq `base` onward) ending at `head`, whose full hash
   * is known; the last prefix must be `head`'s. Returns undefined when they do not fit.
   */
  static fromPrefixes(base: number, pieces: readonly Uint8Array[], head: StateHead): HeadChain | undefined {
    const total = pieces.reduce((n, p) => n + p.length, 0);
    if (total % PREFIX_BYTES !== 0 || base + total / PREFIX_BYTES - 1 !== head.seq) return undefined;
    const chain = new HeadChain(base, head);
    for (const piece of pieces) {
      const view = new DataView(piece.buffer, piece.byteOffset, piece.byteLength);
      for (let at = 0; at < piece.length; at += PREFIX_BYTES) chain.putWords(view.getUint32(at), view.getUint32(at + 4));
    }
    return chain.prefixMatches(head) ? chain : undefined;
  }

  /** Whether the prefix held at `head.seq` (within the chain) is `head`'s. */
  private prefixMatches(head: StateHead): boolean {
    const i = head.seq - this.baseSeq;
    const chunk = this.chunks[Math.floor(i / CHUNK_HEADS)];
    const at = (i % CHUNK_HEADS) * 2;
    return chunk[at] === parseInt(head.hash.slice(0, 8), 16) && chunk[at + 1] === parseInt(head.hash.slice(8, 16), 16);
  }

  private put(head: StateHead): void {
    this.putWords(parseInt(head.hash.slice(0, 8), 16), parseInt(head.hash.slice(8, 16), 16));
  }

  private putWords(high: number, low: number): void {
    const c = Math.floor(this.count / CHUNK_HEADS);
    if (c === this.chunks.length) this.chunks.push(new Uint32Array(CHUNK_HEADS * 2));
    const at = (this.count % CHUNK_HEADS) * 2;
    this.chunks[c][at] = high;
    this.chunks[c][at + 1] = low;
    this.count++;
  }
}
