/**
 * One error shape everywhere, OpenAI's: {"error": {"message", "type", "param", "code"}}.
 * Every error either process sends is built here from one catalogue of codes, so a client
 * sees the same status and type for a code whichever side refused the request, and the
 * table of codes in docs/api.md (checked by test/unit/docs.test.ts) cannot drift from the code.
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

interface CodeSpec {
  status: number;
  type: ErrorType;
  /** When a client sees it: one line for docs/api.md. */
  when: string;
}

const invalid = <S extends number>(status: S, when: string) => ({ status, type: 'invalid_request_error' as const, when });

/** Every error code the service sends, with its HTTP status and OpenAI error type. */
export const errorCatalogue = {
  // 400: the request is malformed or breaks a rule.
  invalid_value: invalid(400, 'a field breaks a rule (pattern, format, allowed values)'),
  invalid_type: invalid(400, 'a field or the body has the wrong JSON type'),
  missing_required_parameter: invalid(400, 'a required field or query parameter is missing'),
  unknown_parameter: invalid(400, 'a field or query parameter the endpoint does not take'),
  empty_string: invalid(400, 'a text field is empty'),
  empty_array: invalid(400, 'an array that must hold something is empty'),
  string_above_max_length: invalid(400, 'a text field is too long'),
  array_below_min_length: invalid(400, 'an array has too few items'),
  array_above_max_length: invalid(400, 'an array has too many items'),
  too_many_keys: invalid(400, 'an object (e.g. metadata) has too many keys'),
  too_many_terms: invalid(400, 'a memory\'s content holds more than MAX_TERMS_PER_MEMORY distinct words'),
  out_of_range: invalid(400, 'a number is outside its range'),
  unsupported_content: invalid(400, 'a message content part of a type the service does not take (only text)'),
  unsupported_by_offline_model: invalid(400, 'the offline responder (no MODEL_BASE_URL) cannot honour response_format or a required tool call, nor extract memories (infer: true)'),
  missing_body: invalid(400, 'a request that needs a JSON body has none'),
  invalid_json: invalid(400, 'the body is not valid UTF-8 JSON, is nested too deeply, or has a forbidden key'),
  invalid_content_length: invalid(400, 'Content-Length does not match the body'),
  invalid_url: invalid(400, 'the URL has invalid percent-encoding'),
  invalid_target: invalid(400, 'the request target is not a path (only a hostile host sends this)'),
  malformed_request: invalid(400, 'Node could not parse the HTTP request'),
  bad_request: invalid(400, 'another malformed request the HTTP server refused'),
  stream_mismatch: invalid(400, 'a streamed request was sent on the unary call (sealed: to POST /v1/sealed instead of /v1/sealed/stream)'),
  invalid_sealed_request: invalid(400, 'a sealed envelope or its plaintext is malformed'),
  sealed_open_failed: invalid(400, 'a sealed request does not open with the enclave\'s key (altered, or sealed to an old key)'),
  sealed_request_expired: invalid(400, 'a sealed request\'s timestamp is too far from the enclave\'s clock'),
  sealed_outer_authorization: invalid(400, 'a sealed request carried an Authorization header outside its envelope, where the host reads it'),
  tenant_key_in_plain: invalid(400, 'a plain request carried an X-Tenant-Key header, which the host reads: a tenant key travels only inside a sealed request'),
  invalid_tenant_key: invalid(400, 'a sealed request\'s tenant_key is not 32 to 256 bytes'),
  // 401, 403
  missing_api_key: { status: 401, type: 'authentication_error', when: 'no Authorization header, and the service requires API keys' },
  invalid_api_key: { status: 401, type: 'authentication_error', when: 'the key is not Bearer <key>, or not a key the enclave knows' },
  tenant_not_allowed: { status: 403, type: 'permission_error', when: 'the API key does not hold the tenant the request names' },
  wrong_tenant_key: { status: 403, type: 'permission_error', when: 'the tenant key sent is not the one the tenant\'s memories are sealed under' },
  // 404, 405
  unknown_route: { status: 404, type: 'not_found_error', when: 'no endpoint has this path' },
  memory_not_found: { status: 404, type: 'not_found_error', when: 'no memory with this id for this tenant (the same answer whether it exists for another tenant or not at all)' },
  model_not_found: { status: 404, type: 'not_found_error', when: 'GET /v1/models/{id} names a model the service does not serve' },
  method_not_allowed: invalid(405, 'the path exists but not with this method (the Allow header lists the methods)'),
  // 408–431: transport-level refusals.
  request_timeout: { status: 408, type: 'timeout_error', when: 'the client did not send its whole request within HTTP_RECEIVE_TIMEOUT_MS' },
  sealed_request_replayed: invalid(409, 'a sealed request was sent twice'),
  memory_changed: invalid(409, 'a memory that extraction (infer: true) meant to update or delete was deleted meanwhile; nothing was changed'),
  memory_limit_reached: invalid(409, 'the tenant holds MAX_MEMORIES_PER_TENANT memories'),
  term_limit_reached: invalid(409, 'the memories would give the tenant more than MAX_TERMS_PER_TENANT distinct words'),
  key_memory_limit_reached: invalid(409, 'the tenants of the API key hold MAX_MEMORIES_PER_KEY memories'),
  tenant_key_not_enabled: invalid(409, 'a tenant key was sent for a tenant that holds memories stored without one (a tenant key is turned on only for a tenant with no memories)'),
  tenant_locked: { status: 423, type: 'permission_error', when: 'the tenant\'s memories are sealed under a tenant key and the request did not carry it (a plain call, or a sealed call without tenant_key)' },
  too_large: invalid(413, 'the body is larger than the endpoint takes'),
  uri_too_long: invalid(414, 'a path segment is too long'),
  unsupported_media_type: invalid(415, 'the body is not the route\'s Content-Type: application/json, or application/octet-stream for /v1/sealed and /v1/sealed/stream'),
  expectation_failed: invalid(417, 'an Expect header other than 100-continue'),
  headers_too_large: invalid(431, 'the request headers are larger than 16 KiB'),
  // 429
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error', when: 'the caller passed RATE_LIMIT_PER_MINUTE (Retry-After says when to come back)' },
  too_many_concurrent_requests: { status: 429, type: 'rate_limit_error', when: 'one client IP or one API key already has its share of requests in progress' },
  model_refused: invalid(400, 'the chat model refused the request (its status is passed on: 400, 404, 413, 422 or 429)'),
  // 500–504
  internal_error: { status: 500, type: 'server_error', when: 'an unexpected failure (the details go to the enclave\'s log, never to the client)' },
  enclave_error: { status: 502, type: 'upstream_error', when: 'the enclave failed to answer the proxy properly' },
  gateway_check_failed: { status: 502, type: 'upstream_error', when: 'agent-gateway could not verify an answer (its message names the check: attestation, sealed reply, signature, tenant, state head, upstream); nothing unverified is passed on' },
  gateway_service_unreachable: { status: 502, type: 'upstream_error', when: 'agent-gateway cannot reach the service' },
  gateway_service_rate_limited: { status: 429, type: 'rate_limit_error', when: 'the service\'s host refused the sealed request with 429 before the enclave saw it (unsigned: only the status and a numeric Retry-After are passed on)' },
  gateway_service_unavailable: { status: 503, type: 'server_error', when: 'the service\'s host answered the sealed request with 503 (the enclave restarting or overloaded; unsigned: only the status and a numeric Retry-After are passed on)' },
  gateway_host_refused: { status: 403, type: 'permission_error', when: 'a request to agent-gateway named a Host other than this machine\'s loopback (a web page on another name that resolves here: DNS rebinding)' },
  model_error: { status: 502, type: 'upstream_error', when: 'the chat model failed (5xx, or an error mid-stream)' },
  model_bad_response: { status: 502, type: 'upstream_error', when: 'the chat model\'s answer is not a valid OpenAI answer' },
  model_bad_extraction: { status: 502, type: 'upstream_error', when: 'the model\'s answer to memory extraction (infer: true) is malformed, too long, or names memories it was not shown; nothing was changed' },
  model_auth_failed: { status: 502, type: 'upstream_error', when: 'the chat model refused the service\'s credentials (MODEL_API_KEY)' },
  model_stream_broken: { status: 502, type: 'upstream_error', when: 'the chat model\'s stream broke off or was malformed' },
  model_connection_broken: { status: 502, type: 'upstream_error', when: 'the connection to the chat model broke mid-answer' },
  model_tls_pin_mismatch: { status: 502, type: 'upstream_error', when: 'the chat model presented a TLS certificate key MODEL_TLS_PINS does not allow (or another key within one answer); nothing was sent to it' },
  enclave_unavailable: { status: 503, type: 'service_unavailable_error', when: 'the proxy cannot reach the enclave (Retry-After: 1)' },
  enclave_overloaded: { status: 503, type: 'service_unavailable_error', when: 'the enclave is running ENCLAVE_MAX_IN_FLIGHT requests (Retry-After: 1)' },
  proxy_overloaded: { status: 503, type: 'service_unavailable_error', when: 'the proxy holds MAX_IN_FLIGHT requests (Retry-After: 1)' },
  enclave_capacity_reached: { status: 503, type: 'service_unavailable_error', when: 'the enclave holds MAX_TENANTS, MAX_MEMORIES, MAX_STORED_BYTES or MAX_TERMS' },
  shard_not_owned: { status: 503, type: 'service_unavailable_error', when: 'this enclave does not serve the tenant\'s shard: an owner of a higher generation took it over, or the host\'s placement has not opened it here (or closed it); nothing was saved. The message names the shard, and `x-tee-shard-miss` carries its index for the host to route the call to its owner' },
  shard_unplaced: { status: 503, type: 'service_unavailable_error', when: 'the service runs as several enclaves and none holds the tenant\'s shard right now (its enclave was lost and the shard is being moved); sent by the proxy after a few tries (Retry-After: 1)' },
  storage_unavailable: { status: 503, type: 'service_unavailable_error', when: 'the host store failed a write; the change was not saved' },
  witness_unavailable: { status: 503, type: 'service_unavailable_error', when: 'fewer than WITNESSES other enclaves of the service confirmed the shard\'s new head (freshness across enclaves): the change is stored and applied, but not acknowledged; retry or read it back' },
  attestation_unavailable: { status: 503, type: 'service_unavailable_error', when: 'the attestation document could not be made' },
  attestation_busy: { status: 503, type: 'service_unavailable_error', when: 'four attestation documents with a nonce are being made (Retry-After: 1)' },
  sealed_replay_window_full: { status: 503, type: 'service_unavailable_error', when: 'the replay guard is full of sealed requests' },
  model_unreachable: { status: 503, type: 'service_unavailable_error', when: 'the chat model cannot be reached' },
  deadline_exceeded: { status: 504, type: 'timeout_error', when: 'the request reached the enclave after its deadline' },
  enclave_timeout: { status: 504, type: 'timeout_error', when: 'the enclave did not answer within ENCLAVE_TIMEOUT_MS' },
  model_timeout: { status: 504, type: 'timeout_error', when: 'the chat model did not answer within MODEL_TIMEOUT_MS' },
  stream_time_limit: { status: 504, type: 'timeout_error', when: 'a stream ran longer than ENCLAVE_MAX_STREAM_MS (sent as the stream\'s last event)' },
} as const satisfies Record<string, CodeSpec>;

