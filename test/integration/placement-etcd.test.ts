import * as grpc from '@grpc/grpc-js';
import { Etcd3 } from 'etcd3';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { Controller, type ControllerOptions } from '../../placement/controller.js';
import type { HeldShards, ShardHosts } from '../../placement/enclave-admin.js';
import { Member } from '../../placement/member.js';
import { ShardMap } from '../../placement/shard-map.js';
import { waitFor } from '../helpers/service.js';
import { startEtcd, type RunningEtcd } from '../helpers/etcd.js';

/**
 * The placement logic against a real etcd. The enclaves are stand-ins that keep which shards
 * they hold and at which generation, and refuse a lower generation than they have seen, as
 * the sealed store does (the real RPCs are exercised by cluster.test.ts).
 */
class StandInEnclaves implements ShardHosts {
  readonly enclaves = new Map<string, { alive: boolean; open: Map<number, number>; prepared: Set<number> }>();
  /** Highest generation each shard's "store" has seen (the fence). */
  readonly fence = new Map<number, number>();
  readonly calls: string[] = [];
  /** Opens sent to an enclave that was gone (each a shard left unplaced for a back-off). */
  readonly failedOpens: string[] = [];
  /** Shards an enclave holds but no longer lists (taken over by a newer owner while it was away). */
  readonly hidden = new Map<string, Set<number>>();

  /** Opens to refuse, per shard: with which gRPC code, and how many more times. */
  readonly refuse = new Map<number, { code: number; times: number }>();
  /** Opens asked for, per shard. */
  readonly attempts = new Map<number, number>();
  /** The members each enclave was told of (SetPeers). */
  readonly peers = new Map<string, string[]>();

  constructor(readonly count: number) {}

  add(address: string): void {
    this.enclaves.set(address, { alive: true, open: new Map(), prepared: new Set() });
  }

  private get(address: string) {
    const e = this.enclaves.get(address);
    if (!e?.alive) throw new Error(`${address} unreachable`);
    return e;
  }

  async health(address: string): Promise<void> {
    this.get(address);
  }

  async shards(address: string): Promise<HeldShards> {
    const e = this.get(address);
    return { count: this.count, open: new Map(e.open), prepared: new Map([...e.prepared].map((s) => [s, 0])) };
  }

  async open(address: string, shard: number, generation: number): Promise<void> {
    if (!this.enclaves.get(address)?.alive) this.failedOpens.push(`${address} ${shard}`);
    const e = this.get(address);
    this.attempts.set(shard, (this.attempts.get(shard) ?? 0) + 1);
    const refusal = this.refuse.get(shard);
    if (refusal && refusal.times > 0) {
      refusal.times--;
      throw Object.assign(new Error(`shard ${shard} refused`), { code: refusal.code });
    }
    if (this.openMs > 0) await new Promise((r) => setTimeout(r, this.openMs));
    if ((this.fence.get(shard) ?? 0) > generation) throw new Error(`shard ${shard} names generation ${this.fence.get(shard)}, above ${generation}`);
    this.fence.set(shard, generation);
    e.open.set(shard, generation);
    this.calls.push(`open ${address} ${shard}${e.prepared.delete(shard) ? ' from its read-ahead' : ''}`);
  }

  /** PrepareShard fails (an enclave without it, a store that cannot be read ahead): the move goes on without it. */
  prepareFails = false;
  /** PREPARED_SHARDS_MAX of every stand-in. */
  preparedMax = Infinity;

  async prepare(address: string, shard: number): Promise<void> {
    const e = this.get(address);
    this.calls.push(`prepare ${address} ${shard}`);
    if (this.prepareFails) throw new Error(`shard ${shard} cannot be read ahead`);
    // As the enclave: refused for a shard it serves.
    if (e.open.has(shard)) throw new Error(`shard ${shard} is served by ${address}`);
    if (!e.prepared.has(shard) && e.prepared.size >= this.preparedMax) throw Object.assign(new Error(`${address} keeps ${e.prepared.size} read ahead`), { code: grpc.status.RESOURCE_EXHAUSTED });
    e.prepared.add(shard);
  }

  async close(address: string, shard: number): Promise<void> {
    this.get(address).open.delete(shard);
    this.get(address).prepared.delete(shard);
    this.hidden.get(address)?.delete(shard);
    this.calls.push(`close ${address} ${shard}`);
  }

