/**
 * Freshness across enclaves (#38 item 5): a host that restores an old copy of a shard is
 * caught by the next owner while any enclave that witnessed a newer head lives, not only by
 * clients that saw one.
 *
 *   owner  → members  Witness {nonce, heads: [{shard, generation, head}]}   after a group commit is durable,
 *                                                                 before it is acknowledged; the heads of the
 *                                                                 owner's shards committed meanwhile travel together
 *   member → owner    ack {nonce, instance, heads: [{shard, generation, head} | {shard, generation, newer}]}
 *                                                                 the member keeps the highest head per shard, or
 *                                                                 names the higher generation it has seen
 *   new owner → members  Witnessed {shard, generation, nonce}      before OpenShard opens the store
 *   member → new owner   {nonce, instance, shard, generation, head} the highest it witnessed
 *   member → new owner   refused {nonce, instance, shard, generation, newer}  the generation is lower than
 *                                                                 one the member has seen for the shard
 *
 * The new owner refuses a store whose chain does not reach the highest head answered (or its
 * own), naming both. `generation` is the owner's: the fencing token of the shard map that
 * OpenShard receives. A member that has seen generation g for a shard (asked by a new owner,
 * witnessed with, or its own) witnesses nothing of that shard for a lower one, and an owner told
 * so (or asked at a higher one itself) acknowledges nothing more (SupersededError: the store stops
 * as when fenced). Each member checks, records and answers in one turn of its event loop, so of a
 * write's confirmation and a new owner's question that reach the same enclave, either the question
 * comes first and the write is refused, or the write does and the answer names its head: with the
 * enclaves that confirm a write and those that answer a new owner sharing one, an old owner's
 * write cannot be acknowledged while a new owner opens a copy without it (docs/cluster.md).
 * Every message passes through the host, so each statement is signed with
 * the service's signing key (only attested enclaves of the service hold it: key-sharing.ts):
 * the host cannot forge a witness or an answer. Each answer names the asker's fresh nonce and
 * the answering enclave's random instance id, and answers are counted once per instance, never
 * the asker's own: the host cannot replay one answer as two, an old one as new, or reflect a
 * request back to its sender. A write needs WITNESSES acknowledgements (measured in PCR1, so
 * the host cannot lower it), an open WITNESSES answers.
 *
 * What the host still decides: who the members are (SetPeers). It can hide members, or start
 * fresh enclaves (each a real attested one, which knows what its sponsor knew when it joined),
 * so it can keep the enclaves that witnessed a head away from the one it opens the shard on;
 * docs/cluster.md says what that bounds.
 */
import { randomBytes } from 'node:crypto';
import { ApiError, unavailable } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { Ancestry } from '../../protocol/response-signature.js';
import { CorruptStoreError, SupersededError } from '../storage/errors.js';
import type { StateHead } from '../storage/state-head.js';
import { describeWitnessed, headIn, higher, isGeneration, isNonce, isShard, openStatement, statement, TAGS, WitnessBook, type WitnessedHead } from './witness-book.js';

/** A head waiting for its members' confirmations, and its caller. */
interface QueuedHead {
  shard: number;
  generation: number;
  head: WitnessedHead;
  resolve: () => void;
  reject: (err: Error) => void;
  /** The instances that confirmed it. */
  confirmed: Set<string>;
  settled: boolean;
}

/** At most this many heads in one round (one per shard is ever queued; a member refuses more). */
const MAX_HEADS_PER_ROUND = 4096;

/** A statement and the service key's signature over it. */
export interface Signed {
  statement: Uint8Array;
  signature: Uint8Array;
}

/** How an enclave reaches the others (gRPC through the host: peer-client.ts). */
export interface PeerChannel {
  witness(address: string, request: Signed, timeoutMs: number): Promise<Signed>;
  witnessed(address: string, shard: number, generation: number, nonce: Uint8Array, timeoutMs: number): Promise<Signed>;
  /** The addresses in use changed: channels to others may go. */
  keepOnly?(addresses: readonly string[]): void;
}

export interface FreshnessOptions {
  /** WITNESSES: other members that must confirm each new head before its writes are acknowledged, and answer before a shard opens. */
  witnesses: number;
  /** WITNESS_TIMEOUT_MS: how long one member's answer is waited for. */
  timeoutMs: number;
  log?: Logger;
}

