/**
 * Who may act for which tenant. The enclave decides this itself from the Authorization
 * header the proxy relays untouched: the proxy is untrusted, so nothing it says about a
 * caller counts.
 *
 * Keys are held only as SHA-256 hashes. A presented key is hashed and compared with every
 * stored hash by `timingSafeEqual`, without stopping at a match, so the time taken does
 * not depend on which key (if any) matched or on how many bytes agreed. That is done once
 * per request (identify); the checks then read the Caller (caller.ts).
 */
import { timingSafeEqual } from 'node:crypto';
import { bearerToken } from '../../common/bearer.js';
import type { Caller } from './caller.js';
import { hashApiKey, type KeyEntry } from './keys-file.js';
import type { MemoryScope } from '../memory/types.js';

export interface Authorizer {
  /** False in open mode: no keys configured, every caller may act for every tenant. */
  readonly required: boolean;
  /** Who sends `authorization` (the raw header): the request's one lookup of its key. */
  identify(authorization: string): Caller;
}

/** A stored key as a lookup finds it. */
export interface FoundKey {
  /** A prefix of its stored hash: names the key without being it. */
  id: string;
  tenants: ReadonlySet<string>;
  /** The scopes it is limited to inside its tenants (none: tenant-wide). */
  scope: Readonly<MemoryScope>;
  /** Its chats keep memories (extraction) unless a request says otherwise. */
  memoryInfer: boolean;
}

/** A set of keys, each holding some tenants. */
export class KeyRing {
  private readonly hashes: Buffer[];
  private readonly tenants: ReadonlySet<string>[];
  private readonly scopes: Readonly<MemoryScope>[];
  private readonly infers: boolean[];

  constructor(entries: KeyEntry[]) {
    this.infers = entries.map((e) => e.memoryInfer === true);
    this.hashes = entries.map((e) => e.hash);
    this.tenants = entries.map((e) => new Set(e.tenants));
    this.scopes = entries.map((e) => Object.freeze({ ...e.scope }));
  }

  get size(): number {
    return this.hashes.length;
  }

  /** The stored key that `key` is, or undefined for an unknown key. */
  lookup(key: string): FoundKey | undefined {
    const presented = hashApiKey(key);
    let found = -1;
    for (let i = 0; i < this.hashes.length; i++) {
      // No early exit: every stored hash is compared, whatever matched.
      if (timingSafeEqual(presented, this.hashes[i])) found = i;
    }
    return found === -1 ? undefined : { id: this.hashes[found].subarray(0, 16).toString('hex'), tenants: this.tenants[found], scope: this.scopes[found], memoryInfer: this.infers[found] };
  }
}

export const openAuthorizer: Authorizer = {
  required: false,
  // Open mode checks no key, so a token is only a caller's name for its share.
  identify: (authorization) => {
    const token = bearerToken(authorization);
    return { keyId: token === undefined ? undefined : hashApiKey(token).subarray(0, 16).toString('hex'), tenants: undefined, sentHeader: authorization !== '' };
  },
};

/**
 * The authorizer for a set of keys. `keys()` is asked on every lookup, so a reloaded
 * key ring (SIGHUP) applies to the next request.
 */
export function keyAuthorizer(keys: () => KeyRing): Authorizer {
  return {
    required: true,
    identify(authorization) {
      const sentHeader = authorization !== '';
      if (authorization.trim() === '') return { keyId: undefined, tenants: undefined, refused: 'missing', sentHeader };
      const token = bearerToken(authorization);
      if (token === undefined) return { keyId: undefined, tenants: undefined, refused: 'not-bearer', sentHeader };
      const found = keys().lookup(token);
      if (!found) return { keyId: undefined, tenants: undefined, refused: 'invalid', sentHeader };
      return { keyId: found.id, tenants: found.tenants, scope: found.scope, ...(found.memoryInfer ? { memoryInfer: true } : {}), sentHeader };
    },
  };
}
