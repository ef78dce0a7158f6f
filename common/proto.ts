import { resolve } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { repoRoot } from './paths.js';
import type { ProtoGrpcType } from './generated/enclave.js';
import type { ProtoGrpcType as HostStoreGrpcType } from './generated/host-store.js';

export type { ApiRequest__Output as ApiRequest } from './generated/agent/enclave/v1/ApiRequest.js';
export type { ApiReply } from './generated/agent/enclave/v1/ApiReply.js';
export type { ApiReply__Output as ApiReplyIn } from './generated/agent/enclave/v1/ApiReply.js';
export type { ApiChunk, ApiChunk__Output as ApiChunkIn } from './generated/agent/enclave/v1/ApiChunk.js';
export type { ExchangeRequest, ExchangeRequest__Output as ExchangeRequestIn } from './generated/agent/enclave/v1/ExchangeRequest.js';
export type { ExchangeReply, ExchangeReply__Output as ExchangeReplyIn } from './generated/agent/enclave/v1/ExchangeReply.js';
export type { HealthReply, HealthReply__Output as HealthReplyIn } from './generated/agent/enclave/v1/HealthReply.js';
export type { MetricsReply } from './generated/agent/enclave/v1/MetricsReply.js';
export type { JoinChallengeReply, JoinChallengeReply__Output as JoinChallengeReplyIn } from './generated/agent/enclave/v1/JoinChallengeReply.js';
export type { JoinRequest, JoinRequest__Output as JoinRequestIn } from './generated/agent/enclave/v1/JoinRequest.js';
export type { JoinReply, JoinReply__Output as JoinReplyIn } from './generated/agent/enclave/v1/JoinReply.js';
export type { OpenShardRequest, OpenShardRequest__Output as OpenShardRequestIn } from './generated/agent/enclave/v1/OpenShardRequest.js';
export type { CloseShardRequest, CloseShardRequest__Output as CloseShardRequestIn } from './generated/agent/enclave/v1/CloseShardRequest.js';
export type { ShardState, ShardState__Output as ShardStateIn } from './generated/agent/enclave/v1/ShardState.js';
export type { PrepareShardRequest__Output as PrepareShardRequestIn } from './generated/agent/enclave/v1/PrepareShardRequest.js';
export type { PreparedShard, PreparedShard__Output as PreparedShardIn } from './generated/agent/enclave/v1/PreparedShard.js';
export type { ShardsReply, ShardsReply__Output as ShardsReplyIn } from './generated/agent/enclave/v1/ShardsReply.js';
export type { PeersRequest__Output as PeersRequestIn } from './generated/agent/enclave/v1/PeersRequest.js';
export type { WitnessRequest__Output as WitnessRequestIn } from './generated/agent/enclave/v1/WitnessRequest.js';
export type { WitnessReply, WitnessReply__Output as WitnessReplyIn } from './generated/agent/enclave/v1/WitnessReply.js';
export type { WitnessedRequest__Output as WitnessedRequestIn } from './generated/agent/enclave/v1/WitnessedRequest.js';
export type { EnclaveClient, EnclaveHandlers } from './generated/agent/enclave/v1/Enclave.js';
export type { HostStoreClient, HostStoreHandlers } from './generated/agent/hoststore/v1/HostStore.js';
export type { BlobChunk, BlobChunk__Output as BlobChunkIn } from './generated/agent/hoststore/v1/BlobChunk.js';
export type { StreamedAppend__Output as StreamedAppendIn } from './generated/agent/hoststore/v1/StreamedAppend.js';
export type { AppendAck__Output as AppendAckIn } from './generated/agent/hoststore/v1/AppendAck.js';

export const protoPath = resolve(repoRoot, 'protos/enclave.proto');
export const hostStoreProtoPath = resolve(repoRoot, 'protos/host-store.proto');

// These options must match the ones given to proto-loader-gen-types (package.json
// "build"), or the generated types lie about the runtime shapes.
const loaderOptions: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  bytes: Buffer,
  defaults: true,
  oneofs: true,
};

let cached: ProtoGrpcType | undefined;
let cachedHostStore: HostStoreGrpcType | undefined;

/** The loaded `agent.enclave.v1` package, shared by both processes. */
export function enclaveProto(): ProtoGrpcType['agent']['enclave']['v1'] {
  cached ??= grpc.loadPackageDefinition(
    protoLoader.loadSync(protoPath, loaderOptions),
  ) as unknown as ProtoGrpcType;
  return cached.agent.enclave.v1;
}

/** The loaded `agent.hoststore.v1` package: the enclave dials it, the host store serves it. */
export function hostStoreProto(): HostStoreGrpcType['agent']['hoststore']['v1'] {
  cachedHostStore ??= grpc.loadPackageDefinition(
    protoLoader.loadSync(hostStoreProtoPath, loaderOptions),
  ) as unknown as HostStoreGrpcType;
  return cachedHostStore.agent.hoststore.v1;
}

/**
 * Channel options for both ends. Messages are capped a little above the largest body
 * the proxy accepts; reconnect back-off is kept short so the proxy recovers within
 * about a second once the enclave is back. Channelz (grpc-js' live introspection, which
 * counts and timestamps every call on both ends) is off: nothing here serves it.
 */
export const channelOptions = {
  'grpc.enable_channelz': 0,
  'grpc.max_receive_message_length': 8 * 1024 * 1024,
  'grpc.max_send_message_length': 8 * 1024 * 1024,
  'grpc.initial_reconnect_backoff_ms': 200,
  'grpc.max_reconnect_backoff_ms': 1000,
  'grpc.keepalive_time_ms': 30_000,
} as const;

/**
 * The host store's channel: a snapshot streams in chunks, but one group-committed batch of
 * memories is one message, so it may be larger than any API request.
 */
export const hostStoreChannelOptions = {
  ...channelOptions,
  'grpc.max_receive_message_length': 128 * 1024 * 1024,
  'grpc.max_send_message_length': 128 * 1024 * 1024,
} as const;
