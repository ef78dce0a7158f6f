import * as grpc from '@grpc/grpc-js';
import { randomBytes } from 'node:crypto';
import sodium from 'sodium-native';
import { channelOptions, enclaveProto, type EnclaveClient, type PreparedShardIn, type ShardsReplyIn, type ShardStateIn, type WitnessReplyIn } from '../../common/proto.js';
import { startLone, type Lone } from './processes.js';
import { freePort, startService, waitFor, type RunningService } from './service.js';

/** The gRPC error a call to an enclave failed with; throws if it succeeded (a refusal was expected). */
export async function grpcError(call: Promise<unknown>): Promise<grpc.ServiceError> {
  try {
    await call;
  } catch (err) {
    return err as grpc.ServiceError;
  }
  throw new Error('the call succeeded');
}

/** An enclave's placement RPCs (protos/enclave.proto), as the host's controller calls them. */
export interface ShardRpc {
  open(shard: number, generation: number): Promise<ShardStateIn>;
  close(shard: number): Promise<ShardStateIn>;
  /** A planned move's first step on the new owner: the shard read ahead, not served. */
  prepare(shard: number): Promise<PreparedShardIn>;
  shards(): Promise<ShardsReplyIn>;
  /** The host naming the enclave's other members (freshness across enclaves). */
  setPeers(addresses: string[]): Promise<void>;
  /**
   * The highest head of `shard` the enclave says it witnessed, and the highest owner generation
   * it has seen of it (its signed statement's JSON body; the signature is not checked here),
   * asked so that no generation is raised.
   */
  witnessed(shard: number): Promise<{ instance: string; generation: number; head: { store: string; seq: number; hash: string } | null }>;
  end(): void;
}

export function shardRpc(address: string): ShardRpc {
  const client = new (enclaveProto().Enclave)(address, grpc.credentials.createInsecure(), channelOptions) as unknown as EnclaveClient;
  const unary = <T>(call: (done: (err: grpc.ServiceError | null, value?: T) => void) => void) =>
    new Promise<T>((resolve, reject) => call((err, value) => (err ? reject(err) : resolve(value!))));
  return {
    open: (shard, generation) => unary<ShardStateIn>((done) => client.OpenShard({ shard, generation }, done)),
    close: (shard) => unary<ShardStateIn>((done) => client.CloseShard({ shard }, done)),
    prepare: (shard) => unary<PreparedShardIn>((done) => client.PrepareShard({ shard }, done)),
    shards: () => unary<ShardsReplyIn>((done) => client.Shards({}, done)),
    setPeers: async (addresses) => {
      await unary((done) => client.SetPeers({ addresses }, done));
    },
    witnessed: async (shard) => {
      const ask = async (generation: number) => {
        const reply = await unary<WitnessReplyIn>((done) => client.Witnessed({ shard, generation, nonce: randomBytes(16) }, done));
        const text = reply.statement.toString('utf8');
        return JSON.parse(text.slice(text.indexOf('\n') + 1)) as { instance: string; generation: number; head: { store: string; seq: number; hash: string } | null; newer?: number };
      };
      // Asked at generation 0, an enclave that has seen a higher one refuses, naming it; asked
      // again at that one, it answers and raises nothing: a look that changes no state.
      const first = await ask(0);
      return first.newer === undefined ? first : ask(first.newer);
    },
    end: () => client.close(),
  };
}

export interface ShardPair {
  /** Enclave A (with the host store and A's proxy): started first, makes the service's keys. */
  a: RunningService;
  /** Enclave B on A's host store, with the keys it took from A by attestation, and its own proxy. */
  b: { enclave: Lone; proxy: Lone; baseUrl: string; enclaveAddr: string };
  rpcA: ShardRpc;
  rpcB: ShardRpc;
  stop(): Promise<void>;
}

export interface PairOptions {
  /** Settings of B's own, made once A runs: e.g. HOST_STORE_ADDR of a second host store, on a copy of A's folder (a host serving B another copy). */
  bEnv?: (a: RunningService) => Promise<NodeJS.ProcessEnv>;
}

/**
 * Two enclaves of one service on one host store, as a cluster runs them: SHARDS=4 and
 * SHARDS_OPEN=none (each starts with the shard map and no shard open, and waits for the host's
 * OpenShard), B joining A for the keys (JOIN_ENCLAVE_ADDR), a proxy each, and a gRPC client
 * each for the placement RPCs.
 */
export async function startShardPair(extraEnv: NodeJS.ProcessEnv = {}, options: PairOptions = {}): Promise<ShardPair> {
  // Measured configuration (PCR1) must match for the join: both get the same operator key.
  const publicKey = Buffer.alloc(32);
  sodium.crypto_sign_keypair(publicKey, sodium.sodium_malloc(64));
  const operator = publicKey.toString('base64');
  const a = await startService({ SHARDS: '4', SHARDS_OPEN: 'none', OPERATOR_PUBKEY: operator, ...extraEnv });
  const others: Lone[] = [];
  try {
    const enclaveAddr = `127.0.0.1:${await freePort()}`;
    const port = await freePort();
    const enclave = startLone('enclave/main.js', { ...a.env, ...(await options.bEnv?.(a)), ENCLAVE_ADDR: enclaveAddr, JOIN_ENCLAVE_ADDR: a.enclaveAddr });
    others.push(enclave);
    await enclave.waitForOutput('enclave listening', 90_000);
    const proxy = startLone('proxy/main.js', { ...a.env, ENCLAVE_ADDR: enclaveAddr, PORT: String(port) });
    others.push(proxy);
    const baseUrl = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await fetch(`${baseUrl}/healthz`).catch(() => undefined))?.status === 200, 60_000, proxy.output);
    const rpcA = shardRpc(a.enclaveAddr);
    const rpcB = shardRpc(enclaveAddr);
    return {
      a, b: { enclave, proxy, baseUrl, enclaveAddr }, rpcA, rpcB,
      async stop() {
        rpcA.end();
        rpcB.end();
        for (const p of others.reverse()) await p.stop();
        await a.stop();
      },
    };
  } catch (err) {
    for (const p of others.reverse()) await p.stop();
    await a.stop();
    throw err;
  }
}
