import * as grpc from '@grpc/grpc-js';
import { channelOptions, enclaveProto, type JoinChallengeReplyIn, type JoinReplyIn } from '../../common/proto.js';
import type { Signed } from './freshness.js';
import { joinDigest, KeySharingError, type JoinChannel } from './key-sharing.js';

/**
 * The joiner's channel to a member enclave (JOIN_ENCLAVE_ADDR): its gRPC server, reached
 * through the host like every other channel of the enclave. Nothing on it needs hiding:
 * documents are public, and the keys travel sealed to a key only the joiner holds.
 */
export class JoinClient implements JoinChannel {
  private readonly client: InstanceType<ReturnType<typeof enclaveProto>['Enclave']>;
  /** The heads the member witnessed, signed for this join (the digest of the document sent), as its answer carried them. */
  witnessed?: { signed: Signed; digest: Uint8Array };

  constructor(private readonly address: string, private readonly timeoutMs = 15_000) {
    this.client = new (enclaveProto().Enclave)(address, grpc.credentials.createInsecure(), channelOptions);
  }

  challenge(): Promise<Uint8Array> {
    return new Promise((resolve, reject) => {
      this.client.JoinChallenge({}, { deadline: Date.now() + this.timeoutMs }, (err: grpc.ServiceError | null, reply?: JoinChallengeReplyIn) =>
        (err ? reject(this.refusal('a challenge', err)) : resolve(new Uint8Array(reply!.challenge))));
    });
  }

  join(challenge: Uint8Array, document: Uint8Array): Promise<{ document: Uint8Array; sealedKeys: Uint8Array }> {
    return new Promise((resolve, reject) => {
      this.client.Join({ challenge: Buffer.from(challenge), document: Buffer.from(document) }, { deadline: Date.now() + this.timeoutMs },
        (err: grpc.ServiceError | null, reply?: JoinReplyIn) =>
        {
          if (err) return reject(this.refusal('the keys', err));
          this.witnessed = { signed: { statement: new Uint8Array(reply!.witnessed), signature: new Uint8Array(reply!.witnessed_signature) }, digest: joinDigest(document) };
          resolve({ document: new Uint8Array(reply!.document), sealedKeys: new Uint8Array(reply!.sealed_keys) });
        });
    });
  }

  close(): void {
    this.client.close();
  }

  private refusal(what: string, err: grpc.ServiceError): KeySharingError {
    return err.code === grpc.status.PERMISSION_DENIED
      ? new KeySharingError(`the member at ${this.address} refused to share ${what}: ${err.details}`)
      : new KeySharingError(`cannot reach the member enclave at ${this.address} for ${what}: ${err.details || grpc.status[err.code]}`);
  }
}