  /** How long OpenShard takes (a recovery). */
  openMs = 0;

  /** How long SetPeers takes to answer (a busy enclave). */
  setPeersMs = 0;

  /** SetPeers calls each enclave answered. */
  readonly namings = new Map<string, number>();

  async setPeers(address: string, peers: string[]): Promise<void> {
    this.get(address);
    if (this.setPeersMs > 0) await new Promise((r) => setTimeout(r, this.setPeersMs));
    this.peers.set(address, peers);
    this.namings.set(address, (this.namings.get(address) ?? 0) + 1);
  }

  holders(shard: number): string[] {
    return [...this.enclaves].filter(([, e]) => e.alive && e.open.has(shard) && e.open.get(shard) === this.fence.get(shard)).map(([a]) => a);
  }
}

const log = createLogger('placement-test', 'silent');
let etcd: RunningEtcd;
let client: Etcd3;
let prefixes = 0;
const freshPrefix = () => `/placement-test-${++prefixes}`;

beforeAll(async () => {
  etcd = await startEtcd();
  client = new Etcd3({ hosts: `http://${etcd.endpoint}` });
}, 120_000);

afterAll(async () => {
  client?.close();
  await etcd?.stop();
});

const startMembers = (prefix: string, hosts: StandInEnclaves, ids: string[]) => ids.map((id) => {
  hosts.add(`${id}:1`);
  const member = new Member(client, hosts, { id, address: `${id}:1`, prefix, ttlSeconds: 2 }, log);
  member.start();
  return member;
});

/**
 * A placement as these tests run it: stand-in enclaves registered as members `ids` under a
 * fresh prefix, the shard map, and a controller started once every member is listed; `run`
 * gets the map, and the controller and members are stopped after it, whatever happens.
 */
async function withPlacement(hosts: StandInEnclaves, ids: string[], run: (placement: { map: ShardMap }) => Promise<void>, passMs = 200, standbys?: ControllerOptions['standbys'], controllerLog = log): Promise<void> {
  const prefix = freshPrefix();
  const members = startMembers(prefix, hosts, ids);
  const map = new ShardMap(client, prefix);
  const controller = new Controller(client, hosts, { id: 'c', prefix, ttlSeconds: 2, passMs, standbys }, controllerLog);
  try {
    await waitFor(async () => (await map.read()).members.size === ids.length, 10_000);
    controller.start();
    await run({ map });
  } finally {
    await controller.stop();
    await Promise.all(members.map((m) => m.stop(true)));
  }
}

describe('the shard map in etcd', () => {
  it('refuses a change made on a stale read, and each assignment\'s generation is above every earlier one', async () => {
    const map = new ShardMap(client, freshPrefix());
    const first = await map.read();
    const g1 = await map.assign(0, 'a', undefined, first);
    expect(g1).toBeGreaterThan(0);
    // A second writer that read before the first wrote: refused (the entry is no longer absent).
    expect(await map.assign(0, 'b', undefined, first)).toBeUndefined();
    const second = await map.read();
    const seen = second.shards.get(0)!;
    expect(seen).toMatchObject({ owner: 'a', generation: g1 });
    await client.put('/unrelated').value('x'); // other writes raise the revision in between
    const g2 = await map.assign(0, 'b', seen, second);
    expect(g2).toBeGreaterThan(g1!);
    // The same stale entry again: refused, and the map keeps b.
    expect(await map.assign(0, 'c', seen, second)).toBeUndefined();
    expect((await map.read()).shards.get(0)).toMatchObject({ owner: 'b', generation: g2 });
  });

  it('writes the shard count once', async () => {
    const map = new ShardMap(client, freshPrefix());
    expect(await map.settleCount(4)).toBe(4);
    expect(await map.settleCount(8)).toBe(4);
    expect((await map.read()).count).toBe(4);
  });
});

