import * as grpc from '@grpc/grpc-js';
import type { Campaign, Etcd3, Watcher } from 'etcd3';
import type { Logger } from '../common/logger.js';
import type { ShardHosts, HeldShards } from './enclave-admin.js';
import { ShardMap, type ClusterView, type Placement } from './shard-map.js';

export interface ControllerOptions {
  /** This candidate's name in the election (its member id). */
  id: string;
  prefix: string;
  /** TTL of the election's lease: a leader that dies is replaced about this long after. */
  ttlSeconds: number;
  /** A pass runs at least this often (also on every change under the prefix). */
  passMs: number;
  /**
   * A new leader waits this long before placing shards never placed, so that members started
   * with it have registered and the first placement is even (default 0); a member that joins
   * meanwhile starts the wait again, up to SETTLE_ROUNDS times this long after the election
   * (members started together on a busy machine register seconds apart, and shards are not
   * moved to a late one by themselves).
   */
  settleMs?: number;
}

/**
 * The placement controller. Every host process that runs one campaigns in etcd's election;
 * the leader alone changes the map, and each of its changes is conditioned on its election
 * key still existing, so a leader that lost its lease (stopped, cut off) writes nothing.
 *
 * A pass reads the map and asks every live member which shards it holds, then:
 * - a planned move (`<prefix>/moves/<i>`): PrepareShard on the new owner (it reads the shard ahead while the old
 *   one serves it), CloseShard on the old owner, the map changed, OpenShard on the new one (which applies only the
 *   log written since);
 * - a shard without a live owner (never placed, or its owner's lease expired) goes to the
 *   live member holding the fewest, with a new generation, and is opened there;
 * - a shard its live owner does not hold at its generation (the enclave restarted within its
 *   lease, or an open failed) gets a new generation and is opened again on the same owner;
 * - a shard a member holds but the map gives elsewhere is closed there (the fence would stop
 *   it at its next write anyway; closing ends its stale reads at once).
 */
/** The longest a new leader waits for members to stop joining, in settle windows. */
const SETTLE_ROUNDS = 5;

export class Controller {
  readonly map: ShardMap;
  private campaign?: Campaign;
  private watcher?: Watcher;
  private timer?: NodeJS.Timeout;
  private guard?: string;
  private electedAt = 0;
  /** The members that answered the last pass, and when that set last changed. */
  private answering = '';
  private answeringSince = 0;
  private running = false;
  private again = false;
  private stopped = false;
  /** Opens in flight (a shard's recovery may take seconds): no other change to those shards meanwhile. */
  private readonly opening = new Map<number, Promise<void>>();
  /** After a failed open, when the shard may be tried again. */
  private readonly retryAt = new Map<number, number>();
  private readonly failures = new Map<number, number>();
  /**
   * Shards whose store an enclave refused as unservable (DATA_LOSS: damaged, foreign, or an older
   * copy than an enclave of the service witnessed): not opened again by this controller, which
   * would only be refused again, until an operator asks for a move of the shard.
   */
  private readonly refused = new Map<number, string>();
  /** The registration of each member whose stale shards were closed (once per registration). */
  private readonly swept = new Map<string, string>();

  constructor(private readonly client: Etcd3, private readonly hosts: ShardHosts, private readonly options: ControllerOptions, private readonly log: Logger) {
    this.map = new ShardMap(client, options.prefix);
  }

  get leader(): boolean {
    return this.guard !== undefined;
  }

