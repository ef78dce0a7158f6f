import { resolve } from 'node:path';
import { configFromCli } from '../common/config.js';
import { createLogger } from '../common/logger.js';
import { modelsDir } from '../common/paths.js';
import { createApi } from './api/create-api.js';
import { ReplayGuard } from './api/replay-guard.js';
import { createAttestationProvider } from './attestation/create-provider.js';
import { hostStoreKeysProblem, setUpAuth, type AuthSetup } from './auth/setup.js';
import { startHostStoreKeys } from './auth/host-store-keys.js';
import { ChatService } from './chat/chat-service.js';
import { Extractor } from './chat/extraction.js';
import { OFFLINE_MODEL } from './chat/offline-responder.js';
import { enclaveSettings } from './config.js';
import { loadEmbedder } from './embedding/embedder.js';
import { MemoryService } from './memory/memory-service.js';
import { listen } from '../common/grpc-listen.js';
import { createGrpcServer } from './grpc-server.js';
import { generateServiceKeys, type ServiceKeys } from './keys.js';
import { JoinClient } from './cluster/join-client.js';
import { joinService, KeyMember } from './cluster/key-sharing.js';
import { shardControl } from './cluster/shard-control.js';
import { Freshness } from './cluster/freshness.js';
import { PeerClients } from './cluster/peer-client.js';
import { witnessRpc } from './cluster/witness-rpc.js';
import { EnclaveMetrics } from './observability/metrics.js';
import { hostLogSink } from './observability/host-log-sink.js';
import { SearchReplicas } from './search-worker/search-replicas.js';
import { DEFAULT_TIERS } from './vectors/tiered-index.js';
import { resolveOperatorKey } from './operator-key.js';
import { GrpcBlobStore } from './storage/grpc-blob-store.js';
import { loadSealingKey, openMemoryStore, refuseToStart } from './storage/open-memory-store.js';
import { heapShortfall } from './memory/heap-budget.js';
import { SEALED_MAX_AGE_MS } from '../protocol/sealed.js';
import { encodeUserData } from '../protocol/user-data.js';
import { stopOnSignals } from '../common/grpc-stop.js';
import { CONFIG_ERROR_EXIT, exitWithConfigError, stopWithSupervisor, tellSupervisorReady } from '../common/supervised.js';
import { addressTarget, listenErrorLine } from '../common/listen-error.js';

const config = configFromCli('agent-service enclave: the trusted process holding keys, memory, embeddings and attestation.', enclaveSettings);
// Shards opened at start are opened without asking anyone which head is the newest: with
// witnesses, only the host's placement opens them (OpenShard), after asking the members.
if (config.witnesses > 0 && config.shardsOpen === 'all') {
  await exitWithConfigError('enclave', `WITNESSES=${config.witnesses} needs SHARDS_OPEN=none (a cluster whose placement opens each shard after asking the other enclaves which head is the newest)`);
}
// On Nitro the only way out for logs: redacted lines to the host's journal (host-log-sink.ts).
const sink = config.logSinkFd > 0 ? hostLogSink(config.logSinkFd) : undefined;
const log = createLogger('enclave', config.logLevel, config.logFormat, { sink });
/** Where start-up got to: what an operator reads in the journal when an enclave will not come up. */
const bootStage = (stage: string) => log.info({ stage }, 'boot stage');
bootStage('started');
// The gauges read memory and api when scraped, which can only happen once the server below listens.
const metrics = new EnclaveMetrics({
  usage: (): { tenants: number; memories: number } => memory.usage,
  inFlight: () => api.inFlight(),
  searchWorker: () => ({ copies: searchReplicas?.copies ?? 0, searches: (searchReplicas?.answered ?? 0) + (searchReplicas?.matched ?? 0) }),
  shardHeads: () => Array.from({ length: store.count }, (_, shard) => store.head(shard).seq),
  shardsOwned: () => Array.from({ length: store.count }, (_, shard) => store.holds(shard)),
}, { maxInFlight: config.maxInFlight });

// The enclave has no disk: everything durable goes, sealed, to the host store.
const blobs = new GrpcBlobStore(config.hostStoreAddr, { callTimeoutMs: config.hostStoreTimeoutMs });
await blobs.ready(config.hostStoreTimeoutMs).catch((err: unknown) => refuseToStart(log, err));
bootStage('host-store');

const operatorKey = await resolveOperatorKey(config.operatorPubkey, blobs).catch((err: unknown) => refuseToStart(log, err));