describe('membership', () => {
  it('each enclave is told the addresses of the other members (whom it asks to witness its writes)', async () => {
    const prefix = freshPrefix();
    const hosts = new StandInEnclaves(1);
    const members = startMembers(prefix, hosts, ['p1', 'p2', 'p3']);
    try {
      await waitFor(async () => ['p1', 'p2', 'p3'].every((id) => hosts.peers.get(`${id}:1`)?.length === 2), 15_000);
      expect(hosts.peers.get('p2:1')).toEqual(['p1:1', 'p3:1']);
      await members[0].stop(true);
      await waitFor(async () => hosts.peers.get('p2:1')?.join() === 'p3:1', 15_000);
    } finally {
      await Promise.all(members.map((m) => m.stop(true)));
    }
  }, 60_000);

  it('an enclave is told the members again when they change or its Health failed (it may have restarted), not on every renewal', async () => {
    const prefix = freshPrefix();
    const hosts = new StandInEnclaves(1);
    const members = startMembers(prefix, hosts, ['q1', 'q2']);
    try {
      await waitFor(async () => hosts.peers.get('q1:1')?.length === 1 && hosts.peers.get('q2:1')?.length === 1, 15_000);
      await new Promise((r) => setTimeout(r, 1500));
      const told = hosts.namings.get('q1:1');
      // About 4 renewals at a TTL of 2 s, fewer than the safety net's RENAME_EVERY_TICKS: the same members are not named again.
      await new Promise((r) => setTimeout(r, 2700));
      expect(hosts.namings.get('q1:1')).toBe(told);
      // A third member registers: told at once (the watch), not at the safety net.
      members.push(...startMembers(prefix, hosts, ['q3']));
      await waitFor(async () => hosts.peers.get('q1:1')?.join() === 'q2:1,q3:1', 4000);
      // q1's enclave stops answering for less than its lease and comes back knowing no members (a restart): told again.
      hosts.enclaves.get('q1:1')!.alive = false;
      await new Promise((r) => setTimeout(r, 900));
      hosts.peers.delete('q1:1');
      hosts.enclaves.get('q1:1')!.alive = true;
      await waitFor(async () => hosts.peers.get('q1:1')?.join() === 'q2:1,q3:1', 4000);
    } finally {
      await Promise.all(members.map((m) => m.stop(true)));
    }
  }, 60_000);

  it('a slow SetPeers (a busy enclave) does not put off the lease\'s renewal: the member stays registered', async () => {
    const prefix = freshPrefix();
    const hosts = new StandInEnclaves(1);
    hosts.setPeersMs = 2500; // more than the TTL
    const [member] = startMembers(prefix, hosts, ['slow']);
    const map = new ShardMap(client, prefix);
    const deletions: number[] = [];
    const watcher = await client.watch().prefix(`${prefix}/members/`).create();
    watcher.on('delete', () => deletions.push(Date.now()));
    try {
      await waitFor(async () => (await map.read()).members.has('slow'), 10_000);
      await new Promise((r) => setTimeout(r, 7000));
      expect(deletions).toEqual([]);
      expect((await map.read()).members.has('slow')).toBe(true);
    } finally {
      await watcher.cancel();
      await member.stop(true);
    }
  }, 60_000);

  it('a member is registered while its enclave answers, and gone one lease after it stops answering', async () => {
    const prefix = freshPrefix();
    const hosts = new StandInEnclaves(1);
    hosts.add('10.0.0.1:1');
    const member = new Member(client, hosts, { id: 'm1', address: '10.0.0.1:1', prefix, ttlSeconds: 2 }, log);
    member.start();
    const map = new ShardMap(client, prefix);
    await waitFor(async () => (await map.read()).members.get('m1') === '10.0.0.1:1', 10_000);
    // Still there after more than a TTL while the enclave answers (renewed).
    await new Promise((r) => setTimeout(r, 3000));
    expect((await map.read()).members.has('m1')).toBe(true);
    hosts.enclaves.get('10.0.0.1:1')!.alive = false;
    await waitFor(async () => !(await map.read()).members.has('m1'), 15_000);
    // Answering again: registered again.
    hosts.enclaves.get('10.0.0.1:1')!.alive = true;
    await waitFor(async () => (await map.read()).members.has('m1'), 10_000);
    await member.stop(true);
    await waitFor(async () => !(await map.read()).members.has('m1'), 5_000);
  }, 60_000);
});

