/**
 * What the gateway answers when it cannot pass a verified answer on: an OpenAI-shaped 502
 * naming the check that failed (common/errors.ts gateway_*), or, for an envelope the
 * enclave itself refused (a signed 401, 413, 429…), that refusal unchanged.
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

/** The answer to send the client for `error`. */
export function failureReply(error: unknown): Failure {
  const failure = failureOf(error);
  if (failure) return json(failure.status, failure.toBody());
  const refused = error as SealedCallError;
  return json(refused.status!, refused.body);
}
