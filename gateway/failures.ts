/**
 * What the gateway answers when it cannot pass a verified answer on: an OpenAI-shaped 502
 * naming the check that failed (common/errors.ts gateway_*), or, for an envelope the
 * enclave itself refused (a signed 401, 413, 429…), that refusal unchanged. An unsigned 429
 * or 503 (the host's rate limit, or the enclave away) keeps its status, so clients back off.
 */
import { ApiError } from '../common/errors.js';
import { AttestationError, ResponseSignatureError, RollbackError, SealedCallError, UpstreamError } from '../sdk/client.js';

export interface Failure {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

const json = (status: number, value: unknown, headers: Record<string, string> = {}): Failure =>
  ({ status, headers: { 'content-type': 'application/json', ...headers }, body: Buffer.from(JSON.stringify(value)) });

const checkFailed = (check: string, reason: string) =>
  new ApiError('gateway_check_failed', `agent-gateway: ${check} check failed: ${reason}`);

/** The check an error is the failure of, as an ApiError; undefined for a verified refusal. */
export function failureOf(error: unknown): ApiError | undefined {
  if (error instanceof RollbackError) return checkFailed('state head', error.message);
  if (error instanceof UpstreamError) return checkFailed('upstream', error.message);
  if (error instanceof ResponseSignatureError && !error.signed && (error.status === 429 || error.status === 503)) return hostRefusal(error);
  if (error instanceof ResponseSignatureError) {
    return checkFailed(/acted for tenant/.test(error.message) ? 'tenant' : 'signature', error.message);
  }
  if (error instanceof AttestationError) return checkFailed('attestation', error.message);
  if (error instanceof SealedCallError) {
    // A refusal of the envelope: its signature was checked (TeeClient.send) before this was thrown.
    if (error.status !== undefined && error.status !== 200) return undefined;
    return checkFailed('sealed reply', error.message);
  }
  const cause = (error as { cause?: { code?: unknown } }).cause;
  if (error instanceof TypeError && /fetch failed/.test(error.message)) {
    return new ApiError('gateway_service_unreachable', `agent-gateway: the service cannot be reached${typeof cause?.code === 'string' ? ` (${cause.code})` : ''}`);
  }
  return checkFailed('answer', (error as Error)?.message ?? String(error));
}

/**
 * The host refused the envelope itself (its rate limit, or the enclave restarting): a client
 * should back off and retry, not take it for a forged answer. Nothing of it is verified, so
 * only the status passes, and Retry-After when it is a plain number of seconds.
 */
function hostRefusal(error: ResponseSignatureError): ApiError {
  const retryAfter = /^\d{1,5}$/.test(error.retryAfter ?? '') ? { 'retry-after': error.retryAfter! } : undefined;
  const said = `agent-gateway: the service's host answered ${error.status} to the sealed request (not signed by the enclave, so nothing of it but the status${retryAfter ? ' and Retry-After' : ''} is passed on)`;
  return new ApiError(error.status === 429 ? 'gateway_service_rate_limited' : 'gateway_service_unavailable', said, { headers: retryAfter });
}

/** The answer to send the client for `error`. */
export function failureReply(error: unknown): Failure {
  const failure = failureOf(error);
  if (failure) return json(failure.status, failure.toBody(), failure.headers);
  const refused = error as SealedCallError;
  return json(refused.status!, refused.body);
}