/** The service's signing key, as key-sharing hands it to every member. */
export interface SigningKey {
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}

/** A witness request that is not the service's (forged, altered, or of another service): refused. */
export class WitnessRefusedError extends Error {
  override name = 'WitnessRefusedError';
}

/** The store is an older copy than a member witnessed (a restored copy): DATA_LOSS at OpenShard, naming both heads. */
export class StaleCopyError extends CorruptStoreError {
  override name = 'StaleCopyError';
}

/** What the store found when opening, checked before it writes anything (StoreOptions.acceptHead). */
export interface FoundStore {
  storeId: string;
  head: StateHead;
  ancestry(known: StateHead): Ancestry;
}

export class Freshness {
  /** This enclave process: answers are counted once per instance, never this one's. */
  readonly instance = randomBytes(16).toString('hex');
  readonly book = new WitnessBook();
  private peers: string[] = [];
  /** Heads waiting for the next round (witness()), and whether one is in flight. */
  private queued: QueuedHead[] = [];
  private roundInFlight = false;

  constructor(private readonly key: SigningKey, private readonly channel: PeerChannel, private readonly options: FreshnessOptions) {}

  get witnesses(): number {
    return this.options.witnesses;
  }

  /** The host names the other members (their addresses). */
  setPeers(addresses: readonly string[]): void {
    const peers = [...new Set(addresses.filter((a) => a.length > 0))].sort();
    if (peers.join(',') === this.peers.join(',')) return;
    this.peers = peers;
    this.channel.keepOnly?.(peers);
    this.options.log?.info({ peers }, 'members to witness with (named by the host)');
  }

  /**
   * The owner's side, once per group commit: records `head` and waits until WITNESSES members
   * confirmed it. Rejects with 503 witness_unavailable when fewer did (the batch is durable and
   * applied, but not acknowledged), and with SupersededError when this enclave or a member has
   * seen a generation of the shard above `generation` (the owner's).
   *
   * The heads of this enclave's shards travel together: one round (a signed request to every
   * member, one signed answer from each) is in flight at a time, and heads that arrive meanwhile
   * go in the next, as writes do in a group commit. A round costs each enclave a message on a
   * member's stream and a signature or two whatever it carries, and an enclave of several shards
   * would otherwise pay it for each shard's commit of one or two writes.
   */
  async witness(shard: number, generation: number, head: WitnessedHead): Promise<void> {
    // Checked and recorded in one turn: a new owner's question answered before this refuses the
    // write, one answered after it names the head.
    this.refuseIfSuperseded(shard, generation);
    this.book.raise(shard, generation);
    this.book.record(shard, head);
    if (this.options.witnesses === 0) return;
    return new Promise((resolve, reject) => {
      this.queued.push({ shard, generation, head, resolve, reject, confirmed: new Set(), settled: false });
      if (!this.roundInFlight) this.nextRound();
    });
  }

