import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../../common/logger.js';
import type { PeersRequestIn, WitnessedRequestIn, WitnessReply, WitnessRequestIn } from '../../common/proto.js';
import { WitnessRefusedError, type Freshness } from './freshness.js';

/**
 * Most answer bytes a Witnesses stream may hold unsent before the member ends it: answers wait
 * there only while the owner does not read them, and a host that keeps sending rounds without
 * reading must not fill the enclave's memory.
 */
export const MAX_UNSENT_WITNESS_BYTES = 8 * 1024 * 1024;

const NONE = Buffer.alloc(0);

/** SetPeers, Witnesses and Witnessed (protos/enclave.proto): the gRPC side of freshness.ts. */
export function witnessRpc(freshness: Freshness, log: Logger, maxUnsentBytes = MAX_UNSENT_WITNESS_BYTES): grpc.UntypedServiceImplementation {
  const reply = (signed: { statement: Uint8Array; signature: Uint8Array }, id = 0): Required<WitnessReply> =>
    ({ id, statement: Buffer.from(signed.statement), signature: Buffer.from(signed.signature), refused: '' });
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
    // Each round answered in the turn it arrives (answerWitness checks and records at once), in order.
    Witnesses: (call: grpc.ServerDuplexStream<WitnessRequestIn, WitnessReply>) => {
      let open = true;
      let unsent = 0;
      call.on('data', (message: WitnessRequestIn) => {
        if (!open) return;
        if (unsent > maxUnsentBytes) {
          open = false;
          log.warn({ unsentBytes: unsent }, 'witness answers are not being read; ending the stream');
          call.emit('error', { code: grpc.status.RESOURCE_EXHAUSTED, details: 'answers are not being read' });
          return;
        }
        let answer: Required<WitnessReply>;
        try {
          answer = reply(freshness.answerWitness({ statement: new Uint8Array(message.statement), signature: new Uint8Array(message.signature) }), message.id);
        } catch (err) {
          answer = { id: message.id, statement: NONE, signature: NONE, refused: refusal(err).details ?? 'refused' };
        }
        const bytes = answer.statement.length + answer.refused.length + 128;
        unsent += bytes;
        call.write(answer, () => { unsent -= bytes; });
      });
      call.on('end', () => {
        if (open) call.end();
        open = false;
      });
      call.on('error', () => { open = false; });
      call.on('cancelled', () => { open = false; });
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