let auth: AuthSetup;
try {
  const problem = hostStoreKeysProblem(config);
  if (problem) throw new Error(problem);
  auth = config.apiKeysBlob === undefined
    ? setUpAuth(config, log)
    : await startHostStoreKeys({ blobs, name: config.apiKeysBlob, operatorKey, pollMs: config.apiKeysPollSeconds * 1000, log });
} catch (err) {
  // A bad keys file or a forbidden open mode stops the enclave, with the reason.
  log.fatal({ problem: (err as Error).message }, 'cannot start');
  process.stderr.write(`${(err as Error).message}\n`);
  process.exit(2);
}
process.on('SIGHUP', () => auth.reload());
bootStage('api-keys');
// Before the model: sealed blobs without their key (or KMS refusing it) stop the enclave at once.
const sealingKey = await loadSealingKey(config, blobs, log).catch((err: unknown) => refuseToStart(log, err));
const embedder = await loadEmbedder({ name: config.embeddingModel, modelsDir: config.modelsDir ? resolve(config.modelsDir) : modelsDir }).catch((err: unknown) => {
  // A model that is not installed is configuration, not a crash: one line, and no restart loop.
  log.fatal({ problem: (err as Error).message }, 'cannot load the embedding model');
  process.stderr.write(`enclave: cannot load embedding model "${config.embeddingModel}": ${(err as Error).message}\n`);
  process.exit(CONFIG_ERROR_EXIT);
});
// Large tenants' searches on a second thread; if it fails, they are searched here as without it.
const searchReplicas = config.searchWorker === 'on'
  ? new SearchReplicas({ dimension: embedder.dimension, hnsw: DEFAULT_TIERS.hnsw }, (err) => log.error({ err }, 'the search worker failed; large tenants are searched on the event loop from now on'))
  : undefined;
const capacity = { maxTenants: config.maxTenants, maxMemories: config.maxMemories, maxStoredBytes: config.maxStoredBytes, maxTerms: config.maxTerms };
// The capacity settings protect the enclave only if its heap can hold what they admit.
const shortfall = heapShortfall(capacity);
if (shortfall) {
  log.warn({ ...shortfall, flag: `--max-old-space-size=${shortfall.neededMiB}` },
    'the heap limit is below what MAX_MEMORIES, MAX_STORED_BYTES and MAX_TERMS admit: the enclave could run out of heap before refusing an add; give node the flag (and the machine the memory), or lower them (docs/configuration.md#words-and-heap)');
}
const memory: MemoryService = new MemoryService(embedder, {
  meter: metrics,
  searchReplicas,
  maxMemoriesPerTenant: config.maxMemoriesPerTenant,
  maxMemoriesPerKey: config.maxMemoriesPerKey,
  capacity,
  termLimits: { maxTermsPerMemory: config.maxTermsPerMemory, maxTermsPerTenant: config.maxTermsPerTenant },
  history: { maxVersions: config.memoryHistoryVersions, maxDeleted: config.memoryHistoryDeleted },
});
// Exits (1) on a damaged, altered or foreign store: never serve memories half-loaded.
// Memories stored under another embedding model are re-embedded here, before anything is
// served, or refused (ON_MODEL_CHANGE).
// Sealed envelopes seen: here, and (learnt as each shard opens, before it is served) by any owner of a shard held.
const replayGuard = new ReplayGuard(SEALED_MAX_AGE_MS);
const store = await openMemoryStore({
  config, blobs, sealingKey, embedder, memory, log, onCommit: (entries, seconds) => metrics.committed(entries, seconds),
  onReplayIds: (marks) => marks.forEach((mark) => replayGuard.remember(mark.id, mark.expires_at)),
}).catch((err: unknown) => refuseToStart(log, err));
bootStage('store');

const provider = await createAttestationProvider({ config, blobs, embedder, operatorKey });
const attestationContext = { provider, rootPem: await provider.rootCertificatePem?.(), operatorKey };
// The service's keys: new, or those of a running enclave of the service, handed over only by attestation.
let sponsorHeads: JoinClient['witnessed'];
const keys = config.joinEnclaveAddr === undefined ? generateServiceKeys() : await joinAt(config.joinEnclaveAddr);
const { identity, requestKey } = keys;
// Freshness across enclaves: the heads this enclave witnessed, and how it asks the others.
const peers = new PeerClients();
const freshness = new Freshness(identity, peers, { witnesses: config.witnesses, timeoutMs: config.witnessTimeoutMs, log });
if (sponsorHeads) {
  try {
    const taken = freshness.adopt(sponsorHeads.signed, sponsorHeads.digest);
    log.info({ shards: taken }, 'took the heads the member witnessed');
  } catch (err) {
    refuseToStart(log, err);
  }
}
const userData = encodeUserData({ operatorKey, boxPublicKey: requestKey.publicKey });
bootStage('keys');