  /** Sends every queued head in one round, if any are queued. */
  private nextRound(): void {
    const items = this.queued.splice(0, MAX_HEADS_PER_ROUND);
    if (items.length === 0) return;
    this.roundInFlight = true;
    const needed = this.options.witnesses;
    const nonce = randomBytes(16).toString('hex');
    const request = this.sign(statement(TAGS.witness, { nonce, heads: items.map(({ shard, generation, head }) => ({ shard, generation, head: plain(head) })) }));
    const peers = this.peers;
    let pending = peers.length;
    let open = items.length;
    const settle = (item: QueuedHead, err?: Error) => {
      if (item.settled) return;
      item.settled = true;
      open--;
      if (err) item.reject(err);
      else item.resolve();
      if (open === 0) {
        this.roundInFlight = false;
        this.nextRound();
      }
    };
    const check = () => {
      for (const item of items) {
        if (item.settled) continue;
        if (item.confirmed.size >= needed) {
          // Asked by a newer owner while it waited: acknowledges nothing more.
          try {
            this.refuseIfSuperseded(item.shard, item.generation);
            settle(item);
          } catch (err) {
            settle(item, err as Error);
          }
        } else if (pending === 0) {
          settle(item, witnessUnavailable(item.shard, item.head, item.confirmed.size, needed, peers.length));
        }
      }
    };
    for (const address of peers) {
      this.channel.witness(address, request, this.options.timeoutMs).then((reply) => {
        const body = openStatement(TAGS.ack, reply.statement, reply.signature, this.key.publicKey);
        const answers = body && Array.isArray(body.heads) ? body.heads as unknown[] : undefined;
        if (!body || body.nonce !== nonce || !this.otherInstance(body.instance) || !answers || answers.length !== items.length) {
          this.options.log?.warn({ shards: items.map((i) => i.shard), peer: address }, 'a witness answer was not valid (not signed by the service, for another request, or this enclave\'s own): not counted');
          return;
        }
        const instance = body.instance as string;
        items.forEach((item, i) => {
          const answer = objectOr(answers[i]);
          if (answer.shard !== item.shard || answer.generation !== item.generation) return;
          if (isGeneration(answer.newer) && answer.newer > item.generation) {
            settle(item, this.superseded(item.shard, item.generation, answer.newer, 'a member of the service'));
            return;
          }
          const acked = headIn(objectOr(answer.head));
          if (acked && sameWitnessed(acked, item.head)) item.confirmed.add(instance);
        });
      }, (err: unknown) => {
        this.options.log?.warn({ shards: items.map((i) => i.shard), peer: address, err: err instanceof Error ? err.message : String(err) }, 'a member did not witness the shards\' new heads');
      }).finally(() => {
        pending--;
        check();
      });
    }
    check();
  }

  /**
   * A member's side: keeps each of the owner's heads that is the service's and higher, and
   * confirms it; refuses one (naming the newer generation) when the owner's generation is lower
   * than one it has seen for the shard. One signed answer, its items in the request's order.
   */
  answerWitness(request: Signed): Signed {
    const body = openStatement(TAGS.witness, request.statement, request.signature, this.key.publicKey);
    const items = body && Array.isArray(body.heads) && body.heads.length > 0 && body.heads.length <= MAX_HEADS_PER_ROUND
      ? (body.heads as unknown[]).map((item) => {
        const entry = objectOr(item);
        const head = headIn(objectOr(entry.head));
        return head && isShard(entry.shard) && isGeneration(entry.generation) ? { shard: entry.shard, generation: entry.generation, head } : undefined;
      })
      : undefined;
    if (!body || !isNonce(body.nonce) || !items || items.some((item) => item === undefined)) {
      throw new WitnessRefusedError('the witness request is not a statement signed by this service');
    }
    const heads = (items as Array<{ shard: number; generation: number; head: WitnessedHead }>).map(({ shard, generation, head }) => {
      const newer = this.book.generation(shard);
      if (generation < newer) {
        this.options.log?.warn({ shard, generation, newer }, 'refused to witness for an owner generation lower than one seen for the shard');
        return { shard, generation, newer };
      }
      this.book.raise(shard, generation);
      if (this.book.record(shard, head)) this.options.log?.debug({ shard, generation, seq: head.seq }, 'witnessed a shard\'s new head');
      return { shard, generation, head: plain(head) };
    });
    return this.sign(statement(TAGS.ack, { nonce: body.nonce, instance: this.instance, heads }));
  }

  /**
   * A member's side: the highest head of `shard` it witnessed (or none), for the asker's nonce
   * and generation, which it will not witness below from now on; refused (signed) when it has
   * seen a higher generation.
   */
  answerWitnessed(shard: number, generation: number, nonce: Uint8Array): Signed {
    if (nonce.length !== 16) throw new WitnessRefusedError('the nonce must be 16 bytes');
    if (!isGeneration(generation)) throw new WitnessRefusedError(`generation ${generation} is not an integer from 0 to 2^53 - 1`);
    const hex = Buffer.from(nonce).toString('hex');
    const newer = this.book.generation(shard);
    if (generation < newer) return this.refusal(hex, shard, generation, newer);
    this.book.raise(shard, generation);
    const head = this.book.get(shard);
    return this.sign(statement(TAGS.witnessed, { nonce: hex, instance: this.instance, shard, generation, head: head ? plain(head) : null }));
  }

