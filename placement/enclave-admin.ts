import * as grpc from '@grpc/grpc-js';
import { channelOptions, enclaveProto, type EnclaveClient } from '../common/proto.js';

/** One open shard, as the enclave reports it (protos/enclave.proto ShardState). */
export interface ShardState {
  shard: number;
  generation: number;
}

export interface HeldShards {
  count: number;
  /** shard → the owner generation it is open at. */
  open: Map<number, number>;
  /** shard → its head's seq, for the shards open (absent: not reported). */
  heads?: Map<number, number>;
  /** shard → the seq its read-ahead reached, for the shards read ahead, not served (absent: not reported). */
  prepared?: Map<number, number>;
  /** The most shards it keeps read ahead at once (PREPARED_SHARDS_MAX; absent: not reported). */
  preparedMax?: number;
}

/**
 * What the controller asks of an enclave. The enclave decides for itself: OpenShard with a
 * generation lower than the store's is refused inside the sealed store, whatever etcd says.
 */
export interface ShardHosts {
  health(address: string): Promise<void>;
  shards(address: string): Promise<HeldShards>;
  open(address: string, shard: number, generation: number): Promise<void>;
  close(address: string, shard: number): Promise<void>;
  /**
   * Reads a shard ahead of its open, while its owner still serves it (a planned move, a warm
   * standby: kept `keepMs`, default a minute); resolves with the seq read to. Absent: moves open in full, no standbys.
   */
  prepare?(address: string, shard: number, keepMs?: number): Promise<number | void>;
  /** Names the enclave's other members (freshness across enclaves: whom it asks to witness). */
  setPeers?(address: string, peers: string[]): Promise<void>;
}

/** The enclaves' placement RPCs over gRPC, one channel per address (kept while in use). */
export class GrpcShardHosts implements ShardHosts {
  private readonly clients = new Map<string, EnclaveClient>();

  constructor(private readonly timeoutMs: number, private readonly openTimeoutMs: number) {}

  health(address: string): Promise<void> {
    return this.call<unknown>(address, this.timeoutMs, (c, o, cb) => c.Health({}, o, cb)).then(() => undefined);
  }

  async shards(address: string): Promise<HeldShards> {
    const reply = await this.call<{ count: number; open: Array<{ shard: number; generation: string; seq: string }>; prepared?: Array<{ shard: number; seq: string }>; prepared_max?: number }>(address, this.timeoutMs, (c, o, cb) => c.Shards({}, o, cb));
    return {
      count: reply.count,
      open: new Map(reply.open.map((s) => [s.shard, Number(s.generation)])),
      heads: new Map(reply.open.map((s) => [s.shard, Number(s.seq)])),
      prepared: new Map((reply.prepared ?? []).map((s) => [s.shard, Number(s.seq)])),
      ...(reply.prepared_max ? { preparedMax: reply.prepared_max } : {}),
    };
  }

  /** Opening recovers the shard's tenants (snapshot and log): its own, longer deadline. */
  async open(address: string, shard: number, generation: number): Promise<void> {
    await this.call(address, this.openTimeoutMs, (c, o, cb) => c.OpenShard({ shard, generation }, o, cb));
  }

  /** Reads as much as an open, before it: the open's deadline. */
  async prepare(address: string, shard: number, keepMs = 0): Promise<number> {
    const reply = await this.call<{ seq: string }>(address, this.openTimeoutMs, (c, o, cb) => c.PrepareShard({ shard, keep_ms: keepMs }, o, cb));
    return Number(reply.seq);
  }

  async close(address: string, shard: number): Promise<void> {
    await this.call(address, this.openTimeoutMs, (c, o, cb) => c.CloseShard({ shard }, o, cb));
  }

  async setPeers(address: string, peers: string[]): Promise<void> {
    await this.call(address, this.timeoutMs, (c, o, cb) => c.SetPeers({ addresses: peers }, o, cb));
  }

  /** Drops the channels of addresses no longer in use. */
  keepOnly(addresses: Iterable<string>): void {
    const keep = new Set(addresses);
    for (const [address, client] of this.clients) {
      if (keep.has(address)) continue;
      client.close();
      this.clients.delete(address);
    }
  }

  closeAll(): void {
    this.keepOnly([]);
  }

  private call<R>(address: string, timeoutMs: number, send: (client: EnclaveClient, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null, reply?: R) => void) => void): Promise<R> {
    const client = this.client(address);
    return new Promise<R>((resolve, reject) => send(client, { deadline: Date.now() + timeoutMs }, (err, reply) => (err ? reject(err) : resolve(reply!))));
  }

  private client(address: string): EnclaveClient {
    let client = this.clients.get(address);
    if (!client) {
      const Enclave = enclaveProto().Enclave;
      client = new Enclave(address, grpc.credentials.createInsecure(), channelOptions);
      this.clients.set(address, client);
    }
    return client;
  }
}
