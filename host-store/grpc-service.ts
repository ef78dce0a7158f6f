import * as grpc from '@grpc/grpc-js';
import { BlobConflictError, type BlobStore } from '../common/blob-store.js';
import type { Logger } from '../common/logger.js';
import {
  hostStoreChannelOptions, hostStoreProto, type BlobChunk, type BlobChunkIn, type HostStoreHandlers, type StreamedAppendIn,
} from '../common/proto.js';
import { BlobNameError } from './fs-blob-store.js';

/** A Put whose stream ended before its last chunk: nothing is replaced. */
class AbandonedPutError extends Error {
  constructor(name: string) {
    super(`the put of ${name} ended before its last piece; the blob is unchanged`);
    this.name = 'AbandonedPutError';
  }
}

/**
 * The host store's gRPC adapter: each call is one BlobStore operation on the folder. It
 * adds nothing of its own; what matters for trust happens in the enclave, which seals what
 * it puts and authenticates what it gets.
 */
export function createHostStoreServer(store: BlobStore, log: Logger): grpc.Server {
  const server = new grpc.Server(hostStoreChannelOptions);
  const failed = (op: string, err: unknown): grpc.ServiceError => {
    const error = err as Error;
    const code = error instanceof BlobNameError || error instanceof RangeError ? grpc.status.INVALID_ARGUMENT
      : error instanceof AbandonedPutError ? grpc.status.ABORTED
      : error instanceof BlobConflictError ? grpc.status.FAILED_PRECONDITION
        : (error as NodeJS.ErrnoException).code === 'ENOENT' ? grpc.status.NOT_FOUND
          : grpc.status.UNAVAILABLE;
    if (code === grpc.status.UNAVAILABLE) log.error({ op, err: error.message }, 'storage operation failed');
    return Object.assign(new Error(error.message), { code, details: error.message, metadata: new grpc.Metadata() });
  };

  const handlers: HostStoreHandlers = {
    List: (call, callback) => {
      store.list(call.request.prefix).then(
        (blobs) => callback(null, { blobs: blobs.map((b) => ({ name: b.name, size: b.size, version: b.version })) }),
        (err: unknown) => callback(failed('list', err)),
      );
    },
    Get: (call) => {
      const { name, offset } = call.request;
      void (async () => {
        try {
          const chunks = await store.read(name, Number(offset));
          if (!chunks) {
            call.emit('error', { code: grpc.status.NOT_FOUND, details: `no blob ${name}` });
            return;
          }
          for await (const data of chunks) {
            if (call.cancelled) return;
            // Waits while gRPC's buffer is full, so a large blob streams at the reader's pace.
            if (!call.write({ name: '', data } satisfies BlobChunk)) {
              await new Promise<void>((r) => {
                const done = () => { call.off('drain', done); call.off('cancelled', done); r(); };
                call.on('drain', done);
                call.on('cancelled', done);
              });
            }
          }
          call.end();
        } catch (err) {
          call.emit('error', failed('get', err));
        }
      })();
    },
    Put: (call, callback) => {
      // The stream's first chunk names the blob; every chunk's data is the blob's bytes, in
      // order; the blob is replaced only if the stream ends with a chunk marked last.
      const chunks = (call as AsyncIterable<BlobChunkIn>)[Symbol.asyncIterator]();
      let name = '';
      void (async () => {
        try {
          const first = await chunks.next();
          if (first.done) throw new BlobNameError('');
          name = first.value.name;
          const { if_absent: ifAbsent, if_version: ifVersion } = first.value;
          let complete = first.value.last;
          const written = await store.put(name, (async function* () {
            yield first.value.data;
            for (let next = await chunks.next(); !next.done && !complete; next = await chunks.next()) {
              yield next.value.data;
              complete = next.value.last;
            }
            if (!complete || call.cancelled) throw new AbandonedPutError(name);
          })(), { ifAbsent, ifVersion: ifVersion || undefined });
          callback(null, written);
        } catch (err) {
          callback(failed(`put ${name}`, err));
        }
      })();
    },
    Append: (call, callback) => {
      const { name, offset, data } = call.request;
      store.append(name, Number(offset), data).then(() => callback(null, {}), (err: unknown) => callback(failed(`append ${name}`, err)));
    },
    Appends: (call) => {
      // One at a time, in arrival order: a later append never overtakes an earlier one.
      let chain = Promise.resolve();
      call.on('data', (message: StreamedAppendIn) => {
        const { id, append } = message;
        chain = chain.then(async () => {
          let error = '';
          let conflict = false;
          try {
            if (!append) throw new BlobNameError('');
            await store.append(append.name, Number(append.offset), append.data);
          } catch (err) {
            error = failed(`append ${append?.name ?? ''}`, err).details;
            conflict = err instanceof BlobConflictError;
          }
          if (!call.cancelled && call.writable) call.write({ id, error, conflict });
        });
      });
      call.on('end', () => { void chain.then(() => call.end()); });
      call.on('error', () => {});
    },
    Truncate: (call, callback) => {
      const { name, length, if_size: ifSize } = call.request;
      store.truncate(name, Number(length), Number(ifSize)).then(() => callback(null, {}), (err: unknown) => callback(failed(`truncate ${name}`, err)));
    },
    Delete: (call, callback) => {
      store.delete(call.request.name).then(() => callback(null, {}), (err: unknown) => callback(failed('delete', err)));
    },
  };
  server.addService(hostStoreProto().HostStore.service, handlers);
  return server;
}
