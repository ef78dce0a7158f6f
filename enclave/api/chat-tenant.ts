import { chatHeadersSchema } from '../../common/chat-schema.js';
import type { ApiRequest } from '../../common/proto.js';
import { validator } from '../../common/validation.js';

const validHeaders = validator<{ organization_id?: string }>(chatHeadersSchema, 'params');

/**
 * The one place that decides whose memories a chat request may use: the organization the
 * client named (organization_id or OpenAI-Organization header, relayed by the proxy),
 * checked again here with the memory tenant rules. No organization, no tenant: the
 * request gets no memories. An authorization check of the caller for the tenant belongs
 * here too.
 */
export function chatTenant(request: ApiRequest): string | undefined {
  if (!request.organization) return undefined;
  return validHeaders({ organization_id: request.organization }).organization_id;
}
