import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../common/paths.js';
import { measuredConfig } from '../../enclave/attestation/create-provider.js';
import { measureConfig } from '../../enclave/attestation/pcrs.js';
import type { Embedder } from '../../enclave/embedding/types.js';
import { Freshness, StaleCopyError, WitnessRefusedError, type PeerChannel, type Signed } from '../../enclave/cluster/freshness.js';
import { statement, TAGS } from '../../enclave/cluster/witness-book.js';
import { generateIdentity, generateServiceKeys } from '../../enclave/keys.js';
import { SupersededError } from '../../enclave/storage/errors.js';
import { HeadChain } from '../../enclave/storage/head-chain.js';
import { advanceHead, genesisHead, type StateHead } from '../../enclave/storage/state-head.js';

const STORE = 'ab'.repeat(16);

/** A chain of `n` heads after the store's genesis. */
function chain(n: number, salt = 'x'): { heads: StateHead[]; chain: HeadChain } {
  let head = genesisHead(STORE);
  const kept = HeadChain.startingAt(head);
  const heads = [head];
  for (let i = 0; i < n; i++) {
    head = advanceHead(head, Buffer.from(`${salt}${i}`));
    kept.push(head);
    heads.push(head);
  }
  return { heads, chain: kept };
}

/**
 * The host between enclaves: every message passes through it. By default it delivers each to
 * the enclave at the address; `tamper` lets a test play the host's moves.
 */
class Host implements PeerChannel {
  readonly enclaves = new Map<string, Freshness>();
  /** The last answers it saw, to replay. */
  readonly seen: Signed[] = [];
  tamper?: { witness?: (address: string, request: Signed) => Signed | Promise<Signed>; witnessed?: (address: string, shard: number, generation: number, nonce: Uint8Array) => Signed | Promise<Signed> };

  async witness(address: string, request: Signed): Promise<Signed> {
    const reply = this.tamper?.witness ? await this.tamper.witness(address, request) : this.at(address).answerWitness(request);
    this.seen.push(reply);
    return reply;
  }

  async witnessed(address: string, shard: number, generation: number, nonce: Uint8Array): Promise<Signed> {
    const reply = this.tamper?.witnessed ? await this.tamper.witnessed(address, shard, generation, nonce) : this.at(address).answerWitnessed(shard, generation, nonce);
    this.seen.push(reply);
    return reply;
  }

  at(address: string): Freshness {
    const enclave = this.enclaves.get(address);
    if (!enclave) throw new Error(`nothing at ${address}`);
    return enclave;
  }
}

/** Enclaves of one service (the same keys, as key sharing gives them) on one host. */
function service(count: number, witnesses: number) {
  const keys = generateServiceKeys();
  const host = new Host();
  const enclaves = Array.from({ length: count }, (_, i) => {
    const enclave = new Freshness(keys.identity, host, { witnesses, timeoutMs: 1000 });
    host.enclaves.set(`e${i}`, enclave);
    return enclave;
  });
  enclaves.forEach((enclave, i) => enclave.setPeers(enclaves.map((_, j) => `e${j}`).filter((_, j) => j !== i)));
  return { keys, host, enclaves };
}

const at = (head: StateHead) => ({ store: STORE, ...head });

/** The JSON body of a statement (its signature is not checked here). */
const bodyOf = (signed: Signed) => JSON.parse(Buffer.from(signed.statement).toString().split('\n')[1]) as Record<string, unknown>;

