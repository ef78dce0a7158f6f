import { ApiError, type CodeWithStatus } from '../../common/errors.js';

/**
 * How failures of the upstream chat model reach the client: always the OpenAI error shape,
 * 502 when the model answered badly, 504 when it did not answer in time, 503 when it could
 * not be reached. The upstream's own message is passed on where it is safe: never for
 * credential refusals (they can echo part of the key), always scrubbed of the API key,
 * stripped of control characters and cut short.
 */

const MAX_MESSAGE_CHARS = 500;

export const modelBadAnswer = (message: string, code: CodeWithStatus<502> = 'model_bad_response') => new ApiError(code, message);

export const modelTimeout = (message = 'the chat model did not answer in time') =>
  new ApiError('model_timeout', message);

export const modelUnreachable = (message = 'the chat model cannot be reached; try again shortly') =>
  new ApiError('model_unreachable', message);

/** Statuses that are the caller's to fix, passed on as they are (with a safe message). */
const CLIENT_STATUSES = new Set([400, 404, 413, 422, 429]);

/** Maps a non-2xx upstream answer to the client's error. */
export function upstreamStatusError(status: number, bodyText: string, apiKey: string | undefined): ApiError {
  const said = upstreamMessage(bodyText, apiKey);
  if (status === 401 || status === 403) {
    return modelBadAnswer('the chat model refused the service\'s credentials (check MODEL_API_KEY)', 'model_auth_failed');
  }
  if (CLIENT_STATUSES.has(status)) {
    return new ApiError('model_refused', said ? `the chat model refused the request: ${said}` : `the chat model refused the request (HTTP ${status})`, { status });
  }
  return modelBadAnswer(said ? `the chat model failed (HTTP ${status}): ${said}` : `the chat model failed (HTTP ${status})`, 'model_error');
}

/** An error the model reported inside a stream (`data: {"error": …}`). */
export function upstreamStreamError(value: unknown, apiKey: string | undefined): ApiError {
  const said = upstreamMessage(JSON.stringify(value), apiKey);
  return modelBadAnswer(said ? `the chat model failed mid-stream: ${said}` : 'the chat model failed mid-stream', 'model_error');
}

/** Maps an error thrown by the HTTP client (undici or Node's net) before or while reading the answer. */
export function transportError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const code = errorCode(err);
  switch (code) {
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return modelTimeout();
    default:
      if (isConnectFailure(err)) return modelUnreachable();
      return modelBadAnswer('the connection to the chat model broke before it finished answering', 'model_connection_broken');
  }
}

const CONNECT_FAILURES = new Set([
  'ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT',
]);

/** A failure to connect: nothing of the request was sent, so trying again is safe. */
export function isConnectFailure(err: unknown): boolean {
  const code = errorCode(err);
  return code !== undefined && CONNECT_FAILURES.has(code);
}

function errorCode(err: unknown): string | undefined {
  // Connection errors may arrive wrapped (AggregateError for several addresses, `cause`).
  for (let e: unknown = err, depth = 0; e && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const inner = (e as { errors?: unknown[] }).errors?.[0];
    e = inner ?? (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The upstream's `error.message` (or plain text), made safe to show. */
export function upstreamMessage(bodyText: string, apiKey: string | undefined): string | undefined {
  let message: unknown = bodyText;
  try {
    const parsed = JSON.parse(bodyText) as { error?: unknown; message?: unknown };
    message = typeof parsed.error === 'object' && parsed.error !== null
      ? (parsed.error as { message?: unknown }).message
      : typeof parsed.error === 'string' ? parsed.error : parsed.message;
  } catch {
    // Not JSON: plain text is passed on, an HTML error page is not.
    if (/<[a-z!/]/i.test(bodyText)) return undefined;
  }
  if (typeof message !== 'string') return undefined;
  let safe = apiKey ? message.split(apiKey).join('[redacted]') : message;
  // A key split by a control character would pass the scrub above and, once control
  // characters become spaces, reach the client almost whole: withhold such a message.
  // eslint-disable-next-line no-control-regex
  if (apiKey && safe.replace(/[\u0000-\u001f\u007f]+/g, '').includes(apiKey)) safe = 'an upstream error message was withheld: it contained the model API key';
  // eslint-disable-next-line no-control-regex
  safe = safe.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  if (safe.length > MAX_MESSAGE_CHARS) safe = `${safe.slice(0, MAX_MESSAGE_CHARS)}…`;
  return safe || undefined;
}
