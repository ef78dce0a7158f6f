import * as grpc from '@grpc/grpc-js';
import type { Campaign, Etcd3, Watcher } from 'etcd3';
import type { Logger } from '../common/logger.js';
import type { ShardHosts, HeldShards } from './enclave-admin.js';
import { ShardMap, type ClusterView, type Placement } from './shard-map.js';
import { chooseStandbys, readDue, type StandbyOptions, type StandbyRead } from './standbys.js';

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
  /** Warm standbys (STANDBYS=on): each shard kept read ahead on another member, which takes it first when its owner is lost. Unset: none. */
  standbys?: StandbyOptions;
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
 * - a shard without a live owner (never placed, or its owner's lease expired) goes to its
 *   standby if it answers (its OpenShard then reads only the log written since the standby's
 *   read), else to the live member holding the fewest, with a new generation, and is opened there;
 * - a shard its live owner does not hold at its generation (the enclave restarted within its
 *   lease, or an open failed) gets a new generation and is opened again on the same owner;
 * - a shard a member holds but the map gives elsewhere is closed there (the fence would stop
 *   it at its next write anyway; closing ends its stale reads at once);
 * - with standbys: each placed shard gets a standby (placement/standbys.ts), which is asked to
 *   read it ahead (PrepareShard, one read at a time per member, none waited for by the pass) and
 *   again when its read is due; a read-ahead a member keeps but no longer stands by for is closed.
 */
/** The longest a new leader waits for members to stop joining, in settle windows. */
const SETTLE_ROUNDS = 5;
/** A shard whose open keeps failing is logged as an error every this many tries (about 15 s at first, then every 50 s). */
const OPEN_FAILURES_PER_ERROR = 5;

/**
 * How a failed open of a shard, tried again after a back-off, is logged by its count in a row. A
 * first failure is often a cluster starting (its members not yet named to each other, the host
 * store not up yet) and the next try succeeds: info. A second is a warning; one that keeps
 * failing is an error every OPEN_FAILURES_PER_ERROR tries, and quiet in between.
 */
export function openFailureLevel(failures: number): 'info' | 'warn' | 'debug' | 'error' {
  if (failures % OPEN_FAILURES_PER_ERROR === 0) return 'error';
  return failures === 1 ? 'info' : failures === 2 ? 'warn' : 'debug';
}

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
  /** A cold start (no member served or kept read ahead any shard) whose members may still be registering. */
  private restarting = false;
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
  /** Each shard's standby (member id), as last chosen. */
  private standbyOf = new Map<number, string>();
  /** Each shard's standby's last read, as this controller saw it end. */
  private readonly standbyReads = new Map<number, StandbyRead>();
  /** Standby reads in flight: member → its shard (one at a time per member: a read is a shard's whole recovery of CPU). */
  private readonly reading = new Map<string, { shard: number; done: Promise<void> }>();
  /** Each shard's owner head as last seen, and since when it has not moved (a burst of writes over: its standby catches up). */
  private readonly ownerHeads = new Map<number, { seq: number; since: number }>();
  /** After a failed standby read, when that shard's may be tried again. */
  private readonly standbyRetryAt = new Map<number, number>();
  /** Each member's most read-aheads at once, as its enclave last said (Shards): what it may stand by for. */
  private readonly readAheadMax = new Map<string, number>();

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
    await Promise.allSettled([...this.opening.values(), ...[...this.reading.values()].map((r) => r.done)]);
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

    // No member serves or keeps read ahead any shard: the whole service starts again (every
    // enclave restarted). Its members register seconds apart, and a shard whose owner is not back
    // yet waits for them as an unplaced one does, so that each goes back to its owner instead of
    // all to the first one back. (A lost owner's shards with a standby reading them are not cold.)
    // Once the first owners back open their shards the service is no longer cold, but the others'
    // owners may still be coming: the wait lasts until no member joined for a settle window.
    if (this.opening.size === 0 && [...held.values()].every((h) => !h || (h.open.size === 0 && !h.prepared?.size))) this.restarting = true;
    if (this.restarting && !this.settling(true)) this.restarting = false;
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
        if ((!seen || this.restarting) && this.settling(this.restarting)) continue;
        // Its standby first (it holds the shard read ahead); else only members that answered are
        // candidates (a lost owner is not in `loads`).
        const standby = this.standbyOf.get(shard);
        target = seen && standby !== undefined && loads.has(standby) && standby !== seen.owner ? standby : leastLoaded(loads);
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
      const standby = this.standbyOf.get(shard) === target;
      if (standby) this.standbyOf.delete(shard);
      this.log.info({ shard, owner: target, generation, from: seen?.owner, reason: seen ? (seen.owner === target ? 'not open on its owner' : 'owner gone') : 'unplaced', ...(standby ? { standby, readSeq: this.standbyReads.get(shard)?.seq } : {}) }, 'shard assigned');
      this.standbyReads.delete(shard);
      void this.startOpen(shard, target, view.members.get(target)!, generation);
    }
    await this.tendStandbys(view, held, inFlight);
  }

  /**
   * Names each live owner's shard a standby, withdraws read-aheads no longer stood by for (a
   * CloseShard, awaited: it must not overtake a later open), and starts the reads that are due,
   * without waiting for them: a failover in the meantime is handled by the next pass.
   */
  private async tendStandbys(view: ClusterView, held: Map<string, HeldShards | undefined>, inFlight: Set<number>): Promise<void> {
    const options = this.options.standbys;
    if (!options || !this.hosts.prepare) return;
    const owners = new Map<number, string>();
    for (const [shard, p] of view.shards) if (view.members.has(p.owner) && !this.opening.has(shard) && !inFlight.has(shard)) owners.set(shard, p.owner);
    // Live members (by their lease), not only those that answered this pass: one slow to answer
    // Shards on a busy machine keeps its standbys, whose reads would otherwise move and start over.
    const before = this.standbyOf;
    for (const [id, h] of held) if (h?.preparedMax) this.readAheadMax.set(id, h.preparedMax);
    this.standbyOf = chooseStandbys(owners, [...view.members.keys()], before, this.readAheadMax);
    for (const [shard, id] of this.standbyOf) if (before.get(shard) !== id) this.log.info({ shard, standby: id, was: before.get(shard), owner: owners.get(shard) }, 'standby named');
    // Shards being opened keep the standby they had (their open may fail and the owner stay lost).
    for (const [shard, id] of before) if (!owners.has(shard) && view.members.has(id) && view.shards.get(shard)?.owner !== id) this.standbyOf.set(shard, id);

    const now = Date.now();
    const withdrawing: Array<Promise<void>> = [];
    const due: Array<{ shard: number; id: string; first: boolean }> = [];
    for (const [id, h] of held) {
      if (!h?.prepared) continue;
      for (const [shard, seq] of h.prepared) {
        if (this.standbyOf.get(shard) === id) {
          const read = this.standbyReads.get(shard);
          // A read this controller did not see end (a new leader): counted from now.
          if (read?.member !== id) this.standbyReads.set(shard, { member: id, at: now, seq });
          continue;
        }
        if (this.opening.has(shard) || inFlight.has(shard) || view.shards.get(shard)?.owner === id || this.reading.get(id)?.shard === shard) continue;
        this.log.info({ shard, member: id }, 'standby withdrawn: closing its read-ahead');
        withdrawing.push(this.hosts.close(view.members.get(id)!, shard).catch((err: unknown) => this.log.warn({ shard, member: id, err: String(err) }, 'close of a read-ahead failed')));
      }
    }
    await Promise.all(withdrawing);
    // No read starts while a shard is being opened (a failover's): a read is a whole recovery of
    // CPU on a member, and the open it would slow is what the clients of that shard wait for.
    if (this.opening.size > 0) return;
    for (const [shard, owner] of owners) {
      const seq = held.get(owner)?.heads?.get(shard);
      if (seq !== undefined && this.ownerHeads.get(shard)?.seq !== seq) this.ownerHeads.set(shard, { seq, since: now });
    }
    for (const [shard, id] of this.standbyOf) {
      if (!owners.has(shard) || !held.get(id) || this.reading.has(id) || (this.standbyRetryAt.get(shard) ?? 0) > now) continue;
      const preparedSeq = held.get(id)?.prepared?.get(shard);
      const head = this.ownerHeads.get(shard);
      if (readDue(this.standbyReads.get(shard), id, preparedSeq, held.get(owners.get(shard)!)?.heads?.get(shard), now, options, head?.since)) due.push({ shard, id, first: preparedSeq === undefined });
    }
    // Shards without any read-ahead before refreshes; one read a member.
    due.sort((a, b) => Number(b.first) - Number(a.first) || a.shard - b.shard);
    for (const { shard, id } of due) if (!this.reading.has(id)) this.startStandbyRead(shard, id, view.members.get(id)!, options.keepMs);
  }

  private startStandbyRead(shard: number, id: string, address: string, keepMs: number): void {
    const started = Date.now();
    const done = this.hosts.prepare!(address, shard, keepMs).then(
      (seq) => {
        this.standbyRetryAt.delete(shard);
        this.standbyReads.set(shard, { member: id, at: Date.now(), seq: typeof seq === 'number' ? seq : 0 });
        this.log.info({ shard, standby: id, seq, ms: Date.now() - started }, 'standby read the shard ahead');
      },
      (err: unknown) => {
        // Its enclave keeps as many read-aheads as it may, serves the shard now, or failed: later.
        this.standbyRetryAt.set(shard, Date.now() + (((err as { code?: number }).code === grpc.status.RESOURCE_EXHAUSTED) ? 60_000 : 10_000));
        this.log.warn({ shard, standby: id, err: err instanceof Error ? err.message : String(err) }, 'standby read failed');
      },
    ).finally(() => {
      if (this.reading.get(id)?.done === done) this.reading.delete(id);
    });
    this.reading.set(id, { shard, done });
  }

  /**
   * Whether shards never placed (or, `cold`, placed on members not back yet) should wait: members
   * may still be registering. After an election, until no member joined for a settle window (at
   * most SETTLE_ROUNDS windows); in a cold start, until no member joined for a window, whenever
   * the leader was elected.
   */
  private settling(cold = false): boolean {
    const settle = this.options.settleMs ?? 0;
    const now = Date.now();
    if (cold && now < this.answeringSince + settle) return true;
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
        const prepare = () => this.hosts.prepare!(address, shard);
        await prepare().catch(async (err: unknown) => {
          // The new owner keeps as many read-aheads as it may (its standbys): one of them makes room
          // for the move's, and gets read again later.
          const room = (err as { code?: number }).code === grpc.status.RESOURCE_EXHAUSTED ? await this.makeRoom(move.to, address, shard) : false;
          if (!room) throw err;
          return prepare();
        }).then(
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

  /** Closes one read-ahead a member keeps as a standby (not of `shard`), for a planned move's; whether one was. */
  private async makeRoom(id: string, address: string, shard: number): Promise<boolean> {
    const other = [...this.standbyOf].find(([s, m]) => m === id && s !== shard && this.reading.get(id)?.shard !== s)?.[0];
    if (other === undefined) return false;
    this.standbyOf.delete(other);
    this.standbyReads.delete(other);
    this.log.info({ shard: other, member: id, for: shard }, 'standby withdrawn for a planned move\'s read-ahead');
    await this.hosts.close(address, other).catch(() => undefined);
    return true;
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
        const retryInMs = Math.min(10_000, 250 * 2 ** failures);
        this.retryAt.set(shard, Date.now() + retryInMs);
        this.log[openFailureLevel(failures)]({ shard, owner, generation, failures, retryInMs, err: err instanceof Error ? err.message : String(err) },
          failures === 1 ? 'OpenShard failed; trying again' : 'OpenShard still failing; trying again');
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