describe('freshness across enclaves: witnesses', () => {
  it('an owner\'s new head is kept by the members that confirm it, and an open finds the highest', async () => {
    const { enclaves: [a, b, c] } = service(3, 2);
    const { heads } = chain(3);
    await a.witness(1, 1, at(heads[2]));
    await a.witness(1, 1, at(heads[3]));
    expect(b.book.get(1)?.seq).toBe(3);
    expect(c.book.get(1)?.seq).toBe(3);
    // An older head told later (a replayed old request) lowers nothing.
    await a.witness(1, 1, at(heads[1]));
    expect(b.book.get(1)?.seq).toBe(3);
    const found = await b.highest(1, 2);
    expect(found).toMatchObject({ answers: 2, head: { seq: 3, hash: heads[3].hash } });
  });

  it('a write is not confirmed with fewer members than WITNESSES, and the refusal says so (503 witness_unavailable)', async () => {
    const { host, enclaves: [a] } = service(3, 2);
    host.enclaves.delete('e2'); // a member down
    const refusal = await a.witness(0, 1, at(chain(1).heads[1])).catch((err: unknown) => err);
    expect(refusal).toMatchObject({ status: 503, code: 'witness_unavailable' });
    expect((refusal as Error).message).toMatch(/confirmed by 1 of the 2 other members .* WITNESSES is 2/);
  });

  it('the heads of shards committed while a round is in flight travel together in the next: one request and one answer per member for all of them', async () => {
    const { host, enclaves: [a, b, c] } = service(3, 2);
    const { heads } = chain(4);
    const rounds: Array<{ address: string; shards: number[] }> = [];
    host.tamper = {
      witness: (address, request) => {
        rounds.push({ address, shards: (bodyOf(request).heads as Array<{ shard: number }>).map((h) => h.shard) });
        return host.at(address).answerWitness(request);
      },
    };
    // Shard 0's head goes at once; 1, 2 and 3 arrive while its round is out.
    await Promise.all([0, 1, 2, 3].map((shard) => a.witness(shard, 1, at(heads[shard + 1]))));
    expect(rounds).toEqual([{ address: 'e1', shards: [0] }, { address: 'e2', shards: [0] }, { address: 'e1', shards: [1, 2, 3] }, { address: 'e2', shards: [1, 2, 3] }]);
    for (const member of [b, c]) expect([0, 1, 2, 3].map((shard) => member.book.get(shard)?.seq)).toEqual([1, 2, 3, 4]);
  });

  it('a round\'s heads are checked one by one: a member that has seen a newer generation of one shard refuses that one, and the others are confirmed', async () => {
    const { enclaves: [a, b, m] } = service(3, 1);
    const { heads } = chain(2);
    a.setPeers(['e2']);
    b.setPeers(['e2']);
    await b.highest(1, 2);
    // Shard 5's round is out while shards 1 and 2 queue: they travel together.
    const [five, one, two] = await Promise.allSettled([a.witness(5, 1, at(heads[1])), a.witness(1, 1, at(heads[1])), a.witness(2, 1, at(heads[2]))]);
    expect(five.status).toBe('fulfilled');
    expect(one).toMatchObject({ status: 'rejected', reason: expect.any(SupersededError) });
    expect(two.status).toBe('fulfilled');
    expect([m.book.get(1), m.book.get(2)?.seq]).toEqual([undefined, 2]);
  });

  it('a request one of whose heads is malformed is refused whole, and records none of them; so is one with no heads', () => {
    const { keys, enclaves: [, b] } = service(2, 1);
    const signed = (heads: unknown[]) => {
      const bytes = statement(TAGS.witness, { nonce: '22'.repeat(16), heads });
      return { statement: bytes, signature: keys.identity.sign(bytes) };
    };
    expect(() => b.answerWitness(signed([{ shard: 0, generation: 1, head: at(chain(1).heads[1]) }, { shard: -1, generation: 1, head: at(chain(1).heads[1]) }]))).toThrow(WitnessRefusedError);
    expect(() => b.answerWitness(signed([]))).toThrow(WitnessRefusedError);
    expect(b.book.get(0)).toBeUndefined();
  });

  it('a witness request the host forges (signed by a key that is not the service\'s) is refused, and changes nothing', () => {
    const { enclaves: [, b] } = service(2, 1);
    const forger = generateIdentity();
    const bytes = statement(TAGS.witness, { nonce: '00'.repeat(16), heads: [{ shard: 0, generation: 1, head: at(chain(9).heads[9]) }] });
    expect(() => b.answerWitness({ statement: bytes, signature: forger.sign(bytes) })).toThrow(WitnessRefusedError);
    expect(b.book.get(0)).toBeUndefined();
  });

  it('a witness request altered in transit is refused', async () => {
    const { host, enclaves: [a, b] } = service(2, 1);
    host.tamper = {
      witness: (address, request) => {
        const altered = Buffer.from(Buffer.from(request.statement).toString().replace('"seq":2', '"seq":9'));
        return host.at(address).answerWitness({ statement: altered, signature: request.signature });
      },
    };
    await expect(a.witness(0, 1, at(chain(2).heads[2]))).rejects.toMatchObject({ code: 'witness_unavailable' });
    expect(b.book.get(0)).toBeUndefined();
  });

  it('the host cannot confirm a write itself: an answer it signs with its own key is not counted', async () => {
    const { host, enclaves: [a] } = service(2, 1);
    const forger = generateIdentity();
    host.tamper = {
      witness: (_address, request) => {
        // Everything right (it read the nonce and head from the request) but the signature.
        const { nonce, heads } = JSON.parse(Buffer.from(request.statement).toString().split('\n')[1]) as { nonce: string; heads: object[] };
        const bytes = statement(TAGS.ack, { nonce, instance: 'cd'.repeat(16), heads });
        return { statement: bytes, signature: forger.sign(bytes) };
      },
    };
    await expect(a.witness(0, 1, at(chain(2).heads[2]))).rejects.toMatchObject({ code: 'witness_unavailable' });
  });

  it('an old confirmation replayed is not counted (it names another nonce)', async () => {
    const { host, enclaves: [a] } = service(2, 1);
    const { heads } = chain(2);
    await a.witness(0, 1, at(heads[2]));
    const old = host.seen.at(-1)!;
    host.tamper = { witness: () => old };
    // Even for the very same head: the nonce is the round's own.
    await expect(a.witness(0, 1, at(heads[2]))).rejects.toMatchObject({ code: 'witness_unavailable' });
  });

  it('one member\'s confirmation is not counted twice (the host names it under two addresses)', async () => {
    const { host, enclaves: [a, b] } = service(3, 2);
    host.enclaves.set('e2', b); // e1 and e2 are the same enclave
    await expect(a.witness(0, 1, at(chain(1).heads[1]))).rejects.toMatchObject({ code: 'witness_unavailable' });
    // Nor its answer about the highest head.
    await expect(a.highest(0, 2)).rejects.toMatchObject({ code: 'witness_unavailable' });
  });

  it('the owner\'s own request reflected back to it is not a confirmation', async () => {
    const { host, enclaves: [a] } = service(2, 1);
    host.enclaves.set('e1', a);
    await expect(a.witness(0, 1, at(chain(1).heads[1]))).rejects.toMatchObject({ code: 'witness_unavailable' });
  });

  it('an answer about the highest head is counted only for its own request (nonce) and when signed by the service', async () => {
    const { host, enclaves: [a, b] } = service(2, 1);
    const { heads } = chain(2);
    await b.witness(0, 1, at(heads[2]));
    await a.highest(0, 2);
    const old = host.seen.at(-1)!;
    host.tamper = { witnessed: () => old };
    await expect(a.highest(0, 2)).rejects.toMatchObject({ code: 'witness_unavailable' });
    const forger = generateIdentity();
    host.tamper = {
      witnessed: (_address, shard, generation, nonce) => {
        const bytes = statement(TAGS.witnessed, { nonce: Buffer.from(nonce).toString('hex'), instance: 'cd'.repeat(16), shard, generation, head: null });
        return { statement: bytes, signature: forger.sign(bytes) };
      },
    };
    await expect(a.highest(0, 2)).rejects.toMatchObject({ code: 'witness_unavailable' });
  });

  it('known limit: the host that names to the new owner only enclaves that never witnessed the head gets the old copy accepted', async () => {
    const { enclaves: [a, b, c, d] } = service(4, 1);
    const { heads, chain: kept } = chain(3);
    // The host names only B to the owner A, and only D to the next owner C: B witnessed, D did not.
    a.setPeers(['e1']);
    c.setPeers(['e3']);
    await a.witness(0, 1, at(heads[3]));
    expect(b.book.get(0)?.seq).toBe(3);
    expect(d.book.get(0)).toBeUndefined();
    const { head } = await c.highest(0, 2);
    expect(head).toBeUndefined();
    expect(() => Freshness.check('shard 0', head, { storeId: STORE, head: heads[1], ancestry: (k) => kept.ancestry(k) })).not.toThrow();
    // Named to C, B alone is enough to catch it.
    c.setPeers(['e1']);
    const found = await c.highest(0, 2);
    expect(() => Freshness.check('shard 0', found.head, { storeId: STORE, head: heads[1], ancestry: () => 'no' })).toThrow(StaleCopyError);
  });

  it('a joining enclave takes the heads its sponsor witnessed, only if signed for its join', async () => {
    const { keys, enclaves: [a] } = service(1, 0);
    await a.witness(2, 1, at(chain(4).heads[4]));
    const digest = Buffer.alloc(32, 7);
    const signed = a.exportFor(digest);
    const joiner = new Freshness(keys.identity, new Host(), { witnesses: 1, timeoutMs: 1000 });
    expect(() => joiner.adopt(signed, Buffer.alloc(32, 8))).toThrow(WitnessRefusedError);
    const altered = Buffer.from(signed.statement.toString().replace('"seq":4', '"seq":9'));
    expect(() => joiner.adopt({ statement: altered, signature: signed.signature }, digest)).toThrow(WitnessRefusedError);
    expect(joiner.book.get(2)).toBeUndefined();
    expect(joiner.adopt(signed, digest)).toBe(1);
    expect(joiner.book.get(2)?.seq).toBe(4);
    // Heads the host dropped from the join: refused by a joiner that witnesses (it would start knowing nothing).
    const empty = { statement: new Uint8Array(0), signature: new Uint8Array(0) };
    expect(() => new Freshness(keys.identity, new Host(), { witnesses: 1, timeoutMs: 1000 }).adopt(empty, digest)).toThrow(/sent no witnessed heads/);
    expect(new Freshness(keys.identity, new Host(), { witnesses: 0, timeoutMs: 1000 }).adopt(empty, digest)).toBe(0);
  });
});