describe('the controller', () => {
  it('of two candidates, one leads; when it stops, the other takes over', async () => {
    const prefix = freshPrefix();
    const hosts = new StandInEnclaves(2);
    const a = new Controller(client, hosts, { id: 'ca', prefix, ttlSeconds: 2, passMs: 200 }, log);
    const b = new Controller(client, hosts, { id: 'cb', prefix, ttlSeconds: 2, passMs: 200 }, log);
    a.start();
    await waitFor(async () => a.leader, 10_000);
    b.start();
    await new Promise((r) => setTimeout(r, 1000));
    expect([a.leader, b.leader]).toEqual([true, false]);
    await a.stop();
    await waitFor(async () => b.leader, 10_000);
    expect(a.leader).toBe(false);
    await b.stop();
  }, 30_000);

  it('a controller that lost its leadership cannot change the map', async () => {
    const prefix = freshPrefix();
    const hosts = new StandInEnclaves(2);
    const a = new Controller(client, hosts, { id: 'ca', prefix, ttlSeconds: 2, passMs: 200 }, log);
    a.start();
    await waitFor(async () => a.leader, 10_000);
    const guard = (a as unknown as { guard: string }).guard;
    await a.stop();
    const view = await a.map.read();
    expect(await a.map.assign(0, 'x', undefined, view, guard)).toBeUndefined();
    expect(await a.map.assign(0, 'x', undefined, view)).toBeDefined();
  }, 30_000);

  it('places every shard evenly at start, and moves a lost member\'s shards to the others with higher generations', async () => {
    const hosts = new StandInEnclaves(6);
    await withPlacement(hosts, ['e1', 'e2', 'e3'], async ({ map }) => {
      await waitFor(async () => [0, 1, 2, 3, 4, 5].every((s) => hosts.holders(s).length === 1), 20_000);
      const before = await map.read();
      expect(before.count).toBe(6);
      const owners = [...before.shards.values()].map((p) => p.owner);
      expect(owners.filter((o) => o === 'e1')).toHaveLength(2);
      expect(owners.filter((o) => o === 'e2')).toHaveLength(2);
      expect(owners.filter((o) => o === 'e3')).toHaveLength(2);
      const lost = [...before.shards].filter(([, p]) => p.owner === 'e2').map(([s]) => s);

      hosts.enclaves.get('e2:1')!.alive = false; // killed: no answer, its lease lapses
      await waitFor(async () => lost.every((s) => hosts.holders(s).length === 1 && hosts.holders(s)[0] !== 'e2:1'), 20_000);
      const after = await map.read();
      for (const s of lost) {
        expect(after.shards.get(s)!.owner).not.toBe('e2');
        expect(after.shards.get(s)!.generation).toBeGreaterThan(before.shards.get(s)!.generation);
      }
      // Straight to live members: never to the lost one.
      expect(hosts.failedOpens).toEqual([]);
      // The others' shards stayed where they were, at their generation.
      for (const [s, p] of before.shards) if (!lost.includes(s)) expect(after.shards.get(s)).toMatchObject({ owner: p.owner, generation: p.generation });
    });
  }, 60_000);

  it('a new leader waits for members that keep joining (one window after the last), so members started seconds apart all get shards', async () => {
    const hosts = new StandInEnclaves(6);
    const prefix = freshPrefix();
    const map = new ShardMap(client, prefix);
    const members = startMembers(prefix, hosts, ['j1']);
    const controller = new Controller(client, hosts, { id: 'c', prefix, ttlSeconds: 2, passMs: 200, settleMs: 2000 }, log);
    try {
      await waitFor(async () => (await map.read()).members.size === 1, 10_000);
      controller.start();
      await waitFor(async () => controller.leader, 10_000);
      // The second joins within the first window, the third after it (but within the second's).
      await new Promise((r) => setTimeout(r, 1000));
      members.push(...startMembers(prefix, hosts, ['j2']));
      await waitFor(async () => (await map.read()).members.size === 2, 10_000);
      await new Promise((r) => setTimeout(r, 1200));
      members.push(...startMembers(prefix, hosts, ['j3']));
      await waitFor(async () => [0, 1, 2, 3, 4, 5].every((s) => hosts.holders(s).length === 1), 30_000);
      const owners = [...(await map.read()).shards.values()].map((p) => p.owner).sort();
      expect(owners).toEqual(['j1', 'j1', 'j2', 'j2', 'j3', 'j3']);
    } finally {
      await controller.stop();
      await Promise.all(members.map((m) => m.stop(true)));
    }
  }, 60_000);

  it('when the whole service starts again, each shard goes back to its owner as the members come back seconds apart, not all to the first one back', async () => {
    const hosts = new StandInEnclaves(6);
    const prefix = freshPrefix();
    const map = new ShardMap(client, prefix);
    const options = { id: 'c', prefix, ttlSeconds: 2, passMs: 200, settleMs: 2000 };
    const members = startMembers(prefix, hosts, ['r1', 'r2', 'r3']);
    let controller = new Controller(client, hosts, options, log);
    const placed = async () => [0, 1, 2, 3, 4, 5].every((s) => hosts.holders(s).length === 1);
    const owners = async () => [...(await map.read()).shards].sort(([a], [b]) => a - b).map(([, p]) => p.owner);
    try {
      await waitFor(async () => (await map.read()).members.size === 3, 10_000);
      controller.start();
      await waitFor(placed, 20_000);
      const before = await owners();
      expect(new Set(before)).toEqual(new Set(['r1', 'r2', 'r3']));

      // Everything stops, and starts again (hosts.add: each enclave holds nothing), a member a second apart.
      await controller.stop();
      await Promise.all(members.splice(0).map((m) => m.stop(true)));
      members.push(...startMembers(prefix, hosts, ['r1']));
      controller = new Controller(client, hosts, options, log);
      await waitFor(async () => (await map.read()).members.size === 1, 10_000);
      controller.start();
      await new Promise((r) => setTimeout(r, 1000));
      members.push(...startMembers(prefix, hosts, ['r2']));
      await new Promise((r) => setTimeout(r, 1000));
      members.push(...startMembers(prefix, hosts, ['r3']));
      await waitFor(placed, 30_000);
      expect(await owners()).toEqual(before);
    } finally {
      await controller.stop();
      await Promise.all(members.map((m) => m.stop(true)));
    }
  }, 60_000);

  it('a planned move has the new owner read the shard ahead, closes it on its owner before the map changes, and opens it on the new one', async () => {
    const hosts = new StandInEnclaves(2);
    await withPlacement(hosts, ['m1', 'm2'], async ({ map }) => {
      await waitFor(async () => hosts.holders(0).length === 1 && hosts.holders(1).length === 1, 20_000);
      const before = (await map.read()).shards.get(0)!;
      const to = before.owner === 'm1' ? 'm2' : 'm1';
      hosts.calls.length = 0;
      await map.requestMove(0, to);
      await waitFor(async () => hosts.holders(0)[0] === `${to}:1` && (await map.read()).moves.size === 0, 20_000);
      expect(hosts.calls).toEqual([`prepare ${to}:1 0`, `close ${before.owner}:1 0`, `open ${to}:1 0 from its read-ahead`]);
      expect((await map.read()).shards.get(0)!.generation).toBeGreaterThan(before.generation);
      // Once OpenShard answered, the shard is marked opened at its new generation (for the proxy, waiting on the open).
      await waitFor(async () => { const view = await map.read(); return view.opened.get(0) === view.shards.get(0)!.generation; }, 10_000);
      // A shard opened behind the map's back (an enclave restarted with a stale view) is closed there.
      hosts.enclaves.get(`${before.owner}:1`)!.open.set(0, before.generation);
      await waitFor(async () => !hosts.enclaves.get(`${before.owner}:1`)!.open.has(0), 10_000);
      // A read-ahead that fails costs only the shortcut: the move goes on, the open a full one.
      hosts.prepareFails = true;
      hosts.calls.length = 0;
      const moved = (await map.read()).shards.get(0)!;
      await map.requestMove(0, before.owner);
      await waitFor(async () => hosts.holders(0)[0] === `${before.owner}:1` && (await map.read()).moves.size === 0, 20_000);
      expect(hosts.calls).toEqual([`prepare ${before.owner}:1 0`, `close ${to}:1 0`, `open ${before.owner}:1 0`]);
      expect((await map.read()).shards.get(0)!.generation).toBeGreaterThan(moved.generation);
    });
  }, 60_000);

  it('with standbys: each shard read ahead on one member other than its owner, spread evenly; a lost owner\'s shards go to their standbys, which get standbys again', async () => {
    const hosts = new StandInEnclaves(6);
    await withPlacement(hosts, ['s1', 's2', 's3'], async ({ map }) => {
      const standbyOf = (s: number) => [...hosts.enclaves].filter(([, e]) => e.alive && e.prepared.has(s)).map(([a]) => a);
      const ready = async () => {
        const view = await map.read();
        return [0, 1, 2, 3, 4, 5].every((s) => hosts.holders(s).length === 1 && standbyOf(s).length === 1 && standbyOf(s)[0] !== `${view.shards.get(s)?.owner}:1`);
      };
      await waitFor(ready, 20_000);
      const counts = (addresses: string[]) => addresses.reduce((m, a) => m.set(a, (m.get(a) ?? 0) + 1), new Map<string, number>());
      expect([...counts([0, 1, 2, 3, 4, 5].map((s) => standbyOf(s)[0])).values()]).toEqual([2, 2, 2]);

      const before = await map.read();
      const lost = [...before.shards].filter(([, p]) => p.owner === 's2').map(([s]) => s);
      const standbys = new Map(lost.map((s) => [s, standbyOf(s)[0]]));
      hosts.calls.length = 0;
      hosts.openMs = 1000;
      hosts.enclaves.get('s2:1')!.alive = false;
      await waitFor(async () => lost.every((s) => hosts.holders(s).length === 1 && hosts.holders(s)[0] !== 's2:1'), 20_000);
      for (const s of lost) {
        expect(hosts.holders(s)).toEqual([standbys.get(s)]);
        expect(hosts.calls).toContain(`open ${standbys.get(s)} ${s} from its read-ahead`);
      }
      // No standby read began while the failover's opens ran (they would share the members' CPU).
      const lastOpen = Math.max(...lost.map((s) => hosts.calls.indexOf(`open ${standbys.get(s)} ${s} from its read-ahead`)));
      expect(hosts.calls.slice(0, lastOpen).filter((c) => c.startsWith('prepare'))).toEqual([]);
      // Standbys again, on the member left beside each owner; none on the lost one.
      await waitFor(ready, 20_000);
      for (let s = 0; s < 6; s++) expect(standbyOf(s)[0]).not.toBe('s2:1');
    }, 200, { refreshMs: 60_000, keepMs: 600_000 });
  }, 60_000);

  it('with standbys filling an enclave\'s read-aheads, a planned move to it withdraws one standby to read the moving shard ahead', async () => {
    const hosts = new StandInEnclaves(6);
    hosts.preparedMax = 2;
    await withPlacement(hosts, ['f1', 'f2', 'f3'], async ({ map }) => {
      const standbyOf = (s: number) => [...hosts.enclaves].find(([, e]) => e.prepared.has(s))?.[0];
      await waitFor(async () => [0, 1, 2, 3, 4, 5].every((s) => hosts.holders(s).length === 1 && standbyOf(s) !== undefined), 20_000);
      const before = await map.read();
      const [shard, from] = [...before.shards].find(([, p]) => p.owner === 'f1')!;
      // The member neither owner nor standby of the shard, its two read-aheads taken.
      const to = ['f2', 'f3'].find((id) => `${id}:1` !== standbyOf(shard))!;
      expect(hosts.enclaves.get(`${to}:1`)!.prepared.size).toBe(2);
      hosts.calls.length = 0;
      await map.requestMove(shard, to);
      await waitFor(async () => hosts.holders(shard)[0] === `${to}:1` && (await map.read()).moves.size === 0, 20_000);
      const i = hosts.calls.indexOf(`prepare ${to}:1 ${shard}`);
      expect(hosts.calls.slice(i, i + 5)).toEqual([
        `prepare ${to}:1 ${shard}`, expect.stringMatching(new RegExp(`^close ${to}:1 \\d$`)), `prepare ${to}:1 ${shard}`, `close ${from.owner}:1 ${shard}`, `open ${to}:1 ${shard} from its read-ahead`,
      ]);
    }, 200, { refreshMs: 60_000, keepMs: 600_000 });
  }, 60_000);

  it('reopens a shard its live owner no longer holds (restarted within its lease) with a new generation', async () => {
    const hosts = new StandInEnclaves(1);
    await withPlacement(hosts, ['r1'], async ({ map }) => {
      await waitFor(async () => hosts.holders(0).length === 1, 20_000);
      const g = (await map.read()).shards.get(0)!.generation;
      hosts.enclaves.get('r1:1')!.open.clear(); // restarted: holds nothing
      await waitFor(async () => hosts.holders(0).length === 1, 20_000);
      expect((await map.read()).shards.get(0)!.generation).toBeGreaterThan(g);
    });
  }, 60_000);

  it('opens each shard once, even when a member\'s answer to Shards predates the end of an open', async () => {
    // Found by `npm run bench -- cluster`: a pass that asked the members while an open was under way,
    // and reached the shard after it ended, took the old answer for "not open on its owner" and
    // reopened the shard with a new generation, a second whole recovery (24 s for a 25k shard).
    class SlowAnswers extends StandInEnclaves {
      override async shards(address: string): Promise<HeldShards> {
        const answer = await super.shards(address);
        await new Promise((r) => setTimeout(r, 150));
        return answer;
      }

      override async open(address: string, shard: number, generation: number): Promise<void> {
        await new Promise((r) => setTimeout(r, 100 + 50 * shard));
        return super.open(address, shard, generation);
      }
    }
    const hosts = new SlowAnswers(6);
    await withPlacement(hosts, ['o1', 'o2'], async () => {
      await waitFor(async () => [0, 1, 2, 3, 4, 5].every((s) => hosts.holders(s).length === 1), 20_000);
      // Several passes more, each asking the members again.
      await new Promise((r) => setTimeout(r, 1000));
      const opens = hosts.calls.filter((c) => c.startsWith('open '));
      expect(opens.sort()).toEqual([...new Set(opens)].sort());
      expect(opens).toHaveLength(6);
    }, 50);
  }, 60_000);

  it('closes, once it is back, the shards a member held when it lost its lease (it no longer lists them)', async () => {
    const hosts = new StandInEnclaves(2);
    await withPlacement(hosts, ['s1', 's2'], async ({ map }) => {
      await waitFor(async () => hosts.holders(0).length === 1 && hosts.holders(1).length === 1, 20_000);
      const [shard, lost] = [...(await map.read()).shards].find(([, p]) => p.owner === 's1')!;
      // s1 stops answering: its lease lapses and its shard moves; it still holds it, unlisted.
      const s1 = hosts.enclaves.get('s1:1')!;
      s1.alive = false;
      await waitFor(async () => (await map.read()).shards.get(shard)!.owner === 's2' && hosts.holders(shard)[0] === 's2:1', 20_000);
      s1.open.delete(shard);
      hosts.hidden.set('s1:1', new Set([shard]));
      hosts.calls.length = 0;
      s1.alive = true;
      await waitFor(async () => hosts.hidden.get('s1:1')!.size === 0, 20_000);
      expect(hosts.calls).toContain(`close s1:1 ${shard}`);
      expect(lost.generation).toBeLessThan((await map.read()).shards.get(shard)!.generation);
    });
  }, 60_000);
  it('an open refused as unservable (DATA_LOSS: e.g. an older copy than an enclave witnessed) is not tried again until a move is asked for; one that failed otherwise is', async () => {
    const hosts = new StandInEnclaves(2);
    hosts.refuse.set(0, { code: grpc.status.DATA_LOSS, times: Infinity });
    hosts.refuse.set(1, { code: grpc.status.UNAVAILABLE, times: 3 });
    const lines: Array<{ level: number; msg: string; shard?: number; failures?: number }> = [];
    const recording = pino({ level: 'debug' }, { write: (line: string) => { lines.push(JSON.parse(line)); } });
    await withPlacement(hosts, ['d1'], async ({ map }) => {
      // Shard 1 is opened at its fourth try, after three back-offs: by then shard 0 was tried once.
      await waitFor(async () => hosts.holders(1).length === 1, 30_000);
      expect(hosts.attempts.get(1)).toBe(4);
      expect(hosts.attempts.get(0)).toBe(1);
      expect(hosts.holders(0)).toEqual([]);
      // Only an open that succeeded is marked for the proxy.
      await waitFor(async () => (await map.read()).opened.get(1) === (await map.read()).shards.get(1)!.generation, 10_000);
      expect((await map.read()).opened.has(0)).toBe(false);
      // The operator's move (here to the same member, once the store is fixed) tries it again.
      hosts.refuse.delete(0);
      await map.requestMove(0, 'd1');
      await waitFor(async () => hosts.holders(0).length === 1, 20_000);
    }, 200, undefined, recording);
    // A failure that is tried again is info the first time, a warning the second, then quiet (an error
    // only once it keeps failing): a cluster that starts before its members can answer each other logs no error.
    const failed = lines.filter((l) => l.shard === 1 && /^OpenShard/.test(l.msg));
    expect(failed.map((l) => [l.level, l.failures])).toEqual([[30, 1], [40, 2], [20, 3]]);
    expect(lines.filter((l) => l.level >= 50 && l.shard === 1)).toEqual([]);
  }, 60_000);

});

