import * as grpc from '@grpc/grpc-js';
import { BlobConflictError, readOffset, type BlobInfo, type BlobStore, type PutConditions } from '../../common/blob-store.js';
import {
  hostStoreChannelOptions, hostStoreProto, type AppendAckIn, type BlobChunk, type BlobChunkIn, type HostStoreClient,
} from '../../common/proto.js';
import { StreamedCalls } from '../../common/streamed-calls.js';

/** Bytes per message when a blob is written in pieces (snapshots). */
const PUT_CHUNK_BYTES = 1024 * 1024;

/** The host store could not be reached or did not do what was asked. */
export class HostStoreError extends Error {
  constructor(readonly op: string, readonly code: grpc.status | undefined, message: string) {
    super(`host store ${op}: ${message}`);
    this.name = 'HostStoreError';
  }
}

export interface GrpcBlobStoreOptions {
  /** Longest one call may take; a write that does not answer in time is treated as failed. */
  callTimeoutMs?: number;
}

/**
 * The enclave's BlobStore: the host store over gRPC (TCP locally, vsock on Nitro). Only
 * sealed bytes go out; what comes back is checked by the caller, since the host may lie.
 */
export class GrpcBlobStore implements BlobStore {
  private readonly client: HostStoreClient;
  private readonly timeoutMs: number;
  /** The Appends stream, opened at the first append and again after it breaks. */
  private readonly appends: StreamedCalls<AppendAckIn>;

  constructor(readonly address: string, options: GrpcBlobStoreOptions = {}) {
    const { HostStore } = hostStoreProto();
    this.client = new HostStore(address, grpc.credentials.createInsecure(), hostStoreChannelOptions);
    this.timeoutMs = options.callTimeoutMs ?? 30_000;
    this.appends = new StreamedCalls<AppendAckIn>({
      open: () => this.client.Appends() as unknown as grpc.ClientDuplexStream<unknown, AppendAckIn>,
      broken: (err) => wrap('append', err ?? null),
      late: (timeoutMs) => new HostStoreError('append', grpc.status.DEADLINE_EXCEEDED, `no answer within ${timeoutMs} ms`),
    });
  }

