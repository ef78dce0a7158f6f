import * as grpc from '@grpc/grpc-js';
import { channelOptions, enclaveProto } from '../common/proto.js';

/** One open shard, as the enclave reports it (protos/enclave.proto ShardState). */
export interface ShardState {
  shard: number;
  generation: number;
}

export interface HeldShards {
  count: number;
  /** shard → the owner generation it is open at. */
  open: Map<number, number>;
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
}

interface ShardStateIn { shard: number; generation: string | number }
type Unary<Req, Res> = (request: Req, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null, reply?: Res) => void) => void;
interface AdminClient extends grpc.Client {
  Health: Unary<object, unknown>;
  Shards: Unary<object, { count: number; open: ShardStateIn[] }>;
  OpenShard: Unary<{ shard: number; generation: number }, ShardStateIn>;
  CloseShard: Unary<{ shard: number }, ShardStateIn>;
}

/** The enclaves' placement RPCs over gRPC, one channel per address (kept while in use). */
export class GrpcShardHosts implements ShardHosts {
  private readonly clients = new Map<string, AdminClient>();

  constructor(private readonly timeoutMs: number, private readonly openTimeoutMs: number) {}

  health(address: string): Promise<void> {
    return this.unary(address, 'Health', {}, this.timeoutMs).then(() => undefined);
  }

  async shards(address: string): Promise<HeldShards> {
    const reply = await this.unary(address, 'Shards', {}, this.timeoutMs);
    return { count: reply.count, open: new Map(reply.open.map((s) => [s.shard, Number(s.generation)])) };
  }

  /** Opening recovers the shard's tenants (snapshot and log): its own, longer deadline. */
  async open(address: string, shard: number, generation: number): Promise<void> {
    await this.unary(address, 'OpenShard', { shard, generation }, this.openTimeoutMs);
  }

  async close(address: string, shard: number): Promise<void> {
    await this.unary(address, 'CloseShard', { shard }, this.openTimeoutMs);
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

  private unary<M extends 'Health' | 'Shards' | 'OpenShard' | 'CloseShard'>(address: string, method: M, request: Parameters<AdminClient[M]>[0], timeoutMs: number) {
    type Reply = Parameters<Parameters<AdminClient[M]>[2]>[1];
    const client = this.client(address);
    return new Promise<NonNullable<Reply>>((resolve, reject) => {
      (client[method] as Unary<typeof request, Reply>).call(client, request, { deadline: Date.now() + timeoutMs }, (err, reply) => (err ? reject(err) : resolve(reply!)));
    });
  }

  private client(address: string): AdminClient {
    let client = this.clients.get(address);
    if (!client) {
      const Enclave = enclaveProto().Enclave;
      client = new Enclave(address, grpc.credentials.createInsecure(), channelOptions) as unknown as AdminClient;
      this.clients.set(address, client);
    }
    return client;
  }
}
