import type { Logger } from '../common/logger.js';
import { isLoopbackHost } from '../common/loopback.js';
import type { EnclaveLink } from './enclave-client.js';

export interface ExposureCheck {
  host: string;
  allowOpen: boolean;
  enclave: Pick<EnclaveLink, 'health'>;
  log: Logger;
  /** How long to wait for the enclave to answer before giving up. */
  waitMs?: number;
}

/**
 * The proxy's half of the open-mode rule (the enclave's half is enclave/auth/setup.ts):
 * listening beyond loopback is refused while the enclave says it requires no API keys,
 * unless ALLOW_OPEN=1. Only the proxy knows where it listens, and only the enclave knows
 * whether keys are on, so the proxy asks. This guards against an honest operator's
 * mistake; the enclave's own checks do not depend on it. Returns the problem, if any.
 */
export async function exposureProblem(check: ExposureCheck): Promise<string | undefined> {
  if (isLoopbackHost(check.host)) return undefined;
  if (check.allowOpen) {
    check.log.warn({ host: check.host }, 'ALLOW_OPEN=1: listening beyond loopback without checking that the enclave requires API keys');
    return undefined;
  }
  const deadline = Date.now() + (check.waitMs ?? 30_000);
  for (;;) {
    try {
      const health = await check.enclave.health(2000);
      return health.auth_required
        ? undefined
        : `HOST=${check.host} exposes the API beyond this machine, but the enclave runs without API keys: set API_KEYS_FILE for the enclave, or ALLOW_OPEN=1 to serve openly`;
    } catch {
      if (Date.now() > deadline) return `HOST=${check.host} is not loopback and the enclave did not answer, so the proxy cannot confirm it requires API keys`;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
