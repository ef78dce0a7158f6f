/**
 * Who may act for which tenant. The enclave decides this itself from the Authorization
 * header the proxy relays untouched: the proxy is untrusted, so nothing it says about a
 * caller counts.
 *
 * Keys are held only as SHA-256 hashes. A presented key is hashed and compared with every
 * stored hash by `timingSafeEqual`, without stopping at a match, so the time taken does
 * not depend on which key (if any) matched or on how many bytes agreed.
 */
import { timingSafeEqual } from 'node:crypto';
import { bearerToken } from '../../common/bearer.js';
import { ApiError, badRequest, forbidden } from '../../common/errors.js';
import { limits } from '../../common/limits.js';
import { hashApiKey, type KeyEntry } from './keys-file.js';

const tenantPattern = new RegExp(limits.tenantIdPattern);

export interface Authorizer {
  /** False in open mode: no keys configured, every caller may act for every tenant. */
  readonly required: boolean;
  /**
   * Checks that `authorization` (the raw header) may act for `tenantId`: 401 when the key
   * is missing or unknown, 403 when it does not hold the tenant. Returns nothing: it throws.
   */
  authorize(authorization: string, tenantId: string): void;
  /** 401 unless `authorization` holds a known key (any tenant); nothing in open mode. */
  authenticate(authorization: string): void;
  /** The tenants the key holds (for its share of the enclave); undefined in open mode. */
  tenantsOf(authorization: string): ReadonlySet<string> | undefined;
  /**
   * Which key `authorization` holds, as an id that is not the key: the same for every
   * spelling of the header, undefined when it holds no valid key (in open mode: no token).
   * Shares of the enclave are counted by it, so 64 spellings of one key are one caller.
   */
  keyOf(authorization: string): string | undefined;
  /**
   * The tenant a chat request acts for. Chat names its tenant in the organization header;
   * with keys configured and no header, a key holding exactly one tenant acts for that
   * tenant, and a key holding several must say which (400). Open mode returns the header
   * as given (undefined: no tenant, so no memories).
   */
  chatTenant(authorization: string, organization: string | undefined): string | undefined;
}

const missingKey = () => new ApiError('missing_api_key',
  'missing API key: send "Authorization: Bearer <key>"', { headers: { 'www-authenticate': 'Bearer' } });
const invalidKey = () => new ApiError('invalid_api_key', 'invalid API key', { headers: { 'www-authenticate': 'Bearer error="invalid_token"' } });

/** A set of keys, each holding some tenants. */
export class KeyRing {
  private readonly hashes: Buffer[];
  private readonly tenants: ReadonlySet<string>[];

  constructor(entries: KeyEntry[]) {
    this.hashes = entries.map((e) => e.hash);
    this.tenants = entries.map((e) => new Set(e.tenants));
  }

  get size(): number {
    return this.hashes.length;
  }

  /** The tenants the key holds, or undefined for an unknown key. */
  tenantsOf(key: string): ReadonlySet<string> | undefined {
    const found = this.find(key);
    return found === -1 ? undefined : this.tenants[found];
  }

  /** An id of the stored key that `key` is (a prefix of its stored hash), or undefined. */
  idOf(key: string): string | undefined {
    const found = this.find(key);
    return found === -1 ? undefined : this.hashes[found].subarray(0, 16).toString('hex');
  }

  private find(key: string): number {
    const presented = hashApiKey(key);
    let found = -1;
    for (let i = 0; i < this.hashes.length; i++) {
      // No early exit: every stored hash is compared, whatever matched.
      if (timingSafeEqual(presented, this.hashes[i])) found = i;
    }
    return found;
  }
}

export const openAuthorizer: Authorizer = {
  required: false,
  authorize() {},
  authenticate() {},
  tenantsOf: () => undefined,
  // Open mode checks no key, so a token is only a caller's name for its share.
  keyOf: (authorization) => {
    const token = bearerToken(authorization);
    return token === undefined ? undefined : hashApiKey(token).subarray(0, 16).toString('hex');
  },
  chatTenant: (_authorization, organization) => organization,
};

/**
 * The authorizer for a set of keys. `keys()` is asked on every request, so a reloaded
 * key ring (SIGHUP) applies to the next request.
 */
export function keyAuthorizer(keys: () => KeyRing): Authorizer {
  const tenantsOf = (authorization: string): ReadonlySet<string> => {
    if (authorization.trim() === '') throw missingKey();
    const key = bearerToken(authorization);
    const tenants = key === undefined ? undefined : keys().tenantsOf(key);
    if (!tenants) throw invalidKey();
    return tenants;
  };
  return {
    required: true,
    authenticate(authorization) {
      tenantsOf(authorization);
    },
    tenantsOf,
    keyOf(authorization) {
      const key = bearerToken(authorization);
      return key === undefined ? undefined : keys().idOf(key);
    },
    authorize(authorization, tenantId) {
      if (!tenantsOf(authorization).has(tenantId)) {
        // Echo the tenant only when it is a well-formed id: callers may pass anything.
        throw forbidden(tenantPattern.test(tenantId) ? `this API key may not act for tenant '${tenantId}'` : 'this API key may not act for this tenant');
      }
    },
    chatTenant(authorization, organization) {
      const tenants = tenantsOf(authorization);
      if (organization !== undefined && organization !== '') {
        if (!tenants.has(organization)) throw forbidden('this API key may not act for the organization in organization_id');
        return organization;
      }
      if (tenants.size === 1) return [...tenants][0];
      throw badRequest('this API key holds several tenants: name one in the organization_id header', 'organization_id', 'missing_required_parameter');
    },
  };
}