describe('freshness across enclaves: owner generations', () => {
  it('a member asked by a new owner (generation 2) refuses from then on to witness the shard for generation 1, and the old owner acknowledges nothing more', async () => {
    const { enclaves: [a, b, m] } = service(3, 1);
    const { heads } = chain(3);
    // The host names only M to each owner.
    a.setPeers(['e2']);
    b.setPeers(['e2']);
    await a.witness(0, 1, at(heads[1]));
    const asked = await b.highest(0, 2);
    expect(asked.head?.seq).toBe(1);
    const refusal = await a.witness(0, 1, at(heads[2])).catch((err: unknown) => err);
    expect(refusal).toBeInstanceOf(SupersededError);
    expect((refusal as Error).message).toBe('a member of the service has seen owner generation 2 of shard 0, above this owner\'s 1: the shard has a newer owner');
    expect(m.book.get(0)?.seq).toBe(1);
    // The old owner now knows: its next write is refused without asking anyone.
    a.setPeers([]);
    await expect(a.witness(0, 1, at(heads[3]))).rejects.toThrow(/this enclave has seen owner generation 2 of shard 0/);
    // Other shards, and the new owner's writes, are not concerned.
    await b.witness(0, 2, at(heads[2]));
    expect(m.book.get(0)?.seq).toBe(2);
    a.setPeers(['e2']);
    await a.witness(1, 1, at(heads[1]));
  });

  it('a new owner\'s question answered while the old owner waits for confirmations names the head, and the write is not acknowledged', async () => {
    const { host, enclaves: [a, b] } = service(3, 1);
    const { heads } = chain(2);
    a.setPeers(['e2']);
    b.setPeers(['e0']);
    let asked: Awaited<ReturnType<Freshness['highest']>> | undefined;
    // The host holds A's request to M until B has asked A (M, never asked, then confirms).
    host.tamper = {
      witness: async (address, request) => {
        asked = await b.highest(0, 2);
        return host.at(address).answerWitness(request);
      },
    };
    await expect(a.witness(0, 1, at(heads[2]))).rejects.toThrow(/this enclave has seen owner generation 2 of shard 0/);
    expect(asked?.head?.seq).toBe(2);
  });

  it('the new owner, as a member, witnesses nothing below its own generation', async () => {
    const { enclaves: [a, b] } = service(3, 1);
    a.setPeers(['e1']);
    b.setPeers(['e2']);
    await b.highest(0, 2);
    await expect(a.witness(0, 1, at(chain(1).heads[1]))).rejects.toThrow(/a member of the service has seen owner generation 2/);
    expect(b.book.get(0)).toBeUndefined();
  });

  it('the same generation, or a higher one, is witnessed; a lower one answered by a signed refusal naming the newer generation', () => {
    const { keys, enclaves: [, m] } = service(2, 1);
    const { heads } = chain(3);
    const request = (generation: number, head: StateHead) => {
      const bytes = statement(TAGS.witness, { nonce: '11'.repeat(16), heads: [{ shard: 0, generation, head: at(head) }] });
      return { statement: bytes, signature: keys.identity.sign(bytes) };
    };
    expect(bodyOf(m.answerWitnessed(0, 3, Buffer.alloc(16)))).toMatchObject({ generation: 3, head: null });
    expect(bodyOf(m.answerWitness(request(3, heads[1])))).toMatchObject({ heads: [{ shard: 0, generation: 3, head: { seq: 1 } }] });
    expect(bodyOf(m.answerWitness(request(4, heads[2])))).toMatchObject({ heads: [{ shard: 0, generation: 4, head: { seq: 2 } }] });
    const refused = m.answerWitness(request(3, heads[3]));
    expect(Buffer.from(refused.statement).toString().split('\n')[0]).toBe(TAGS.ack);
    expect(bodyOf(refused)).toMatchObject({ nonce: '11'.repeat(16), instance: m.instance, heads: [{ shard: 0, generation: 3, newer: 4 }] });
    expect(bodyOf(refused).heads).toEqual([{ shard: 0, generation: 3, newer: 4 }]);
    expect(m.book.get(0)?.seq).toBe(2);
    // A question for a lower generation is refused too, and one for the same answered.
    expect(bodyOf(m.answerWitnessed(0, 3, Buffer.alloc(16)))).toMatchObject({ generation: 3, newer: 4 });
    expect(bodyOf(m.answerWitnessed(0, 4, Buffer.alloc(16)))).toMatchObject({ generation: 4, head: { seq: 2 } });
  });

  it('a new owner whose question a member refuses (it has seen a higher generation) does not open', async () => {
    const { enclaves: [a, b, c] } = service(3, 1);
    c.setPeers(['e0']);
    await c.highest(0, 5);
    await expect(b.highest(0, 4)).rejects.toThrow(/a member of the service has seen owner generation 5 of shard 0, above this owner's 4/);
    // Nor does the enclave that was itself asked at 5 open at 4.
    await expect(a.highest(0, 4)).rejects.toThrow(/this enclave has seen owner generation 5/);
  });

  it('the generation is signed: a witness request whose generation the host raises or lowers is refused, and so is a refusal whose newer generation it changes', async () => {
    const { host, enclaves: [a, b, m] } = service(3, 1);
    a.setPeers(['e2']);
    b.setPeers(['e2']);
    await b.highest(0, 2);
    host.tamper = {
      witness: (address, request) => {
        const altered = Buffer.from(Buffer.from(request.statement).toString().replace('"generation":1', '"generation":2'));
        return host.at(address).answerWitness({ statement: altered, signature: request.signature });
      },
    };
    await expect(a.witness(0, 1, at(chain(1).heads[1]))).rejects.toMatchObject({ code: 'witness_unavailable' });
    expect(m.book.get(0)).toBeUndefined();
    // A refusal altered to name a generation no owner has: not counted as one (nor as a confirmation).
    host.tamper = {
      witness: (address, request) => {
        const refused = host.at(address).answerWitness(request);
        return { statement: Buffer.from(Buffer.from(refused.statement).toString().replace('"newer":2', '"newer":9')), signature: refused.signature };
      },
    };
    await expect(a.witness(0, 1, at(chain(1).heads[1]))).rejects.toMatchObject({ code: 'witness_unavailable' });
    expect(a.book.generation(0)).toBe(1);
  });

  it('a member\'s refusal replayed to another request (another nonce) is not counted as one', async () => {
    const { host, enclaves: [a, b, , d] } = service(4, 1);
    for (const e of [a, b, d]) e.setPeers(['e2']);
    await b.highest(0, 2);
    await expect(a.witness(0, 1, at(chain(1).heads[1]))).rejects.toBeInstanceOf(SupersededError);
    const refused = host.seen.at(-1)!;
    host.tamper = { witness: () => refused };
    await expect(d.witness(0, 1, at(chain(1).heads[1]))).rejects.toMatchObject({ code: 'witness_unavailable' });
    expect(d.book.generation(0)).toBe(1);
  });

  it('a question whose generation the host lowers in transit (it is not signed) binds the member to nothing, and its answer is not counted', async () => {
    const { host, enclaves: [a, b] } = service(2, 1);
    host.tamper = { witnessed: (address, shard, _generation, nonce) => host.at(address).answerWitnessed(shard, 0, nonce) };
    await expect(b.highest(0, 2)).rejects.toMatchObject({ code: 'witness_unavailable' });
    expect(a.book.generation(0)).toBe(0);
  });

  it('an enclave that joins takes its sponsor\'s generations with its heads, also for shards it witnessed no head of', async () => {
    const { keys, enclaves: [a, b] } = service(2, 1);
    await a.witness(2, 3, at(chain(4).heads[4]));
    await b.highest(5, 7);
    const digest = Buffer.alloc(32, 7);
    const joiner = new Freshness(keys.identity, new Host(), { witnesses: 1, timeoutMs: 1000 });
    expect(joiner.adopt(a.exportFor(digest), digest)).toBe(2);
    expect(joiner.book.generation(2)).toBe(3);
    expect(joiner.book.generation(5)).toBe(7);
    expect(joiner.book.get(5)).toBeUndefined();
    // So it refuses what its sponsor would.
    expect(bodyOf(joiner.answerWitnessed(5, 6, Buffer.alloc(16)))).toMatchObject({ newer: 7 });
  });
});

describe('freshness across enclaves: the new owner\'s check', () => {
  const { heads, chain: kept } = chain(5);
  const found = (n: number, c = kept) => ({ storeId: STORE, head: heads[n], ancestry: (known: StateHead) => c.ancestry(known) });

  it('accepts a store whose chain reaches the witnessed head (or passes it)', () => {
    expect(() => Freshness.check('shard 1', at(heads[5]), found(5))).not.toThrow();
    expect(() => Freshness.check('shard 1', at(heads[3]), found(5))).not.toThrow();
    expect(() => Freshness.check('shard 1', undefined, found(0))).not.toThrow();
  });

  it('refuses an older copy, naming both heads', () => {
    const older = chain(2);
    const refusal = (() => {
      try {
        Freshness.check('shard 1 (shard-01/)', at(heads[5]), { storeId: STORE, head: older.heads[2], ancestry: (k) => older.chain.ancestry(k) });
      } catch (err) {
        return err as Error;
      }
    })();
    expect(refusal).toBeInstanceOf(StaleCopyError);
    expect(refusal!.message).toContain(`its chain ends at state 2:${heads[2].hash.slice(0, 16)}`);
    expect(refusal!.message).toContain(`the witnessed state 5:${heads[5].hash.slice(0, 16)}`);
  });

  it('refuses an older copy written past the witnessed seq (a fork), and another store', () => {
    const fork = chain(8, 'y');
    expect(() => Freshness.check('shard 1', at(heads[5]), { storeId: STORE, head: fork.heads[8], ancestry: (k) => fork.chain.ancestry(k) })).toThrow(/another chain/);
    expect(() => Freshness.check('shard 1', { ...at(heads[5]), store: 'cd'.repeat(16) }, found(5))).toThrow(/files were replaced/);
  });
});

describe('freshness across enclaves: WITNESSES', () => {
  const pcr1 = (witnesses?: number) => measureConfig(measuredConfig({
    config: { teeMode: 'simulated', embeddingModel: 'static', nsmHelper: '/x', modelTlsPins: [], memoryUpstream: 'send', ...(witnesses === undefined ? {} : { witnesses }) },
    embedder: { id: 'static' } as Embedder,
    operatorKey: new Uint8Array(32).fill(1),
  }));

  it('is measured (PCR1) when above 0, so a host that lowers it starts an enclave other PCRs (which takes no keys); at 0 PCR1 is as before the setting', () => {
    expect(pcr1(1)).not.toEqual(pcr1(0));
    expect(pcr1(2)).not.toEqual(pcr1(1));
    expect(pcr1(0)).toEqual(pcr1());
  });

  it('an enclave with WITNESSES above 0 does not open shards at start (SHARDS_OPEN=all), which would skip asking the members: it stops with the reason', () => {
    const run = spawnSync(process.execPath, [join(repoRoot, 'dist/enclave/main.js')], {
      env: { ...process.env, WITNESSES: '1', SHARDS_OPEN: 'all', HOST_STORE_ADDR: '127.0.0.1:1', LOG_LEVEL: 'silent' }, encoding: 'utf8', timeout: 30_000,
    });
    expect(run.status, run.stderr).toBe(2);
    expect(run.stderr).toContain('WITNESSES=1 needs SHARDS_OPEN=none');
  });
});
