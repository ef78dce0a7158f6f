import type { Etcd3, Watcher } from 'etcd3';
import { unavailable } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import type { ApiReplyIn, HealthReplyIn } from '../common/proto.js';
import { ShardMap, type ClusterView } from '../placement/shard-map.js';
import { shardOf } from '../protocol/shards.js';
import type { Destination } from './destination.js';
import { EnclaveConnection, type CallOptions, type ChunkStream, type EnclaveLink, type ForwardedRequest } from './enclave-client.js';
import { RoutedStream } from './routed-stream.js';
import { missedShard } from './shard-miss.js';

export interface ClusterRouterOptions {
  prefix: string;
  timeoutMs: number;
  /** Sends of one request after its first, on a shard miss or while its shard has no owner. */
  retries: number;
  /** Longest one retry waits for the map to change (the waits start at 50 ms and double). */
  retryWaitMs: number;
}

/** Tenants whose shard the router keeps (a tenant id is at most 128 characters: a few MB at most). */
const TENANT_SHARDS_KEPT = 20_000;

/**
 * The proxy's view of a cluster of enclaves: it watches the shard map in etcd and sends each
 * request to its shard's owner (proxy/destination.ts says which shard). An enclave that does
 * not hold the shard answers 503 `shard_not_owned` with `x-tee-shard-miss: <i>` and has
 * done nothing: the map is read again and the same bytes go to shard i's owner, a bounded
 * number of times. The map is the host's (untrusted) business: a wrong route costs a retry
 * or a 503, never a wrong answer, because each enclave refuses what it does not hold.
 */
export class ClusterRouter implements EnclaveLink {
  private view?: ClusterView;
  private watcher?: Watcher;
  private readonly connections = new Map<string, EnclaveConnection>();
  private readonly changed = new Set<() => void>();
  private next = 0;
  private readonly map: ShardMap;
  /** Tenants' shards at `shardsOf.count`: a SHA-256 a request otherwise (protocol/shards.ts). Cleared when full. */
  private readonly shardsOf = { count: 0, byTenant: new Map<string, number>() };

  constructor(private readonly client: Etcd3, private readonly options: ClusterRouterOptions, private readonly log: Logger) {
    this.map = new ShardMap(client, options.prefix);
  }

  async start(): Promise<void> {
    this.watcher = await this.client.watch().prefix(this.map.keys.prefix).create();
    const reread = () => void this.refresh().catch((err: unknown) => this.log.warn({ err: String(err) }, 'reading the shard map failed'));
    this.watcher.on('put', reread);
    this.watcher.on('delete', reread);
    this.watcher.on('connected', reread);
    this.watcher.on('error', () => undefined);
    await this.refresh();
  }

  /** Reads the whole map again (after a miss, and on every change the watch reports). */
  async refresh(): Promise<void> {
    const view = await this.map.read();
    if (this.view && view.revision < this.view.revision) return;
    this.view = view;
    for (const resolve of [...this.changed]) resolve();
  }

  async call(request: ForwardedRequest, options: CallOptions = {}): Promise<ApiReplyIn> {
    let shard = this.firstShard(request.destination);
    for (let attempt = 0; ; attempt++) {
      const address = this.addressFor(shard);
      if (address === undefined) {
        if (attempt >= this.options.retries) throw this.noOwner(shard);
        await this.waitWhile(() => this.addressFor(shard) === undefined, attempt);
        continue;
      }
      const marked = this.markOf(shard);
      const reply = await this.connection(address).call(request, options);
      const miss = missedShard(reply);
      if (miss === undefined) return reply;
      // A miss is meant for the host, not the client (the enclave signs it as acting for no tenant).
      if (attempt >= this.options.retries) throw this.noOwner(miss);
      await this.afterMiss(address, miss, attempt, miss === shard ? marked : undefined);
      shard = miss;
    }
  }

  stream(request: ForwardedRequest, options: CallOptions = {}): ChunkStream {
    let shard = this.firstShard(request.destination);
    let attempt = 0;
    let marked: number | undefined;
    return new RoutedStream(async () => {
      for (;;) {
        const address = this.addressFor(shard);
        marked = this.markOf(shard);
        if (address !== undefined) return this.connection(address).stream(request, options);
        if (attempt >= this.options.retries) throw this.noOwner(shard);
        await this.waitWhile(() => this.addressFor(shard) === undefined, attempt++);
      }
    }, async (miss) => {
      if (attempt >= this.options.retries) throw this.noOwner(miss);
      const from = this.addressFor(shard);
      const markedAtSend = miss === shard ? marked : undefined;
      shard = miss;
      if (from !== undefined) await this.afterMiss(from, shard, attempt, markedAtSend);
      attempt++;
    });
  }