// Pins say which model may see prompts and memories: without an https model to pin, they are a mistake, not a no-op.
if (config.modelTlsPins.length > 0 && !config.modelBaseUrl?.startsWith('https:')) {
  await exitWithConfigError('enclave', `MODEL_TLS_PINS needs an https MODEL_BASE_URL (it is ${config.modelBaseUrl === undefined ? 'unset' : `"${config.modelBaseUrl}"`}); set one, or unset MODEL_TLS_PINS`);
}
// undici is loaded only for an upstream model: it costs a start about 0.3 s of CPU that an offline enclave never uses.
const upstream = config.modelBaseUrl === undefined ? undefined : new (await import('./chat/upstream.js')).UpstreamModel({
  baseUrl: config.modelBaseUrl,
  apiKey: config.modelApiKey,
  connectTimeoutMs: config.modelConnectTimeoutMs,
  responseTimeoutMs: config.modelTimeoutMs,
  connectRetries: config.modelConnectRetries,
  tlsPins: config.modelTlsPins,
});
const chat = new ChatService(memory, upstream, { memoryTopK: config.chatMemoryTopK, toolRounds: config.chatToolRounds, toolMaxAdds: config.chatToolMaxAdds, memoryUpstream: config.memoryUpstream });

const extraction = new Extractor(memory, upstream, { memoryUpstream: config.memoryUpstream, defaultModel: config.modelNames[0] });

const api = createApi({
  memory,
  chat,
  extraction,
  models: { chatModels: config.modelNames, offlineModel: OFFLINE_MODEL, created: Math.floor(Date.now() / 1000) },
  attestation: { provider, identity, operatorKey, boxPublicKey: requestKey.publicKey, userData, log },
  identity,
  state: store,
  sealed: { key: requestKey, replay: replayGuard },
  auth: auth.authorizer,
  work: { maxInFlight: config.maxInFlight, maxInFlightPerKey: config.maxInFlightPerKey, maxInFlightKeyless: config.maxInFlightKeyless, timeoutMs: config.timeoutMs, maxStreamMs: config.maxStreamMs },
  log,
  observer: { handled: (route, status, seconds, streamed) => metrics.handled(route, status, seconds, streamed) },
});
const server = createGrpcServer(api, () => ({
  ready: true,
  tee_name: provider.teeName,
  embedding_model: embedder.id,
  auth_required: auth.authorizer.required,
  // By construction: the server listens only after both (see HealthReply).
  embedding_model_loaded: true,
  store_recovered: true,
}), log, () => metrics.exposition(), {
  keyMember: new KeyMember(keys, attestationContext, userData),
  shards: { ...shardControl(store, memory, log, freshness), ...witnessRpc(freshness, log) },
  witnessedFor: (digest) => freshness.exportFor(digest),
});

const port = await listen(server, config.address).catch((err: unknown) => {
  const line = listenErrorLine(addressTarget('ENCLAVE_ADDR', config.address), err);
  log.fatal({ problem: line }, 'cannot start');
  return exitWithConfigError('enclave', line);
});
log.info({
  address: config.address, port, tee: provider.teeName, embedding: embedder.id, dim: embedder.dimension,
  chatModel: upstream ? new URL(config.modelBaseUrl!).origin : 'local-memory (offline)',
}, 'enclave listening');
bootStage('serving');
sink?.serving();
tellSupervisorReady();

/** Takes the keys from the member at `address`, or stops: an enclave with keys of its own would be another service. */
async function joinAt(address: string): Promise<ServiceKeys> {
  const client = new JoinClient(address);
  try {
    const joined = await joinService(client, attestationContext);
    sponsorHeads = client.witnessed;
    log.info({ member: address }, 'took the service keys from a member enclave whose attestation verified');
    return joined;
  } catch (err) {
    return refuseToStart(log, err);
  } finally {
    client.close();
  }
}

stopOnSignals(server, log, 5000, () => Promise.allSettled([Promise.resolve(peers.close()), store.close(), embedder.close(), upstream?.close(), searchReplicas?.close()]).finally(() => blobs.close()));
stopWithSupervisor();
