/**
 * One error shape everywhere, OpenAI's: {"error": {"message", "type", "param", "code"}}.
 * Both processes build errors here so a client sees the same shape whichever side
 * refused the request.
 */

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'upstream_error'
  | 'service_unavailable_error'
  | 'timeout_error'
  | 'server_error';

export interface ErrorBody {
  error: { message: string; type: ErrorType; param: string | null; code: string | null };
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    message: string,
    readonly code: string | null = null,
    readonly param: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  toBody(): ErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export const badRequest = (message: string, param: string | null = null, code = 'invalid_value') =>
  new ApiError(400, 'invalid_request_error', message, code, param);

export const notFound = (message: string, code = 'not_found') =>
  new ApiError(404, 'not_found_error', message, code);

export const forbidden = (message: string) =>
  new ApiError(403, 'permission_error', message, 'tenant_not_allowed');

export const tooLarge = (message: string, param: string | null = null) =>
  new ApiError(413, 'invalid_request_error', message, 'too_large', param);

export const unavailable = (message: string, code = 'enclave_unavailable') =>
  new ApiError(503, 'service_unavailable_error', message, code);

export const timedOut = (message: string, code = 'timeout') =>
  new ApiError(504, 'timeout_error', message, code);

export const internal = (message = 'internal error') =>
  new ApiError(500, 'server_error', message, 'internal_error');