  /** Any live member that answers (health, metrics, the console's checks). */
  async health(timeoutMs = 2000): Promise<HealthReplyIn> {
    const address = this.addressFor(undefined) ?? this.addressFor(0);
    if (address === undefined) throw unavailable('no enclave is a member of the cluster yet; try again shortly').withHeaders({ 'retry-after': '1' });
    return this.connection(address).health(timeoutMs);
  }

  async metrics(timeoutMs = 2000): Promise<string> {
    const address = this.addressFor(0) ?? this.addressFor(undefined);
    if (address === undefined) throw unavailable('no enclave is a member of the cluster yet; try again shortly');
    return this.connection(address).metrics(timeoutMs);
  }

  close(): void {
    void this.watcher?.cancel().catch(() => undefined);
    for (const c of this.connections.values()) c.close();
    this.connections.clear();
  }

  /** The shard a request goes to first: undefined = any member. */
  private firstShard(destination: Destination | undefined): number | undefined {
    if (!destination || 'anyEnclave' in destination) return undefined;
    if ('shard' in destination) return destination.shard;
    const count = this.view?.count;
    if (count === undefined) return 0;
    const cache = this.shardsOf;
    if (cache.count !== count || cache.byTenant.size >= TENANT_SHARDS_KEPT) {
      cache.byTenant.clear();
      cache.count = count;
    }
    let shard = cache.byTenant.get(destination.tenant);
    if (shard === undefined) cache.byTenant.set(destination.tenant, shard = shardOf(destination.tenant, count));
    return shard;
  }

  /** The owner's address of `shard` (undefined shard: any live member, in turn), if it is live. */
  private addressFor(shard: number | undefined): string | undefined {
    const view = this.view;
    if (!view) return undefined;
    if (shard === undefined) {
      const members = [...view.members.values()];
      return members.length ? members[this.next++ % members.length] : undefined;
    }
    const owner = view.shards.get(shard)?.owner;
    return owner === undefined ? undefined : view.members.get(owner);
  }

  /**
   * After a miss: the map read again; while it still names the enclave that refused (the map
   * not yet changed, or the new owner still opening the shard), wait for a change of this
   * shard's owner, for its owner's mark that it has opened the shard at its generation (one
   * that was not there when the request was sent: `markedAtSend`), or a back-off, whichever
   * comes first: 50 ms doubling with each try, at most ROUTE_RETRY_WAIT_MS.
   */
  private async afterMiss(refusedBy: string, shard: number, attempt: number, markedAtSend: number | undefined): Promise<void> {
    await this.refresh().catch(() => undefined);
    await this.waitWhile(() => this.addressFor(shard) === refusedBy && !this.openedSince(shard, markedAtSend), attempt);
  }

  /** The generation `shard` was last marked opened at (ShardMap.markOpened), as the view has it now. */
  private markOf(shard: number | undefined): number | undefined {
    return shard === undefined ? undefined : this.view?.opened.get(shard);
  }

  /** Whether the shard's owner has marked it opened at its placement's generation since `markedAtSend`: it holds the shard now. */
  private openedSince(shard: number, markedAtSend: number | undefined): boolean {
    const generation = this.view?.shards.get(shard)?.generation;
    return generation !== undefined && this.markOf(shard) === generation && markedAtSend !== generation;
  }

  private async waitWhile(unchanged: () => boolean, attempt: number): Promise<void> {
    const deadline = Date.now() + Math.min(50 * 2 ** attempt, this.options.retryWaitMs);
    while (unchanged() && Date.now() < deadline) await this.waitForChange(deadline - Date.now());
  }

  private waitForChange(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.changed.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.changed.add(done);
    });
  }

  private noOwner(shard: number | undefined) {
    const what = shard === undefined ? 'no enclave is a member of the cluster' : `no live enclave holds shard ${shard}`;
    return unavailable(`${what} now (the placement controller moves shards of a lost enclave within its lease); try again shortly`, 'shard_unplaced', { 'retry-after': '1' });
  }

  private connection(address: string): EnclaveConnection {
    let c = this.connections.get(address);
    if (!c) {
      c = new EnclaveConnection(address, this.options.timeoutMs);
      this.connections.set(address, c);
    }
    return c;
  }
}
