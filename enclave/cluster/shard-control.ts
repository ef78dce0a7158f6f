import * as grpc from '@grpc/grpc-js';
import { ApiError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { CloseShardRequestIn, OpenShardRequestIn, PreparedShard, PrepareShardRequestIn, ShardsReply, ShardState } from '../../common/proto.js';
import type { MemoryService } from '../memory/memory-service.js';
import { CorruptStoreError, EmbeddingModelChangedError, PreparedLimitError, PreparedStateStale, ShardHeldError, StaleOwnerError, SupersededError } from '../storage/errors.js';
import type { ShardedStore } from '../storage/sharded-store.js';
import { Freshness } from './freshness.js';

/**
 * The host's placement acting on this enclave (protos/enclave.proto OpenShard, CloseShard,
 * Shards, PrepareShard): which shards it serves. The host is not trusted with this more than with anything
 * else: each shard's owner generation is checked inside its sealed store, so a wrong or hostile
 * placement costs availability, never a forked chain. What goes back is what the host can see
 * anyway (heads it stores, counts as in the metrics), never a tenant id.
 */
export function shardControl(store: ShardedStore, memory: MemoryService, log: Logger, freshness?: Freshness): grpc.UntypedServiceImplementation {
  // A shard's counts: one pass over the tenants; Shards, which the controller asks every member
  // every second, counts every shard in one pass (a pass per shard was most of an idle enclave's CPU).
  const usageOf = (shard: number) => memory.usageOf((tenantId) => store.shardOf(tenantId) === shard);
  const none = { tenants: 0, memories: 0 };
  const prepared = ({ shard, head }: { shard: number; head: { seq: number; hash: string } }, usage = usageOf(shard)): PreparedShard => {
    const { tenants, memories } = usage;
    return { shard, seq: String(head.seq), head: Buffer.from(head.hash, 'hex'), tenants: String(tenants), memories: String(memories) };
  };
  const state = (shard: number, usage = usageOf(shard)): ShardState => {
    const last = store.lastStore(shard);
    const head = store.head(shard);
    const { tenants, memories } = usage;
    return {
      shard, generation: String(store.generation(shard) ?? last?.ownerGeneration ?? 0), seq: String(head.seq), head: Buffer.from(head.hash, 'hex'),
      tenants: String(tenants), memories: String(memories),
    };
  };
  return {
    OpenShard: (call: grpc.ServerUnaryCall<OpenShardRequestIn, ShardState>, callback: grpc.sendUnaryData<ShardState>) => {
      const { shard } = call.request;
      const generation = Number(call.request.generation);
      const started = performance.now();
      let opening: Promise<unknown>;
      try {
        // A generation past 2^53 cannot be compared exactly: refused like a shard out of range.
        if (!Number.isSafeInteger(generation)) throw new RangeError(`generation ${call.request.generation} is larger than 2^53 - 1`);
        opening = freshness && freshness.witnesses > 0 ? openFresh(store, shard, generation, freshness, log) : store.openShard(shard, generation);
      } catch (err) {
        return callback(refusal(err, 'open', shard, log));
      }
      opening.then(
        () => {
          log.info({ shard, generation, ms: Math.round(performance.now() - started) }, 'OpenShard: serving the shard');
          callback(null, state(shard));
        },
        (err: unknown) => callback(refusal(err, 'open', shard, log)),
      );
    },
    PrepareShard: (call: grpc.ServerUnaryCall<PrepareShardRequestIn, PreparedShard>, callback: grpc.sendUnaryData<PreparedShard>) => {
      const { shard } = call.request;
      const started = performance.now();
      let preparing: ReturnType<ShardedStore['prepareShard']>;
      try {
        preparing = store.prepareShard(shard, call.request.keep_ms);
      } catch (err) {
        return callback(refusal(err, 'prepare', shard, log));
      }
      preparing.then(
        ({ head }) => {
          log.info({ shard, seq: head.seq, ms: Math.round(performance.now() - started) }, 'PrepareShard: read ahead, not served until OpenShard');
          callback(null, prepared({ shard, head }));
        },
        (err: unknown) => callback(refusal(err, 'prepare', shard, log)),
      );
    },
    CloseShard: (call: grpc.ServerUnaryCall<CloseShardRequestIn, ShardState>, callback: grpc.sendUnaryData<ShardState>) => {
      const { shard } = call.request;
      let closing: Promise<unknown>;
      try {
        closing = store.closeShard(shard);
      } catch (err) {
        return callback(refusal(err, 'close', shard, log));
      }
      closing.then(() => callback(null, state(shard)), (err: unknown) => callback(refusal(err, 'close', shard, log)));
    },
    Shards: (_call: unknown, callback: grpc.sendUnaryData<ShardsReply>) => {
      const usage = memory.usageBy((tenantId) => store.shardOf(tenantId));
      callback(null, {
        count: store.count,
        open: store.open.map((shard) => state(shard, usage.get(shard) ?? none)),
        prepared: store.preparedHeads.map((p) => prepared(p, usage.get(p.shard) ?? none)),
        prepared_max: store.preparedMax,
      });
    },
  };
}

/**
 * WITNESSES > 0: asks the members for the highest head of the shard they witnessed first (naming
 * `generation`, below which they witness nothing of it from then on), and opens its store only if
 * its chain reaches it (checked before anything is written); from then on every group commit of
 * the shard is witnessed, at `generation`, before it is acknowledged.
 */
async function openFresh(store: ShardedStore, shard: number, generation: number, freshness: Freshness, log: Logger): Promise<void> {
  if (!Number.isSafeInteger(shard) || shard < 0 || shard >= store.count) throw new RangeError(`there is no shard ${shard}: this service has ${store.count} (0 to ${store.count - 1})`);
  const { head: witnessed, answers } = await freshness.highest(shard, generation);
  const name = `shard ${shard} (${store.map.shards[shard].prefix})`;
  const opened = await store.openShard(shard, generation, {
    acceptHead: (found) => Freshness.check(name, witnessed, found),
    confirm: (storeId, head) => freshness.witness(shard, generation, { store: storeId, ...head }),
  });
  freshness.book.record(shard, { store: opened.storeId, ...opened.head });
  log.info({ shard, answers, witnessed: witnessed ? witnessed.seq : null, seq: opened.head.seq }, 'the shard\'s store reaches the highest head the members witnessed');
}

/** Why an open or close failed, as a gRPC status the host's placement acts on (protos/enclave.proto). */
function refusal(err: unknown, what: 'open' | 'close' | 'prepare', shard: number, log: Logger): Partial<grpc.StatusObject> {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof RangeError) return { code: grpc.status.INVALID_ARGUMENT, details: message };
  if (err instanceof PreparedLimitError) {
    log.warn({ shard, problem: message }, `${what} shard refused`);
    return { code: grpc.status.RESOURCE_EXHAUSTED, details: message };
  }
  if (err instanceof ShardHeldError || err instanceof PreparedStateStale) {
    log.warn({ shard, problem: message }, `${what} shard refused`);
    return { code: grpc.status.FAILED_PRECONDITION, details: message };
  }
  if (err instanceof StaleOwnerError || err instanceof SupersededError) {
    log.warn({ shard, problem: message }, `${what} shard refused: a newer owner holds it`);
    return { code: grpc.status.FAILED_PRECONDITION, details: message };
  }
  if (err instanceof CorruptStoreError || err instanceof EmbeddingModelChangedError) {
    log.error({ shard, problem: message }, `${what} shard refused: its store cannot be served`);
    return { code: grpc.status.DATA_LOSS, details: message };
  }
  if (err instanceof ApiError && err.code === 'witness_unavailable') {
    // Expected while a cluster starts or restarts (the other members not yet named): placement tries again, and says so.
    log.info({ shard, problem: message }, `${what} shard waits for other members to say what they witnessed`);
    return { code: grpc.status.UNAVAILABLE, details: message };
  }
  log.error({ shard, err: message }, `${what} shard failed`);
  return { code: grpc.status.UNAVAILABLE, details: message };
}
