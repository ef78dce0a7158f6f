/**
 * Where placement lives in etcd, under one prefix (ETCD_PREFIX). etcd is run by the host, so
 * everything here is the host's business: a wrong or hostile map costs availability, never
 * a forked chain, because each enclave's sealed store refuses an owner of a lower generation
 * (enclave/storage, the fence entry).
 *
 *   <prefix>/members/<id>   an enclave's gRPC address, under that enclave's lease
 *   <prefix>/shards/<i>     {"owner": <id>, "generation": <n>}: shard i's owner and its fencing token
 *   <prefix>/count          the number of shards (written once, by the first controller)
 *   <prefix>/moves/<i>      a planned move of shard i: the id of the member to move it to
 *   <prefix>/opened/<i>     the generation shard i was last opened at by its owner (the controller, once OpenShard
 *                           answers): the proxy, waiting on a new owner still opening, retries then
 *   <prefix>/controller/    the controller's election
 */
export interface ClusterKeys {
  prefix: string;
  members: string;
  shards: string;
  moves: string;
  opened: string;
  count: string;
  election: string;
  member(id: string): string;
  shard(index: number): string;
  move(index: number): string;
  openedAt(index: number): string;
}

export function clusterKeys(prefix: string): ClusterKeys {
  const p = prefix.replace(/\/+$/, '');
  return {
    prefix: `${p}/`,
    members: `${p}/members/`,
    shards: `${p}/shards/`,
    moves: `${p}/moves/`,
    opened: `${p}/opened/`,
    count: `${p}/count`,
    election: `${p}/controller`,
    member: (id) => `${p}/members/${id}`,
    shard: (index) => `${p}/shards/${index}`,
    move: (index) => `${p}/moves/${index}`,
    openedAt: (index) => `${p}/opened/${index}`,
  };
}

/** A member id names a key: letters, digits, dot, dash, underscore. */
export const memberIdPattern = /^[A-Za-z0-9._-]{1,64}$/;