  /** Resolves once the host store answers (e.g. at start: fail clearly if nothing listens there). */
  async ready(timeoutMs: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.client.waitForReady(Date.now() + timeoutMs, (err) => (err
        ? reject(new HostStoreError('connect', undefined, `nothing answers on ${this.address} (start it with npm run start:host-store, or set HOST_STORE_ADDR)`))
        : resolve()));
    });
  }

  list(prefix = ''): Promise<BlobInfo[]> {
    return new Promise((resolve, reject) => {
      this.client.List({ prefix }, this.callOptions(), (err, reply) => {
        if (err || !reply) return reject(wrap('list', err));
        resolve(reply.blobs.map((b) => ({ name: b.name, size: Number(b.size), version: b.version })));
      });
    });
  }

  /**
   * Streams the blob from byte `from` on; that the bytes do start there is the host's word,
   * which the caller checks. A large snapshot may take minutes to read at the pace the enclave
   * applies it, so there is no deadline for the whole read: only a wait for the host store's
   * next piece longer than the call timeout gives up.
   */
  async read(name: string, from?: number): Promise<AsyncIterable<Buffer> | undefined> {
    const call = this.client.Get({ name, offset: readOffset(from) });
    const chunks = (call as AsyncIterable<BlobChunkIn>)[Symbol.asyncIterator]();
    const nextPiece = async (): Promise<IteratorResult<BlobChunkIn>> => {
      const idle = setTimeout(() => call.cancel(), this.timeoutMs);
      try {
        return await chunks.next();
      } finally {
        clearTimeout(idle);
      }
    };
    // The first piece (or the error) tells a missing blob from a present one.
    let first: IteratorResult<BlobChunkIn>;
    try {
      first = await nextPiece();
    } catch (err) {
      if ((err as grpc.ServiceError).code === grpc.status.NOT_FOUND) return undefined;
      throw wrap(`get ${name}`, err as grpc.ServiceError);
    }
    return (async function* () {
      try {
        if (first.done) return;
        yield first.value.data;
        for (let next = await nextPiece(); !next.done; next = await nextPiece()) yield next.value.data;
      } catch (err) {
        throw wrap(`get ${name}`, err as grpc.ServiceError);
      } finally {
        // A reader that stops early (a segment's header is all it needs) ends the call.
        call.cancel();
      }
    })();
  }

  /**
   * Streams the blob in pieces and marks the last one, so the host store replaces the blob
   * only with all of it. A put may take long (a large snapshot): instead of one deadline, it
   * is given up when no piece gets through for the call timeout.
   */
  put(name: string, data: Uint8Array | AsyncIterable<Uint8Array>, conditions: PutConditions = {}): Promise<{ version: string }> {
    return new Promise((resolve, reject) => {
      const call = this.client.Put((err, written) => {
        clearTimeout(idle);
        if (err || !written) reject(wrap(`put ${name}`, err));
        else resolve({ version: written.version });
      });
      let idle = setTimeout(() => call.cancel(), this.timeoutMs);
      const progress = () => {
        clearTimeout(idle);
        idle = setTimeout(() => call.cancel(), this.timeoutMs);
      };
      void (async () => {
        try {
          let first = true;
          const send = async (piece: BlobChunk) => {
            const writable = call.write(first ? { ...piece, name, if_absent: conditions.ifAbsent ?? false, if_version: conditions.ifVersion ?? '' } : piece);
            first = false;
            if (!writable) await new Promise((r) => call.once('drain', r));
            progress();
          };
          for await (const piece of data instanceof Uint8Array ? [data] : data) {
            for (let at = 0; at < piece.length; at += PUT_CHUNK_BYTES) {
              await send({ data: Buffer.from(piece.buffer, piece.byteOffset + at, Math.min(PUT_CHUNK_BYTES, piece.length - at)), last: false });
            }
          }
          await send({ data: Buffer.alloc(0), last: true });
          call.end();
        } catch (err) {
          call.cancel();
          reject(err as Error);
        }
      })();
    });
  }

  /** Over the long-lived Appends stream; answers in order, each within the call timeout. */
  async append(name: string, offset: number, data: Uint8Array): Promise<void> {
    // A lost answer must not hang the log: past the timeout the append counts as failed
    // (the next one is written at the same offset, so a late success does no harm).
    const ack = await this.appends.call({ append: { name, offset: String(offset), data: Buffer.from(data.buffer, data.byteOffset, data.byteLength) } }, this.timeoutMs, undefined,
      () => new HostStoreError(`append ${name}`, grpc.status.DEADLINE_EXCEEDED, `no answer within ${this.timeoutMs} ms`));
    if (ack.conflict) throw new BlobConflictError(`host store append: ${ack.error}`);
    if (ack.error) throw new HostStoreError('append', undefined, ack.error);
  }

  truncate(name: string, length: number, ifSize: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.client.Truncate({ name, length: String(length), if_size: String(ifSize) }, this.callOptions(), (err) => (err ? reject(wrap(`truncate ${name}`, err)) : resolve()));
    });
  }

  delete(name: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.client.Delete({ name }, this.callOptions(), (err) => (err ? reject(wrap(`delete ${name}`, err)) : resolve()));
    });
  }

  /** The host store keeps the files appended to open and closes the least recently used itself. */
  async release(): Promise<void> {}

  async close(): Promise<void> {
    this.appends.end();
    this.client.close();
  }

  private callOptions(): grpc.CallOptions {
    return { deadline: Date.now() + this.timeoutMs };
  }
}

/** A refused condition becomes a BlobConflictError, as from the host store's folder itself; anything else a HostStoreError. */
function wrap(op: string, err: grpc.ServiceError | null): Error {
  const message = err?.details || err?.message || 'no answer';
  if (err?.code === grpc.status.FAILED_PRECONDITION) return new BlobConflictError(`host store ${op}: ${message}`);
  return new HostStoreError(op, err?.code, message);
}