  start(): void {
    if (this.stopped) return;
    const campaign = this.client.election(this.map.keys.election, this.options.ttlSeconds).campaign(this.options.id);
    this.campaign = campaign;
    campaign.on('elected', () => {
      void campaign.getCampaignKey().then((key) => {
        if (this.campaign !== campaign) return;
        this.guard = key;
        this.electedAt = Date.now();
        this.answering = '';
        this.log.info({ controller: this.options.id }, 'elected placement controller');
        void this.lead();
      });
    });
    campaign.on('error', (err: Error) => {
      if (this.campaign !== campaign) return;
      this.log.warn({ controller: this.options.id, err: err.message }, 'campaign failed; campaigning again');
      this.follow();
      this.campaign = undefined;
      setTimeout(() => this.start(), 1000).unref();
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const campaign = this.campaign;
    this.follow();
    this.campaign = undefined;
    await Promise.allSettled(this.opening.values());
    await campaign?.resign().catch(() => undefined);
  }

  /** Runs one pass now, or right after the one running (tests and the watch use it). */
  schedule(): void {
    if (!this.leader) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void (async () => {
      do {
        this.again = false;
        try {
          await this.pass();
        } catch (err) {
          this.log.warn({ err: String(err) }, 'placement pass failed; trying again');
        }
      } while (this.again && this.leader);
      this.running = false;
    })();
  }

  private async lead(): Promise<void> {
    this.watcher = await this.client.watch().prefix(this.map.keys.prefix).create();
    this.watcher.on('put', () => this.schedule());
    this.watcher.on('delete', () => this.schedule());
    this.watcher.on('error', () => undefined);
    const tick = () => {
      this.schedule();
      this.timer = setTimeout(tick, this.options.passMs);
      this.timer.unref();
    };
    tick();
  }

  private follow(): void {
    this.guard = undefined;
    clearTimeout(this.timer);
    void this.watcher?.cancel().catch(() => undefined);
    this.watcher = undefined;
  }

  private async pass(): Promise<void> {
    // Shards being opened when the members are asked: their answer may predate the open's end,
    // which would read as "not open on its owner" and reopen (a whole recovery again) a shard
    // just opened. The end of each open schedules a pass of its own, which judges it.
    const inFlight = new Set(this.opening.keys());
    const view = await this.map.read();
    const held = await this.askMembers(view);
    const answering = [...held].filter(([, h]) => h).map(([id]) => id).sort().join(',');
    if (answering !== this.answering) {
      this.answering = answering;
      this.answeringSince = Date.now();
    }
    if (await this.nextMove(view, held)) return;
    const count = await this.count(view, held);
    if (count === undefined) return;
    await this.closeStale(view, held, count);

    const loads = new Map<string, number>();
    for (const [id, h] of held) if (h) loads.set(id, 0);
    for (const p of view.shards.values()) if (loads.has(p.owner)) loads.set(p.owner, loads.get(p.owner)! + 1);

    for (let shard = 0; shard < count; shard++) {
      if (this.opening.has(shard) || inFlight.has(shard) || this.refused.has(shard) || (this.retryAt.get(shard) ?? 0) > Date.now()) continue;
      const seen = view.shards.get(shard);
      let target: string | undefined;
      if (seen && view.members.has(seen.owner)) {
        const h = held.get(seen.owner);
        // A live owner that does not answer keeps its shards until its lease expires.
        if (!h || h.open.get(shard) === seen.generation) continue;
        target = seen.owner;
      } else {
        if (!seen && this.settling()) continue;
        // Only members that answered are candidates (a lost owner is not in `loads`).
        target = leastLoaded(loads);
        if (!target) return;
      }
      const generation = await this.map.assign(shard, target, seen, view, this.guard);
      if (generation === undefined) {
        this.again = true; // the map changed under us: read it again
        return;
      }
      if (target !== seen?.owner) {
        loads.set(target, loads.get(target)! + 1);
        if (seen && loads.has(seen.owner)) loads.set(seen.owner, loads.get(seen.owner)! - 1);
      }
      this.log.info({ shard, owner: target, generation, from: seen?.owner, reason: seen ? (seen.owner === target ? 'not open on its owner' : 'owner gone') : 'unplaced' }, 'shard assigned');
      void this.startOpen(shard, target, view.members.get(target)!, generation);
    }
  }

  /** Whether shards never placed should wait: members may still be registering. */
  private settling(): boolean {
    const settle = this.options.settleMs ?? 0;
    const now = Date.now();
    return now < this.electedAt + settle || (now < this.answeringSince + settle && now < this.electedAt + SETTLE_ROUNDS * settle);
  }

  private async askMembers(view: ClusterView): Promise<Map<string, HeldShards | undefined>> {
    const held = new Map<string, HeldShards | undefined>();
    await Promise.all([...view.members].map(async ([id, address]) => {
      held.set(id, await this.hosts.shards(address).catch(() => undefined));
    }));
    return held;
  }

  /** The shard count: in etcd once written; the first time, what the members report. */
  private async count(view: ClusterView, held: Map<string, HeldShards | undefined>): Promise<number | undefined> {
    if (view.count !== undefined) return view.count;
    const reported = [...held.values()].find((h) => h !== undefined)?.count;
    return reported === undefined ? undefined : this.map.settleCount(reported);
  }

  private async closeStale(view: ClusterView, held: Map<string, HeldShards | undefined>, count: number): Promise<void> {
    const closing: Array<Promise<void>> = [];
    const close = (id: string, shard: number, why: object) => {
      this.log.info({ shard, member: id, ...why }, 'closing a shard held outside the map');
      closing.push(this.hosts.close(view.members.get(id)!, shard).catch((err: unknown) => this.log.warn({ shard, member: id, err: String(err) }, 'close failed')));
    };
    for (const [id, h] of held) {
      if (!h) continue;
      for (const [shard, generation] of h.open) {
        const p = view.shards.get(shard);
        if (this.opening.has(shard) || (p && p.owner === id && p.generation === generation)) continue;
        close(id, shard, { generation, owner: p?.owner, ownerGeneration: p?.generation });
      }
      // A member back with a new lease may still hold shards taken over while it was away, which
      // it no longer lists (it refuses their tenants): close, once per registration, every shard
      // not its own (idempotent where it holds nothing).
      const registration = view.registrations.get(id)!;
      if (this.swept.get(id) === registration) continue;
      this.swept.set(id, registration);
      for (let shard = 0; shard < count; shard++) {
        if (!this.opening.has(shard) && view.shards.get(shard)?.owner !== id && !h.open.has(shard)) closing.push(this.hosts.close(view.members.get(id)!, shard).catch(() => undefined));
      }
    }
    // Before any open of this pass: a close must not overtake it.
    await Promise.all(closing);
  }

  /** A planned move, if one is asked for: read ahead on the new owner, close on the old, change the map, open on the new. */
  private async nextMove(view: ClusterView, held: Map<string, HeldShards | undefined>): Promise<boolean> {
    for (const [shard, move] of view.moves) {
      if (this.opening.has(shard)) continue;
      // An operator's move is the one way a refused shard is tried again.
      this.refused.delete(shard);
      const seen = view.shards.get(shard);
      const address = view.members.get(move.to);
      if (!address || !held.get(move.to) || seen?.owner === move.to) {
        if (seen?.owner !== move.to) this.log.warn({ shard, to: move.to }, 'move refused: no such live member');
        await this.map.clearMove(shard, move.modRevision);
        this.again = true;
        return true;
      }
      const from = seen && view.members.get(seen.owner);
      // Read ahead on the new owner while the old one still serves the shard, so that its writes
      // wait only for the close, the map and the new owner's read of what was written since.
      // Failing costs only that: the open then reads the shard in full.
      let prepareMs: number | undefined;
      if (from && this.hosts.prepare) {
        const preparing = Date.now();
        await this.hosts.prepare(address, shard).then(
          () => { prepareMs = Date.now() - preparing; },
          (err: unknown) => this.log.warn({ shard, to: move.to, err: String(err) }, 'PrepareShard failed; the move opens the shard in full'),
        );
      }
      const started = Date.now();
      // Closing first waits for the old owner's writes in flight: none is lost, none half-applied.
      if (from) await this.hosts.close(from, shard).catch((err: unknown) => this.log.warn({ shard, from: seen.owner, err: String(err) }, 'close before a move failed; moving anyway (the new generation fences it)'));
      const generation = await this.map.assign(shard, move.to, seen, view, this.guard);
      if (generation !== undefined) {
        const opened = this.startOpen(shard, move.to, address, generation);
        await opened;
        this.log.info({ shard, from: seen?.owner, to: move.to, generation, prepareMs, pauseMs: Date.now() - started }, 'shard moved');
      }
      await this.map.clearMove(shard, move.modRevision);
      this.again = true;
      return true;
    }
    return false;
  }

  private startOpen(shard: number, owner: string, address: string, generation: number): Promise<void> {
    const started = Date.now();
    const opened = this.hosts.open(address, shard, generation).then(
      () => {
        this.failures.delete(shard);
        this.retryAt.delete(shard);
        this.log.info({ shard, owner, generation, ms: Date.now() - started }, 'shard opened');
        // For the proxy, which retries requests waiting on this open at once (not awaited: only a hint).
        this.map.markOpened(shard, generation).catch((err: unknown) => this.log.warn({ shard, err: String(err) }, 'marking the shard opened failed'));
      },
      (err: unknown) => {
        if ((err as { code?: number }).code === grpc.status.DATA_LOSS) {
          this.refused.set(shard, err instanceof Error ? err.message : String(err));
          this.log.error({ shard, owner, generation, err: err instanceof Error ? err.message : String(err) },
            'OpenShard refused: the shard\'s store cannot be served (damaged, foreign, or an older copy than an enclave of the service witnessed); not tried again until a move of it is asked for');
          return;
        }
        // Back off a shard whose open fails (a store that names a higher generation, the host store down).
        const failures = (this.failures.get(shard) ?? 0) + 1;
        this.failures.set(shard, failures);
        this.retryAt.set(shard, Date.now() + Math.min(10_000, 250 * 2 ** failures));
        this.log.error({ shard, owner, generation, err: err instanceof Error ? err.message : String(err) }, 'OpenShard failed');
      },
    ).finally(() => {
      this.opening.delete(shard);
      this.schedule();
    });
    this.opening.set(shard, opened);
    return opened;
  }
}

function leastLoaded(loads: Map<string, number>): string | undefined {
  let best: string | undefined;
  for (const [id, load] of [...loads].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) if (best === undefined || load < loads.get(best)!) best = id;
  return best;
}

export type { Placement };
