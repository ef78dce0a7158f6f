import { PassThrough } from 'node:stream';
import type * as grpc from '@grpc/grpc-js';
import type { ApiChunkIn } from '../common/proto.js';
import { missedShard } from './shard-miss.js';

type Call = grpc.ClientReadableStream<ApiChunkIn>;
type First = { chunk: ApiChunkIn } | { end: true } | { error: Error };

/**
 * A streamed answer in a cluster: the stream of the shard's owner, or, when its head is a
 * shard miss (503 with x-tee-shard-miss, sent before any work), the stream of the owner the
 * map names next. What the route reads is one stream of chunks either way.
 */
export class RoutedStream extends PassThrough {
  private current?: Call;
  private cancelled = false;

  constructor(
    private readonly open: () => Promise<Call>,
    /** Told the shard an enclave refused; resolves when to try again, rejects with the answer when no more tries are left. */
    private readonly onMiss: (shard: number) => Promise<void>,
  ) {
    super({ objectMode: true });
    void this.run();
  }

  cancel(): void {
    this.cancelled = true;
    this.current?.cancel();
  }

  private async run(): Promise<void> {
    for (;;) {
      let call: Call;
      try {
        call = await this.open();
      } catch (err) {
        this.destroy(err as Error);
        return;
      }
      if (this.cancelled) {
        call.on('error', () => undefined);
        return call.cancel();
      }
      this.current = call;
      const first = await firstOf(call);
      if ('chunk' in first && first.chunk.kind === 'head' && first.chunk.head) {
        const miss = missedShard(first.chunk.head);
        if (miss !== undefined) {
          // Abandoned: its cancellation ends in an error event, which must not go unheard.
          call.on('error', () => undefined);
          call.cancel();
          try {
            await this.onMiss(miss);
          } catch (err) {
            return void this.destroy(err as Error);
          }
          if (this.cancelled) return;
          continue;
        }
      }
      if ('error' in first) return void this.destroy(first.error);
      if ('end' in first) return void this.end();
      this.write(first.chunk);
      call.on('data', (chunk: ApiChunkIn) => {
        if (!this.write(chunk)) {
          call.pause();
          this.once('drain', () => call.resume());
        }
      });
      call.on('end', () => this.end());
      call.on('error', (err: Error) => this.destroy(err));
      call.resume();
      return;
    }
  }
}

/** The first thing a call yields, the call paused after it. */
function firstOf(call: Call): Promise<First> {
  return new Promise((resolve) => {
    const settle = (first: First) => {
      call.off('data', onData);
      call.off('end', onEnd);
      call.off('error', onError);
      resolve(first);
    };
    const onData = (chunk: ApiChunkIn) => {
      call.pause();
      settle({ chunk });
    };
    const onEnd = () => settle({ end: true });
    const onError = (error: Error) => settle({ error });
    call.on('data', onData);
    call.on('end', onEnd);
    call.on('error', onError);
  });
}
