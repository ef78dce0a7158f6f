/**
 * The gateway's trust in the service: an sdk client made by connect() (attestation with a
 * fresh nonce, pinned root and PCRs or a signed manifest, key bindings, the answer's own
 * signature), kept while the enclave's keys stay the same, and made again when an answer
 * suggests they changed (an enclave restarts with new keys). One re-attestation serves every
 * request that noticed at the same time.
 */
import { connect, ResponseSignatureError, SealedCallError, type ConnectOptions, type TeeClient } from '../sdk/client.js';
import type { StateTracker } from '../protocol/response-signature.js';

export class Trust {
  private refreshing: Promise<void> | undefined;

  private constructor(private readonly options: ConnectOptions, private tee: TeeClient) {}

  /** Attests the service; throws AttestationError (or a network error) when it cannot be trusted. */
  static async attest(options: ConnectOptions & { stateTracker: StateTracker }): Promise<Trust> {
    return new Trust(options, await connect(options));
  }

  get client(): TeeClient {
    return this.tee;
  }

  /**
   * Runs `attempt` with the current client. When it fails in a way new enclave keys would
   * explain, attests again; if the keys did change, the request was sealed to keys the new
   * enclave does not hold (so it was not carried out) and is sent once more. Otherwise the
   * first failure stands: a retry could carry out a write twice.
   */
  async run<T>(attempt: (tee: TeeClient) => Promise<T>): Promise<T> {
    const tee = this.tee;
    try {
      return await attempt(tee);
    } catch (error) {
      if (!mayBeNewKeys(error) || !(await this.refresh(tee))) throw error;
      return attempt(this.tee);
    }
  }

  /** Attests again unless another request already did since `seen`; true when the keys changed. */
  private async refresh(seen: TeeClient): Promise<boolean> {
    if (this.tee === seen) {
      this.refreshing ??= connect(this.options).then((fresh) => {
        if (!sameKeys(fresh, this.tee)) this.tee = fresh;
      }).finally(() => { this.refreshing = undefined; });
      await this.refreshing;
    }
    return !sameKeys(this.tee, seen);
  }
}

const sameKeys = (a: TeeClient, b: TeeClient) =>
  Buffer.from(a.attestation.teePublicKey).equals(b.attestation.teePublicKey) &&
  Buffer.from(a.attestation.boxPublicKey).equals(b.attestation.boxPublicKey);

/** A signature by a key we do not know, or an envelope the enclave could not open: what a restart with new keys looks like. */
function mayBeNewKeys(error: unknown): boolean {
  if (error instanceof ResponseSignatureError) return error.signed;
  if (error instanceof SealedCallError) return (error.body as { error?: { code?: unknown } } | undefined)?.error?.code === 'sealed_open_failed';
  return false;
}
