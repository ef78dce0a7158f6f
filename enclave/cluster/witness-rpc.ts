import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../../common/logger.js';
import type { PeersRequestIn, WitnessedRequestIn, WitnessReply, WitnessRequestIn } from '../../common/proto.js';
import { WitnessRefusedError, type Freshness } from './freshness.js';

/** SetPeers, Witness and Witnessed (protos/enclave.proto): the gRPC side of freshness.ts. */
export function witnessRpc(freshness: Freshness, log: Logger): grpc.UntypedServiceImplementation {
  const reply = (signed: { statement: Uint8Array; signature: Uint8Array }): WitnessReply =>
    ({ statement: Buffer.from(signed.statement), signature: Buffer.from(signed.signature) });
  const refusal = (err: unknown): Partial<grpc.StatusObject> => {
    if (err instanceof WitnessRefusedError) {
      log.warn({ problem: err.message }, 'refused a witness message');
      return { code: grpc.status.PERMISSION_DENIED, details: err.message };
    }
    log.error({ err }, 'witness failed');
    return { code: grpc.status.INTERNAL, details: 'internal error' };
  };
  return {
    SetPeers: (call: grpc.ServerUnaryCall<PeersRequestIn, object>, callback: grpc.sendUnaryData<object>) => {
      freshness.setPeers(call.request.addresses);
      callback(null, {});
    },
    Witness: (call: grpc.ServerUnaryCall<WitnessRequestIn, WitnessReply>, callback: grpc.sendUnaryData<WitnessReply>) => {
      try {
        callback(null, reply(freshness.answerWitness({ statement: new Uint8Array(call.request.statement), signature: new Uint8Array(call.request.signature) })));
      } catch (err) {
        callback(refusal(err));
      }
    },
    Witnessed: (call: grpc.ServerUnaryCall<WitnessedRequestIn, WitnessReply>, callback: grpc.sendUnaryData<WitnessReply>) => {
      try {
        callback(null, reply(freshness.answerWitnessed(call.request.shard, Number(call.request.generation), new Uint8Array(call.request.nonce))));
      } catch (err) {
        callback(refusal(err));
      }
    },
  };
}
