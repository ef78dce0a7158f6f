import type { BlobStore } from '../../common/blob-store.js';
import type { Logger } from '../../common/logger.js';
import type { Embedder } from '../embedding/types.js';
import type { MemoryJournal } from '../memory/journal.js';
import { reembedWithProgress, type ModelChangePolicy, type Reembeddable } from '../memory/model-change.js';
import type { EmbeddingModelId, ReplayMark } from '../memory/types.js';
import { parseKmsKeyArn } from './kms-key-arn.js';
import { KmsSealingKey } from './kms-sealing-key.js';
import { SimulatedSealingKey, type SealingKeySource } from './sealing-key.js';
import { ShardedStore, type OpenShards, type ShardTarget } from './sharded-store.js';
import { MEMORY_PREFIX } from './store.js';

export interface DurabilityConfig {
  teeMode: 'simulated' | 'nitro';
  snapshotLogBytes: number;
  /** SHARDS (undefined: unset). */
  shards?: number;
  /** OWNER_GENERATION (undefined: unset, the start time is used). */
  ownerGeneration?: number;
  /** SHARDS_OPEN (default all). */
  shardsOpen?: OpenShards;
  /** PREPARED_SHARDS_MAX (default DEFAULT_MAX_PREPARED). */
  preparedShardsMax?: number;
  onModelChange: ModelChangePolicy;
  kmsKeyId?: string;
  awsRegion?: string;
  kmsProxyPort: number;
  kmsTool: string;
  awsAccessKeyId?: string;
  awsSecretAccessKey?: string;
  awsSessionToken?: string;
}

/** The sealing key source for TEE_MODE: simulated locally, KMS on Nitro; either keeps its blob in the host store. */
export function createSealingKeySource(config: DurabilityConfig, blobs: BlobStore): SealingKeySource {
  if (config.teeMode === 'simulated') return new SimulatedSealingKey(blobs, MEMORY_PREFIX);
  const missing = ([['KMS_KEY_ID', config.kmsKeyId], ['AWS_REGION', config.awsRegion], ['AWS_ACCESS_KEY_ID', config.awsAccessKeyId], ['AWS_SECRET_ACCESS_KEY', config.awsSecretAccessKey]] as const)
    .filter(([, value]) => !value).map(([name]) => name);
  if (missing.length > 0) throw new Error(`TEE_MODE=nitro seals with a KMS data key and needs ${missing.join(', ')} (deploy/sealing.md)`);
  // The settings table already refused anything but a key ARN; KMS in AWS_REGION cannot use a key of another region.
  const arn = parseKmsKeyArn(config.kmsKeyId!);
  if (!arn) throw new Error('KMS_KEY_ID must be a key ARN (deploy/sealing.md)');
  if (arn.region !== config.awsRegion) throw new Error(`KMS_KEY_ID is a key in ${arn.region} but AWS_REGION is ${config.awsRegion}`);
  return new KmsSealingKey({
    blobs,
    sealedPrefix: MEMORY_PREFIX,
    tool: config.kmsTool,
    keyId: config.kmsKeyId!,
    region: config.awsRegion!,
    proxyPort: config.kmsProxyPort,
    credentials: { accessKeyId: config.awsAccessKeyId!, secretAccessKey: config.awsSecretAccessKey!, sessionToken: config.awsSessionToken },
  });
}

/** What the store needs of the memories it keeps durable (MemoryService, never imported by storage). */
export interface StoredMemories extends ShardTarget, Reembeddable {
  readonly embeddingModel: EmbeddingModelId;
  useJournal(journal: MemoryJournal): void;
}

/**
 * The sealing key (simulated, or released by KMS on Nitro), logged as which. Loaded before the
 * embedding model, which takes seconds: an enclave that cannot have its key refuses at once.
 */
export async function loadSealingKey(config: DurabilityConfig, blobs: BlobStore, log: Logger): Promise<Uint8Array> {
  const source = createSealingKeySource(config, blobs);
  const sealingKey = await source.load();
  if (source.simulated) log.warn({ sealing: source.description }, 'SIMULATED sealing: files are encrypted, but this host can read the key');
  else log.info({ sealing: source.description }, 'sealing key released');
  return sealingKey;
}

/**
 * Recovers the memories from the host store, sealed under `sealingKey`, into `memory`, and
 * makes every later change durable before it is acknowledged. If they were stored under
 * another embedding model, they are re-embedded with `embedder` (progress in the log) and
 * the store is rewritten under it, or, with ON_MODEL_CHANGE=refuse, opening fails.
 */
export async function openMemoryStore(options: {
  config: DurabilityConfig;
  blobs: BlobStore;
  /** loadSealingKey's. */
  sealingKey: Uint8Array;
  embedder: Embedder;
  memory: StoredMemories;
  log: Logger;
  /** Each durable batch: entries and seconds (metrics). */
  onCommit?: (entries: number, seconds: number) => void;
  /** Each shard's live replay ids, as it opens (StoreOptions.onReplayIds): the enclave's replay guard. */
  onReplayIds?: (marks: readonly ReplayMark[]) => void;
}): Promise<ShardedStore> {
  const { config, blobs, sealingKey, embedder, memory, log } = options;
  if (config.shardsOpen === 'none' && config.ownerGeneration !== undefined) {
    log.warn({ ownerGeneration: config.ownerGeneration }, 'OWNER_GENERATION is not used with SHARDS_OPEN=none: each OpenShard names the generation it opens a shard with');
  }
  const started = performance.now();
  const store = await ShardedStore.open({
    blobs,
    shards: config.shards,
    openShards: config.shardsOpen,
    maxPrepared: config.preparedShardsMax,
    // Unset: the start time, raised if need be above the store's last owner, so a restarted or
    // newly started enclave takes over from one started before it even if the clock went back.
    generation: config.ownerGeneration ?? Date.now(),
    outrank: config.ownerGeneration === undefined,
    sealingKey,
    embedding: memory.embeddingModel,
    reembed: config.onModelChange === 'reembed' ? () => reembedWithProgress(memory, embedder, log) : undefined,
    snapshotLogBytes: config.snapshotLogBytes,
    log,
    onCommit: options.onCommit,
    onReplayIds: options.onReplayIds,
  }, memory);
  memory.useJournal(store);
  log.info({ ...store.recovery, ms: Math.round(performance.now() - started) }, 'memories recovered');
  return store;
}

/** Start-up refusal: one clear line on stderr and in the log, then exit 1 (nothing is served). */
export function refuseToStart(log: Logger, err: unknown): never {
  const message = err instanceof Error ? err.message : String(err);
  log.fatal({ reason: message }, 'refusing to start');
  process.stderr.write(`enclave: refusing to start: ${message}\n`);
  process.exit(1);
}