export type ErrorCode = keyof typeof errorCatalogue;

/** The codes whose catalogue status is S: e.g. badRequest takes only 400 codes. */
export type CodeWithStatus<S extends number> = { [K in ErrorCode]: (typeof errorCatalogue)[K]['status'] extends S ? K : never }[ErrorCode];

export interface ErrorBody {
  error: { message: string; type: ErrorType; param: string | null; code: ErrorCode | null };
}

export interface ErrorOptions {
  param?: string | null;
  headers?: Record<string, string>;
  /** Only for model_refused, whose status is the model's. */
  status?: number;
}

export class ApiError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly param: string | null;
  readonly headers: Record<string, string>;

  constructor(readonly code: ErrorCode, message: string, options: ErrorOptions = {}) {
    super(message);
    this.name = 'ApiError';
    const spec: CodeSpec = errorCatalogue[code];
    this.status = options.status ?? spec.status;
    this.type = this.status === 429 ? 'rate_limit_error' : spec.type;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }

  /** The same error with more response headers (e.g. Retry-After). */
  withHeaders(headers: Record<string, string>): ApiError {
    return new ApiError(this.code, this.message, { param: this.param, headers: { ...this.headers, ...headers }, status: this.status });
  }

  toBody(): ErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export const badRequest = (message: string, param: string | null = null, code: CodeWithStatus<400> = 'invalid_value') =>
  new ApiError(code, message, { param });

export const notFound = (message: string, code: CodeWithStatus<404> = 'unknown_route') => new ApiError(code, message);

export const forbidden = (message: string) => new ApiError('tenant_not_allowed', message);

export const tooLarge = (message: string, param: string | null = null) => new ApiError('too_large', message, { param });

export const unavailable = (message: string, code: CodeWithStatus<503> = 'enclave_unavailable', headers?: Record<string, string>) =>
  new ApiError(code, message, { headers });

export const timedOut = (message: string, code: CodeWithStatus<504>) => new ApiError(code, message);

export const internal = (message = 'internal error') => new ApiError('internal_error', message);

/** 409 for a sealed envelope already handled: by this enclave (its replay guard), or by any owner of the shard (its log). */
export const sealedReplayed = () => new ApiError('sealed_request_replayed', 'this sealed request was already handled; seal every request afresh');

/** 405 for a known path and a method it does not serve. */
export const methodNotAllowed = (method: string, path: string, allowed: readonly string[]) =>
  new ApiError('method_not_allowed', `${method} is not allowed on ${path}; use ${allowed.join(', ')}`, { headers: { allow: allowed.join(', ') } });