  /**
   * The new owner's side, before it opens `shard` as owner `generation`: the highest head of it
   * that this enclave or any member witnessed; each member asked witnesses nothing of the shard
   * below `generation` from then on. Throws 503 (UNAVAILABLE at OpenShard) when fewer than
   * WITNESSES members answered, SupersededError (FAILED_PRECONDITION) when this enclave or a
   * member has seen a higher generation.
   */
  async highest(shard: number, generation: number): Promise<{ head?: WitnessedHead; answers: number }> {
    this.refuseIfSuperseded(shard, generation);
    this.book.raise(shard, generation);
    let head = this.book.get(shard);
    if (this.options.witnesses === 0) return { head, answers: 0 };
    const nonce = randomBytes(16);
    const hex = nonce.toString('hex');
    const answered = new Set<string>();
    let newest: number | undefined;
    await Promise.all(this.peers.map(async (address) => {
      let reply: Signed;
      try {
        reply = await this.channel.witnessed(address, shard, generation, nonce, this.options.timeoutMs);
      } catch (err) {
        this.options.log?.warn({ shard, peer: address, err: err instanceof Error ? err.message : String(err) }, 'a member did not say which head of the shard it witnessed');
        return;
      }
      const newer = this.newerIn(reply, hex, shard);
      if (newer !== undefined) {
        newest = Math.max(newest ?? 0, newer);
        return;
      }
      const body = openStatement(TAGS.witnessed, reply.statement, reply.signature, this.key.publicKey);
      const witnessed = body && (body.head === null ? null : headIn(objectOr(body.head)));
      // The generation the member answers for is the asker's: one the host lowered in transit (the question is not signed) would not bind the member.
      if (!body || body.nonce !== hex || body.shard !== shard || body.generation !== generation || !this.otherInstance(body.instance) || witnessed === undefined || answered.has(body.instance as string)) {
        this.options.log?.warn({ shard, peer: address }, 'an answer about a witnessed head was not valid (not signed by the service, for another request, repeated, or this enclave\'s own): not counted');
        return;
      }
      answered.add(body.instance as string);
      head = higher(head, witnessed ?? undefined);
    }));
    if (newest !== undefined) throw this.superseded(shard, generation, newest, 'a member of the service');
    this.refuseIfSuperseded(shard, generation);
    if (answered.size < this.options.witnesses) {
      throw unavailable(`only ${answered.size} of the ${this.peers.length} other member${this.peers.length === 1 ? '' : 's'} named by the host said which head of shard ${shard} they witnessed, and WITNESSES is ${this.options.witnesses}: not opened (it would not know whether its copy is the newest)`, 'witness_unavailable');
    }
    return { head, answers: answered.size };
  }

  /**
   * The check a store opened as shard `shard` must pass before anything is written: its chain
   * reaches `witnessed` (the same store, and that head on its chain of heads). Throws StaleCopyError naming both heads.
   */
  static check(name: string, witnessed: WitnessedHead | undefined, found: FoundStore): void {
    if (!witnessed) return;
    if (witnessed.store !== '' && witnessed.store !== found.storeId) {
      throw new StaleCopyError(`${name} is store ${found.storeId} at state ${describe(found.head)}, but a member of the service witnessed store ${describeWitnessed(witnessed)}: refused (the shard's files were replaced)`);
    }
    const ancestry = found.ancestry(witnessed);
    if (ancestry !== 'yes') {
      throw new StaleCopyError(
        `${name} is an older copy than a member of the service witnessed: its chain ends at state ${describe(found.head)}, which does not reach ` +
        `the witnessed state ${describe(witnessed)} (${ancestry === 'unknown' ? 'that head is older than the chain it keeps' : witnessed.seq > found.head.seq ? 'changes after it are missing' : 'it is on another chain'}); ` +
        'refused: the host restored an old copy of the shard, or lost its newest writes',
      );
    }
  }

  /** The heads this enclave witnessed, for an enclave joining from it: bound to its join (`digest`). */
  exportFor(digest: Uint8Array): Signed {
    const heads = this.book.entries().map(({ shard, head, generation }) => ({ shard, generation, head: head ? plain(head) : null }));
    return this.sign(statement(TAGS.heads, { for: Buffer.from(digest).toString('hex'), heads }));
  }

