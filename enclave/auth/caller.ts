/**
 * Who a request comes from, decided once per request: the enclave's API builds a Caller
 * from the Authorization header (Authorizer.identify, the request's one key-ring lookup)
 * and hands it to the work gate and the handlers, which never see the header itself.
 * The checks below read the Caller only: no hashing, no scan of the keys.
 */
import { ApiError, badRequest, forbidden } from '../../common/errors.js';
import { limits } from '../../common/limits.js';
import { SCOPE_FIELDS, type MemoryScope, type ReplayMark } from '../memory/types.js';

export interface Caller {
  /**
   * Which key the header holds, as an id that is not the key (the same for every spelling
   * of the header): the work gate counts shares by it. Undefined when it holds no valid key;
   * in open mode, a name for the token sent, if any.
   */
  readonly keyId: string | undefined;
  /** The tenants the key holds; undefined in open mode, where every caller may act for every tenant. */
  readonly tenants: ReadonlySet<string> | undefined;
  /** The memory scopes the key is limited to inside its tenants; absent or empty: tenant-wide. */
  readonly scope?: Readonly<MemoryScope>;
  /** The key's chats go through memory extraction unless a request says `memory_infer: false` (keys file). */
  readonly memoryInfer?: boolean;
  /**
   * Keys are configured and the header holds none (missing), is not of the Bearer scheme
   * (not-bearer: e.g. the bare key), or holds no known key (invalid): the 401 a route that
   * needs a key answers.
   */
  readonly refused?: 'missing' | 'not-bearer' | 'invalid';
  /** Whether the request carried an Authorization header at all (a sealed call's outer request must not). */
  readonly sentHeader: boolean;
  /**
   * The tenant key a sealed request carried inside its envelope (never a plain one's): what
   * a tenant's memories are sealed under (storage/tenant-keys.ts). Held for the request only.
   */
  readonly tenantKey?: Uint8Array;
  /** The sealed request's replay id (never a plain one's): every change it makes is logged with it. */
  readonly replay?: ReplayMark;
}

const tenantPattern = new RegExp(limits.tenantIdPattern);

const missingKey = () => new ApiError('missing_api_key',
  'missing API key: send "Authorization: Bearer <key>"', { headers: { 'www-authenticate': 'Bearer' } });
// Never echoes the header: it may be the key itself, sent without its scheme.
const notBearer = () => new ApiError('invalid_api_key',
  'the Authorization header must be "Bearer <key>": this one has no Bearer scheme (was the key sent alone?)', { headers: { 'www-authenticate': 'Bearer error="invalid_request"' } });
const invalidKey = () => new ApiError('invalid_api_key', 'invalid API key', { headers: { 'www-authenticate': 'Bearer error="invalid_token"' } });

/** 401 unless the caller holds a known key (any tenant); nothing in open mode. */
export function authenticate(caller: Caller): void {
  if (caller.refused === 'missing') throw missingKey();
  if (caller.refused === 'not-bearer') throw notBearer();
  if (caller.refused === 'invalid') throw invalidKey();
}

/** 401 when the key is missing or unknown, 403 when it does not hold `tenantId`. Returns nothing: it throws. */
export function authorize(caller: Caller, tenantId: string): void {
  authenticate(caller);
  if (caller.tenants && !caller.tenants.has(tenantId)) {
    // Echo the tenant only when it is a well-formed id: callers may pass anything.
    throw forbidden(tenantPattern.test(tenantId) ? `this API key may not act for tenant '${tenantId}'` : 'this API key may not act for this tenant');
  }
}

/**
 * The tenant a chat request acts for. Chat names its tenant in the organization header;
 * with keys configured and no header, a key holding exactly one tenant acts for that
 * tenant, and a key holding several must say which (400). Open mode returns the header
 * as given (undefined: no tenant, so no memories).
 */
export function chatTenant(caller: Caller, organization: string | undefined): string | undefined {
  authenticate(caller);
  const tenants = caller.tenants;
  if (!tenants) return organization;
  if (organization !== undefined && organization !== '') {
    if (!tenants.has(organization)) throw forbidden('this API key may not act for the organization named in the OpenAI-Organization (or organization_id) header');
    return organization;
  }
  if (tenants.size === 1) return [...tenants][0];
  throw badRequest(
    'this API key holds several tenants: name one in the OpenAI-Organization header (the openai SDK\'s `organization` option) or the organization_id header',
    'organization_id', 'missing_required_parameter',
  );
}

/**
 * Refuses (403) a key limited to scopes an act on the whole tenant (export, import): an
 * export holds every user's memories, and an import writes ids and scopes as the file says.
 */
export function requireWholeTenant(caller: Caller): void {
  const limited = SCOPE_FIELDS.filter((field) => caller.scope?.[field] !== undefined);
  if (limited.length > 0) throw forbidden(`this API key is limited to ${limited.map((field) => `${field} '${caller.scope![field]}'`).join(', ')}; export and import act on the whole tenant`);
}

/**
 * The scopes a request acts in: those it names, plus those the caller's key is limited to.
 * A key limited to a scope acts in it whether the request names it or not, and naming
 * another value of it is refused (403), so a scoped key never reads, writes or deletes
 * outside its scope.
 */
export function scopeFor(caller: Caller, requested: MemoryScope): MemoryScope {
  const scope: MemoryScope = { ...requested };
  for (const field of SCOPE_FIELDS) {
    const limit = caller.scope?.[field];
    if (limit === undefined) continue;
    if (requested[field] !== undefined && requested[field] !== limit) throw forbidden(`this API key may act only for ${field} '${limit}'`);
    scope[field] = limit;
  }
  return scope;
}
