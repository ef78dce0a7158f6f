import * as grpc from '@grpc/grpc-js';
import { channelOptions, enclaveProto, type EnclaveClient, type WitnessReplyIn } from '../../common/proto.js';
import type { PeerChannel, Signed } from './freshness.js';

/**
 * The other members' gRPC servers, as the host names them (SetPeers), one channel each: how an
 * owner tells them a shard's new head and a new owner asks what they witnessed. Nothing on it
 * needs hiding (heads are the host's to see); every answer is a signed statement (freshness.ts).
 */
export class PeerClients implements PeerChannel {
  private readonly clients = new Map<string, EnclaveClient>();

  witness(address: string, request: Signed, timeoutMs: number): Promise<Signed> {
    return this.unary(address, timeoutMs, (client, options, done) =>
      client.Witness({ statement: Buffer.from(request.statement), signature: Buffer.from(request.signature) }, options, done));
  }

  witnessed(address: string, shard: number, generation: number, nonce: Uint8Array, timeoutMs: number): Promise<Signed> {
    return this.unary(address, timeoutMs, (client, options, done) => client.Witnessed({ shard, generation, nonce: Buffer.from(nonce) }, options, done));
  }

  keepOnly(addresses: readonly string[]): void {
    const keep = new Set(addresses);
    for (const [address, client] of this.clients) {
      if (keep.has(address)) continue;
      client.close();
      this.clients.delete(address);
    }
  }

  close(): void {
    this.keepOnly([]);
  }

  private unary(address: string, timeoutMs: number, send: (client: EnclaveClient, options: grpc.CallOptions, done: (err: grpc.ServiceError | null, reply?: WitnessReplyIn) => void) => void): Promise<Signed> {
    let client = this.clients.get(address);
    if (!client) {
      client = new (enclaveProto().Enclave)(address, grpc.credentials.createInsecure(), channelOptions) as unknown as EnclaveClient;
      this.clients.set(address, client);
    }
    return new Promise((resolve, reject) => send(client, { deadline: Date.now() + timeoutMs }, (err, reply) =>
      (err ? reject(err) : resolve({ statement: new Uint8Array(reply!.statement), signature: new Uint8Array(reply!.signature) }))));
  }
}
