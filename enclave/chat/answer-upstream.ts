import { ApiError } from '../../common/errors.js';
import { formatUpstream, LOCAL_UPSTREAM, UPSTREAM_HEADER } from '../../protocol/upstream.js';

/**
 * What one chat answer says about where its prompt and memories went (the signed
 * x-tee-upstream header): the model's origin and the certificate key of the connections
 * that carried its requests, or `local`. An answer names one key: if a later round of the
 * tool loop lands on a connection with another key (a server that changed certificates, or
 * was swapped, mid-answer), the answer fails rather than name only part of where it went.
 */
export class AnswerUpstream {
  private key: string | undefined;
  private seenAny = false;

  private constructor(private readonly origin: string, private readonly memoriesWithheld: boolean) {}

  static local(): AnswerUpstream {
    return new AnswerUpstream(LOCAL_UPSTREAM, false);
  }

  static remote(origin: string, memoriesWithheld: boolean): AnswerUpstream {
    return new AnswerUpstream(origin, memoriesWithheld);
  }

  /** Told the certificate key of each request's connection (UpstreamModel's PeerSeen). */
  readonly seen = (spkiSha256: string | undefined): void => {
    if (!this.seenAny) {
      this.seenAny = true;
      this.key = spkiSha256;
    } else if (spkiSha256 !== this.key) {
      throw new ApiError('model_tls_pin_mismatch', 'the chat model presented another TLS certificate key within one answer');
    }
  };

  get value(): string {
    return formatUpstream({ origin: this.origin, spkiSha256: this.key ? [this.key] : [], memoriesWithheld: this.memoriesWithheld });
  }

  headers(): Record<string, string> {
    return { [UPSTREAM_HEADER]: this.value };
  }
}