  /** The joiner's side: takes the sponsor's heads if they are the service's and for this join; returns how many. */
  adopt(signed: Signed, digest: Uint8Array): number {
    if (signed.statement.length === 0) {
      // A member always sends its heads (signed, even when it witnessed none): none at all means
      // the host dropped them, and a joiner that witnesses would start knowing nothing.
      if (this.options.witnesses > 0) throw new WitnessRefusedError('the member sent no witnessed heads with the keys');
      return 0;
    }
    const body = openStatement(TAGS.heads, signed.statement, signed.signature, this.key.publicKey);
    if (!body || body.for !== Buffer.from(digest).toString('hex') || !Array.isArray(body.heads)) throw new WitnessRefusedError('the member\'s witnessed heads are not signed by this service for this join');
    let taken = 0;
    for (const item of body.heads as unknown[]) {
      const entry = objectOr(item);
      const head = entry.head === null ? null : headIn(objectOr(entry.head));
      if (!isShard(entry.shard) || head === undefined || !isGeneration(entry.generation)) throw new WitnessRefusedError('the member\'s witnessed heads are malformed');
      // The generations too: what the sponsor will not witness below, neither will the joiner.
      this.book.raise(entry.shard, entry.generation);
      if (head) this.book.record(entry.shard, head);
      taken++;
    }
    return taken;
  }

  /** Throws SupersededError when this enclave has seen a generation of `shard` above `generation`. */
  private refuseIfSuperseded(shard: number, generation: number): void {
    const newer = this.book.generation(shard);
    if (newer > generation) throw this.superseded(shard, generation, newer, 'this enclave');
  }

  private superseded(shard: number, generation: number, newer: number, who: string): SupersededError {
    this.book.raise(shard, newer);
    return new SupersededError(`${who} has seen owner generation ${newer} of shard ${shard}, above this owner's ${generation}: the shard has a newer owner`, generation, newer);
  }

  /**
   * A member's signed refusal of `nonce`'s request: the higher generation it names, or undefined
   * if `reply` is none. (A member signs one only for a generation above the request's.)
   */
  private newerIn(reply: Signed, nonce: string, shard: number): number | undefined {
    const body = openStatement(TAGS.refused, reply.statement, reply.signature, this.key.publicKey);
    if (!body || body.nonce !== nonce || body.shard !== shard || !this.otherInstance(body.instance)) return undefined;
    return isGeneration(body.newer) ? body.newer : undefined;
  }

  private refusal(nonce: string, shard: number, generation: number, newer: number): Signed {
    this.options.log?.warn({ shard, generation, newer }, 'refused to witness for an owner generation lower than one seen for the shard');
    return this.sign(statement(TAGS.refused, { nonce, instance: this.instance, shard, generation, newer }));
  }

  private sign(bytes: Buffer): Signed {
    return { statement: bytes, signature: this.key.sign(bytes) };
  }

  private otherInstance(instance: unknown): instance is string {
    return typeof instance === 'string' && /^[0-9a-f]{32}$/.test(instance) && instance !== this.instance;
  }
}

const plain = (head: WitnessedHead) => ({ store: head.store, seq: head.seq, hash: head.hash });
const objectOr = (value: unknown): Record<string, unknown> => (value !== null && typeof value === 'object' && !Array.isArray(value) ? value as Record<string, unknown> : {});
const sameWitnessed = (a: WitnessedHead, b: WitnessedHead) => a.store === b.store && a.seq === b.seq && a.hash === b.hash;
const describe = (head: StateHead) => `${head.seq}:${head.hash.slice(0, 16)}`;

function witnessUnavailable(shard: number, head: StateHead, confirmed: number, needed: number, peers: number): ApiError {
  return unavailable(
    `shard ${shard}'s new state ${describe(head)} was confirmed by ${confirmed} of the ${peers} other member${peers === 1 ? '' : 's'} named by the host, and WITNESSES is ${needed}: ` +
    'the change is stored but not acknowledged (retry, or read it back)',
    'witness_unavailable',
  );
}
