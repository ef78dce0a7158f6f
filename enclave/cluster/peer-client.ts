import * as grpc from '@grpc/grpc-js';
import { channelOptions, enclaveProto, type EnclaveClient, type WitnessReplyIn } from '../../common/proto.js';
import { StreamedCalls } from '../../common/streamed-calls.js';
import type { PeerChannel, Signed } from './freshness.js';

/** A member's channel: its client, and the Witnesses stream the rounds go out on. */
interface Peer {
  client: EnclaveClient;
  rounds: StreamedCalls<WitnessReplyIn>;
}

/**
 * The other members' gRPC servers, as the host names them (SetPeers), one channel each: how an
 * owner tells them its shards' new heads (a message on a long-lived Witnesses stream per round)
 * and a new owner asks what they witnessed (a call: once per shard opened). Nothing on it needs
 * hiding (heads are the host's to see); every answer is a signed statement (freshness.ts).
 */
export class PeerClients implements PeerChannel {
  private readonly peers = new Map<string, Peer>();

  async witness(address: string, request: Signed, timeoutMs: number): Promise<Signed> {
    const reply = await this.peer(address).rounds.call({ statement: Buffer.from(request.statement), signature: Buffer.from(request.signature) }, timeoutMs);
    if (reply.refused) throw new Error(`the member refused: ${reply.refused}`);
    return signed(reply);
  }

  witnessed(address: string, shard: number, generation: number, nonce: Uint8Array, timeoutMs: number): Promise<Signed> {
    const { client } = this.peer(address);
    return new Promise((resolve, reject) => client.Witnessed({ shard, generation, nonce: Buffer.from(nonce) }, { deadline: Date.now() + timeoutMs }, (err, reply) =>
      (err ? reject(err) : resolve(signed(reply!)))));
  }

  keepOnly(addresses: readonly string[]): void {
    const keep = new Set(addresses);
    for (const [address, peer] of this.peers) {
      if (keep.has(address)) continue;
      peer.rounds.close();
      peer.client.close();
      this.peers.delete(address);
    }
  }

  close(): void {
    this.keepOnly([]);
  }

  private peer(address: string): Peer {
    let peer = this.peers.get(address);
    if (!peer) {
      const client = new (enclaveProto().Enclave)(address, grpc.credentials.createInsecure(), channelOptions) as unknown as EnclaveClient;
      const rounds = new StreamedCalls<WitnessReplyIn>({
        open: () => client.Witnesses() as unknown as grpc.ClientDuplexStream<unknown, WitnessReplyIn>,
        broken: (err) => new Error(`the Witnesses stream to ${address} ended${err ? `: ${err.details || err.message}` : ''}`),
        late: (timeoutMs) => new Error(`no answer from ${address} within ${timeoutMs} ms`),
      });
      peer = { client, rounds };
      this.peers.set(address, peer);
    }
    return peer;
  }
}

const signed = (reply: WitnessReplyIn): Signed => ({ statement: new Uint8Array(reply.statement), signature: new Uint8Array(reply.signature) });
