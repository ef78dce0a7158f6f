import type { FastifyError } from 'fastify';
import { ApiError, badRequest, internal, notFound, tooLarge } from '../common/errors.js';
import { limits } from '../common/limits.js';
import { schemaError } from '../common/validation.js';

/**
 * Maps whatever fastify or a route threw to an API error: validation failures and
 * malformed requests to 4xx with a clear message, unknown failures to a bare 500.
 * Returns the error and whether it was unexpected (worth logging as an error).
 */
export function toApiError(err: unknown, bodyLimit: number = limits.maxBodyBytes): { error: ApiError; unexpected: boolean } {
  if (err instanceof ApiError) return { error: err, unexpected: false };
  const e = err as FastifyError & { validationContext?: string };
  if (e.validation) {
    return { error: schemaError(e.validation as never, (e.validationContext ?? 'body') as 'body'), unexpected: false };
  }
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { error: tooLarge(`request body is larger than ${bodyLimit} bytes`), unexpected: false };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { error: new ApiError('unsupported_media_type', 'Content-Type must be application/json'), unexpected: false };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { error: badRequest('request body is required', null, 'missing_body'), unexpected: false };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { error: badRequest('Content-Length does not match the body', null, 'invalid_content_length'), unexpected: false };
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { error: badRequest('request body is not valid JSON', null, 'invalid_json'), unexpected: false };
    case 'FST_ERR_BAD_URL':
      return { error: badRequest('malformed URL: invalid percent-encoding in the path', null, 'invalid_url'), unexpected: false };
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return { error: new ApiError('uri_too_long', 'a path segment is too long'), unexpected: false };
    default:
      break;
  }
  // Other client errors fastify raises (malformed URL, bad header…) stay 4xx.
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return { error: new ApiError('bad_request', e.message, { status: e.statusCode }), unexpected: false };
  }
  return { error: internal(), unexpected: true };
}

export const routeNotFound = (method: string, url: string) =>
  notFound(`no route for ${method} ${url.split('?')[0]}`, 'unknown_route');
