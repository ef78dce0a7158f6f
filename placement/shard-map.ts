import type { Etcd3, IKeyValue } from 'etcd3';
import { MAX_SHARDS } from '../protocol/shards.js';
import { clusterKeys, type ClusterKeys } from './cluster-keys.js';

/** One shard's place: its owner (a member id) and the owner generation it was given. */
export interface Placement {
  owner: string;
  generation: number;
  /** The etcd mod revision of this entry: a change is conditioned on it. */
  modRevision: string;
}

/** Everything under the prefix, read at one etcd revision. */
export interface ClusterView {
  /** The etcd revision the view was read at. */
  revision: number;
  /** Shard count, once a controller has written it. */
  count?: number;
  /** Live members: id → gRPC address. */
  members: Map<string, string>;
  /** Each live member's registration (the create revision of its key: new at each new lease). */
  registrations: Map<string, string>;
  shards: Map<number, Placement>;
  /** Planned moves asked for: shard → target member id (with the request's mod revision). */
  moves: Map<number, { to: string; modRevision: string }>;
  /** The generation each shard was last opened at by its owner (markOpened): its placement's, once the owner serves it. */
  opened: Map<number, number>;
}

/**
 * The shard map in etcd: read whole at one revision, and changed only by transactions
 * conditioned on what was read (the entry's mod revision, or its absence), so two writers
 * that read the same map cannot both change an entry. Each new assignment's generation is
 * above the revision the writer read, and so above every generation written before (each
 * was at most the revision of its own write): generations only grow, and can be the
 * enclave's owner generation.
 */
export class ShardMap {
  readonly keys: ClusterKeys;

  constructor(private readonly client: Etcd3, prefix: string) {
    this.keys = clusterKeys(prefix);
  }

  async read(): Promise<ClusterView> {
    const res = await this.client.getAll().prefix(this.keys.prefix).exec();
    return parseView(this.keys, Number(res.header.revision), res.kvs);
  }

  /**
   * Gives `shard` to `owner` if its entry is still `seen` (undefined: still absent) and, when
   * `guard` is given, that key still exists (the controller's election key: a controller that
   * lost its leadership writes nothing). Returns the new generation, or undefined when the
   * condition failed (someone wrote first: read again).
   */
  async assign(shard: number, owner: string, seen: Placement | undefined, view: Pick<ClusterView, 'revision'>, guard?: string): Promise<number | undefined> {
    const generation = view.revision + 1;
    const key = this.keys.shard(shard);
    let txn = seen ? this.client.if(key, 'Mod', '==', seen.modRevision) : this.client.if(key, 'Create', '==', 0);
    if (guard) txn = txn.and(guard, 'Create', '>', 0);
    const res = await txn.then(this.client.put(key).value(JSON.stringify({ owner, generation }))).commit();
    return res.succeeded ? generation : undefined;
  }

  /** Writes the shard count if none is written yet; returns the count in etcd (this one or the earlier). */
  async settleCount(count: number): Promise<number> {
    const res = await this.client.if(this.keys.count, 'Create', '==', 0)
      .then(this.client.put(this.keys.count).value(String(count)))
      .else(this.client.get(this.keys.count))
      .commit();
    if (res.succeeded) return count;
    const kv = res.responses[0]?.response_range?.kvs[0];
    return parseCount(kv?.value.toString()) ?? count;
  }

  /** Asks the controller to move `shard` to member `to` (a planned move). */
  async requestMove(shard: number, to: string): Promise<void> {
    await this.client.put(this.keys.move(shard)).value(to).exec();
  }

  /**
   * Records that `shard`'s owner has opened it at `generation` (OpenShard answered), for the
   * proxy, which otherwise backs off blindly while a new owner opens. Only a hint: an enclave
   * refuses what it does not hold whatever this says, so a wrong mark costs a retry.
   */
  async markOpened(shard: number, generation: number): Promise<void> {
    await this.client.put(this.keys.openedAt(shard)).value(String(generation)).exec();
  }

  /** Removes a move request, if it is still the one seen. */
  async clearMove(shard: number, modRevision: string): Promise<void> {
    await this.client.if(this.keys.move(shard), 'Mod', '==', modRevision).then(this.client.delete().key(this.keys.move(shard))).commit();
  }
}

export function parseView(keys: ClusterKeys, revision: number, kvs: IKeyValue[]): ClusterView {
  const view: ClusterView = { revision, members: new Map(), registrations: new Map(), shards: new Map(), moves: new Map(), opened: new Map() };
  for (const kv of kvs) {
    const key = kv.key.toString();
    const value = kv.value.toString();
    if (key === keys.count) view.count = parseCount(value);
    else if (key.startsWith(keys.members)) {
      view.members.set(key.slice(keys.members.length), value);
      view.registrations.set(key.slice(keys.members.length), kv.create_revision);
    }
    else if (key.startsWith(keys.shards)) {
      const index = shardIndex(key.slice(keys.shards.length));
      const placement = parsePlacement(value, kv.mod_revision);
      if (index !== undefined && placement) view.shards.set(index, placement);
    } else if (key.startsWith(keys.moves)) {
      const index = shardIndex(key.slice(keys.moves.length));
      if (index !== undefined) view.moves.set(index, { to: value, modRevision: kv.mod_revision });
    } else if (key.startsWith(keys.opened)) {
      const index = shardIndex(key.slice(keys.opened.length));
      const generation = /^\d{1,15}$/.test(value) ? Number(value) : undefined;
      if (index !== undefined && generation !== undefined) view.opened.set(index, generation);
    }
  }
  return view;
}

function shardIndex(text: string): number | undefined {
  if (!/^\d{1,2}$/.test(text)) return undefined;
  const index = Number(text);
  return index < MAX_SHARDS ? index : undefined;
}

function parseCount(text: string | undefined): number | undefined {
  if (!text || !/^\d{1,2}$/.test(text)) return undefined;
  const count = Number(text);
  return count >= 1 && count <= MAX_SHARDS ? count : undefined;
}

/** An entry that does not parse is treated as no entry (the controller writes it anew). */
function parsePlacement(text: string, modRevision: string): Placement | undefined {
  try {
    const value = JSON.parse(text) as { owner?: unknown; generation?: unknown };
    if (typeof value.owner !== 'string' || !Number.isSafeInteger(value.generation) || (value.generation as number) < 1) return undefined;
    return { owner: value.owner, generation: value.generation as number, modRevision };
  } catch {
    return undefined;
  }
}
