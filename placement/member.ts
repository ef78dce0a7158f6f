import { EtcdLeaseInvalidError, type Etcd3, type Lease, type Watcher } from 'etcd3';
import type { Logger } from '../common/logger.js';
import { clusterKeys } from './cluster-keys.js';
import type { ShardHosts } from './enclave-admin.js';

export interface MemberOptions {
  id: string;
  /** The enclave's gRPC address, as the proxy and the controller dial it. */
  address: string;
  prefix: string;
  ttlSeconds: number;
}

/**
 * Ticks between two namings of the peers while nothing says they changed: a safety net only
 * (a change of the members is seen by a watch, an enclave restarted by its Health failing).
 */
export const RENAME_EVERY_TICKS = 10;

/**
 * An enclave's registration in etcd, kept by the host process beside it: `<prefix>/members/<id>`
 * = its address, under a lease that is renewed only after the enclave answered Health. So the
 * lease lives as long as the enclave answers: an enclave killed, stopped or cut off loses it
 * one TTL after its last answer, and the controller moves its shards. A lease lost while the
 * enclave still answers (etcd unreachable for a TTL) is granted anew.
 */
export class Member {
  private lease?: Lease;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private registered = false;
  /** SetPeers in flight, if any. */
  private naming?: Promise<void>;
  /**
   * Whether the enclave must be told the members again: they changed (the watch), its Health
   * failed (it may have restarted and know none), or the last naming failed. Naming every tick
   * cost each enclave and its placement process two round trips a second at rest.
   */
  private peersStale = true;
  /** The watch saw the members change while the enclave was being told them. */
  private changedWhileNaming = false;
  /** Ticks since the enclave was last told the members. */
  private sinceNamed = 0;
  private watcher?: Watcher;

  constructor(private readonly client: Etcd3, private readonly hosts: ShardHosts, private readonly options: MemberOptions, private readonly log: Logger) {}

  start(): void {
    void this.watchMembers();
    void this.tick();
  }

  private async watchMembers(): Promise<void> {
    const watcher = await this.client.watch().prefix(clusterKeys(this.options.prefix).members).create().catch(() => undefined);
    if (!watcher) return; // named on the safety net's ticks only
    if (this.stopped) return void watcher.cancel().catch(() => undefined);
    this.watcher = watcher;
    // Named at once, not at the next tick: a shard opened meanwhile on this enclave (a cluster
    // starting, its members seconds apart) would find no member to ask what it witnessed.
    const stale = () => {
      this.peersStale = true;
      if (this.naming) this.changedWhileNaming = true;
      else if (this.registered) this.nameMembers();
    };
    // 'connected' too: events missed while the watch was down are not replayed.
    watcher.on('put', stale);
    watcher.on('delete', stale);
    watcher.on('connected', stale);
    watcher.on('error', () => undefined);
  }

  /** Stops renewing; `revoke` also deletes the registration at once (a planned stop). */
  async stop(revoke: boolean): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    void this.watcher?.cancel().catch(() => undefined);
    const lease = this.lease;
    this.lease = undefined;
    if (!lease) return;
    if (revoke) await lease.revoke().catch(() => undefined);
    else lease.release();
  }

  private async tick(): Promise<void> {
    const period = (this.options.ttlSeconds * 1000) / 3;
    const started = Date.now();
    try {
      await this.hosts.health(this.options.address);
      await this.renew();
      // Not waited for: a slow answer (a busy enclave) would put off the next renewal, and a lease
      // renewed a third of the TTL after a tick that took half of it lapses while the enclave lives.
      this.sinceNamed++;
      if (this.peersStale || this.sinceNamed >= RENAME_EVERY_TICKS) this.nameMembers();
    } catch (err) {
      if (this.registered) this.log.warn({ member: this.options.id, err: String(err) }, 'enclave not answering or etcd not reachable; lease not renewed');
      this.registered = false;
      this.peersStale = true;
    }
    // A third of the TTL from this tick's start, not its end: a slow Health does not stretch the gap.
    if (!this.stopped) this.timer = setTimeout(() => void this.tick(), Math.max(0, period - (Date.now() - started)));
  }

  /** Tells the enclave the members, unless it is being told already (not waited for). */
  private nameMembers(): void {
    if (this.naming || this.stopped) return;
    this.peersStale = false;
    this.sinceNamed = 0;
    this.naming = this.tellPeers()
      .catch((err: unknown) => {
        this.peersStale = true;
        this.log.warn({ member: this.options.id, err: String(err) }, 'could not name the other members to the enclave');
      })
      .finally(() => {
        this.naming = undefined;
        // The members changed while it was being told: again, now (a failed naming waits for the next tick).
        if (this.changedWhileNaming) {
          this.changedWhileNaming = false;
          this.nameMembers();
        }
      });
  }

  /**
   * Names the other members to the enclave, as etcd lists them now (whom it asks to witness its
   * writes, and what they witnessed when it opens a shard). The host's word like the rest: the
   * enclave counts only signed answers of other enclaves of the service, WITNESSES of them.
   */
  private async tellPeers(): Promise<void> {
    if (!this.hosts.setPeers) return;
    const registered = await this.client.getAll().prefix(clusterKeys(this.options.prefix).members).strings();
    const peers = Object.values(registered).filter((address) => address !== this.options.address).sort();
    await this.hosts.setPeers(this.options.address, peers);
  }

  private async renew(): Promise<void> {
    if (this.lease) {
      const res = await this.lease.keepaliveOnce().catch((err: unknown) => {
        if (err instanceof EtcdLeaseInvalidError) return { TTL: '0' };
        throw err;
      });
      if (Number(res.TTL) > 0) return;
      this.log.warn({ member: this.options.id }, 'lease expired; registering again');
      this.lease.release();
      this.lease = undefined;
    }
    const lease = this.client.lease(this.options.ttlSeconds, { autoKeepAlive: false });
    lease.on('lost', () => undefined); // a lost lease is found by the next keepalive
    await lease.put(clusterKeys(this.options.prefix).member(this.options.id)).value(this.options.address).exec();
    if (this.stopped) {
      await lease.revoke().catch(() => undefined);
      return;
    }
    this.lease = lease;
    this.registered = true;
    this.log.info({ member: this.options.id, address: this.options.address, ttlSeconds: this.options.ttlSeconds }, 'member registered');
  }
}
