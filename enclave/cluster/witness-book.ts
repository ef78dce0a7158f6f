import sodium from 'sodium-native';
import { describeHead, type StateHead } from '../storage/state-head.js';

/** A shard's head as a member witnessed it: which store (the shard map fixes it) and where its chain was. */
export interface WitnessedHead extends StateHead {
  store: string;
}

/**
 * What this enclave knows of each shard, to keep two owners from both being acknowledged:
 *
 * - the highest head it has witnessed: its own as owner, and those the owners told it
 *   (freshness.ts). Only ever raised: a head with a lower seq than the one held changes
 *   nothing, so a replayed old statement is harmless;
 * - the highest owner generation (the shard map's fencing token) it has seen for the shard: its
 *   own when it opens the shard, one a new owner asked about, one an owner witnessed with. Only
 *   ever raised too. Once it holds g, it witnesses no head of the shard for a lower generation:
 *   an old owner's write cannot be confirmed after a new owner was told what this enclave knew.
 *
 * In memory only, like the service keys: an enclave started anew knows what its sponsor knew
 * (taken with the keys) and nothing else (docs/cluster.md bounds what that costs).
 */
export class WitnessBook {
  private readonly heads = new Map<number, WitnessedHead>();
  private readonly generations = new Map<number, number>();

  get(shard: number): WitnessedHead | undefined {
    return this.heads.get(shard);
  }

  /** Keeps `head` if it is higher than the one held; returns whether it was (false also for a fork at the same seq, kept as first seen). */
  record(shard: number, head: WitnessedHead): boolean {
    const held = this.heads.get(shard);
    if (held && held.seq >= head.seq) return false;
    this.heads.set(shard, { store: head.store, seq: head.seq, hash: head.hash });
    return true;
  }

  /** The highest owner generation seen for `shard` (0 when none). */
  generation(shard: number): number {
    return this.generations.get(shard) ?? 0;
  }

  /** Raises the shard's generation to `generation` if it is higher; returns the one held after. */
  raise(shard: number, generation: number): number {
    const held = this.generation(shard);
    if (generation > held) this.generations.set(shard, generation);
    return Math.max(held, generation);
  }

  /** Every shard it knows anything of (a head, a generation or both), for a joining enclave. */
  entries(): Array<{ shard: number; head?: WitnessedHead; generation: number }> {
    const shards = [...new Set([...this.heads.keys(), ...this.generations.keys()])].sort((a, b) => a - b);
    return shards.map((shard) => ({ shard, head: this.heads.get(shard), generation: this.generation(shard) }));
  }
}

/** The higher of two witnessed heads (by seq; the first on a tie). */
export const higher = (a: WitnessedHead | undefined, b: WitnessedHead | undefined): WitnessedHead | undefined =>
  (!a ? b : !b ? a : b.seq > a.seq ? b : a);

export const describeWitnessed = (head: WitnessedHead): string => `${describeHead(head)} of store ${head.store}`;

/**
 * Statements between enclaves: a tag line, then JSON, signed with the service's Ed25519 key.
 * The tags differ from every other statement the key signs (response signatures, receipts),
 * so none can be passed off as another. v2: each names the owner generation it is about.
 * The tag is checked before the signature: an answer opened as the wrong kind costs no verification.
 */
export const TAGS = {
  /** v3: the heads of several shards in one statement. */
  witness: 'agent-service/witness/v3',
  ack: 'agent-service/witness-ack/v3',
  witnessed: 'agent-service/witnessed/v2',
  /** A member's answer to a witness request or a question of a generation lower than one it has seen for the shard. */
  refused: 'agent-service/witness-refused/v2',
  heads: 'agent-service/witnessed-heads/v2',
} as const;

export type Tag = (typeof TAGS)[keyof typeof TAGS];

export function statement(tag: Tag, body: object): Buffer {
  return Buffer.from(`${tag}\n${JSON.stringify(body)}`);
}

/** The statement's body if it carries `tag` and `signature` is the service key's over it; undefined otherwise. */
export function openStatement(tag: Tag, bytes: Uint8Array, signature: Uint8Array, publicKey: Uint8Array): Record<string, unknown> | undefined {
  if (signature.length !== sodium.crypto_sign_BYTES || publicKey.length !== sodium.crypto_sign_PUBLICKEYBYTES) return undefined;
  const text = Buffer.from(bytes).toString('utf8');
  const newline = text.indexOf('\n');
  if (newline < 0 || text.slice(0, newline) !== tag) return undefined;
  if (!sodium.crypto_sign_verify_detached(Buffer.from(signature), Buffer.from(bytes), Buffer.from(publicKey))) return undefined;
  try {
    const body: unknown = JSON.parse(text.slice(newline + 1));
    return body !== null && typeof body === 'object' && !Array.isArray(body) ? body as Record<string, unknown> : undefined;
  } catch {
    return undefined;
  }
}

const HEX32 = /^[0-9a-f]{32}$/;
const HEX64 = /^[0-9a-f]{64}$/;

/** A head in a statement's body (`store`, `seq`, `hash`), or undefined when malformed. */
export function headIn(body: Record<string, unknown>): WitnessedHead | undefined {
  const { store, seq, hash } = body;
  if (typeof store !== 'string' || !(HEX32.test(store) || store === '') || typeof hash !== 'string' || !HEX64.test(hash)) return undefined;
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) return undefined;
  return { store, seq, hash };
}

export const isNonce = (value: unknown): value is string => typeof value === 'string' && HEX32.test(value);
export const isGeneration = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
export const isShard = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
