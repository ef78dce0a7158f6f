import { chatHeadersSchema } from '../../common/chat-schema.js';
import { validator } from '../../common/validation.js';
import { chatTenant as tenantFor, scopeFor, type Caller } from '../auth/caller.js';
import type { MemoryScope, ReplayMark } from '../memory/types.js';

const validHeaders = validator<{ organization_id?: string }>(chatHeadersSchema, 'params');

/**
 * The one place that decides whose memories a chat request may use: the organization the
 * client named (organization_id or OpenAI-Organization header, relayed by the proxy),
 * checked again here with the memory tenant rules, and then the caller's API key for it
 * (enclave/auth): with keys configured, a key may use only its own tenants' memories, and
 * a key holding one tenant uses it without the header. Open, no organization means no
 * tenant: the request gets no memories.
 */
export function chatTenant(request: { organization: string }, caller: Caller): string | undefined {
  const organization = request.organization
    ? validHeaders({ organization_id: request.organization }).organization_id
    : undefined;
  return tenantFor(caller, organization);
}

/** Who a chat acts as: its tenant, and every tenant of its key (memories the model saves count against the key's share). */
export interface ChatCaller {
  tenant: string | undefined;
  keyTenants: ReadonlySet<string> | undefined;
  /** The memory scopes it uses and saves in: those the request names and those its key is limited to. */
  scope: MemoryScope;
  /** The caller's key id: the author of the memories the model saves (their history). */
  keyId: string | undefined;
  /** The tenant key its sealed request carried, if any. */
  tenantKey?: Uint8Array;
  /** Its sealed request's replay id, logged with the memories the model saves. */
  replay?: ReplayMark;
}

export function chatCaller(request: { organization: string }, caller: Caller, requested: MemoryScope = {}): ChatCaller {
  return { tenant: chatTenant(request, caller), keyTenants: caller.tenants, scope: scopeFor(caller, requested), keyId: caller.keyId, tenantKey: caller.tenantKey, replay: caller.replay };
}
