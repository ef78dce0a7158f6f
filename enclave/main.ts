import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { configFromCli } from '../common/config.js';
import { createLogger } from '../common/logger.js';
import { modelsDir } from '../common/paths.js';
import { createApi } from './api/index.js';
import { createAttestationProvider } from './attestation/create-provider.js';
import { ChatService } from './chat/chat-service.js';
import { UpstreamModel } from './chat/upstream.js';
import { enclaveSettings } from './config.js';
import { loadEmbedder } from './embedding/embedder.js';
import { createGrpcServer, listen } from './grpc-server.js';
import { generateIdentity } from './keys.js';
import { MemoryService } from './memory/memory-service.js';
import { resolveOperatorKey } from './operator-key.js';

const config = configFromCli('agent-service enclave: the trusted process holding keys, memory, embeddings and attestation.', enclaveSettings);
const log = createLogger('enclave', config.logLevel);

const dataDir = resolve(config.dataDir);
mkdirSync(dataDir, { recursive: true, mode: 0o700 });

const identity = generateIdentity();
const operatorKey = resolveOperatorKey(config.operatorPubkey, dataDir);
const embedder = await loadEmbedder({ name: config.embeddingModel, modelsDir });
const memory = new MemoryService(embedder);
const provider = await createAttestationProvider({ config, dataDir, embedder, operatorKey });
const userData = Buffer.from(JSON.stringify({ v: 1, operator_pubkey: Buffer.from(operatorKey).toString('base64') }));

const upstream = config.modelBaseUrl === undefined ? undefined : new UpstreamModel({
  baseUrl: config.modelBaseUrl,
  apiKey: config.modelApiKey,
  connectTimeoutMs: config.modelConnectTimeoutMs,
  responseTimeoutMs: config.modelTimeoutMs,
  connectRetries: config.modelConnectRetries,
});
const chat = new ChatService(memory, upstream, { memoryTopK: config.chatMemoryTopK, toolRounds: config.chatToolRounds });

const api = createApi({ memory, attestation: { provider, identity, operatorKey, userData }, chat, log });
const server = createGrpcServer(api, () => ({
  ready: true,
  tee_name: provider.teeName,
  embedding_model: embedder.id,
  tenants: memory.tenantCount,
}), log);

const port = await listen(server, config.address);
log.info({
  address: config.address, port, tee: provider.teeName, embedding: embedder.id, dim: embedder.dimension,
  chatModel: upstream ? new URL(config.modelBaseUrl!).origin : 'local-memory (offline)',
}, 'enclave listening');

let stopping = false;
const stop = (signal: string) => {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'stopping');
  server.tryShutdown(() => {
    void Promise.allSettled([embedder.close(), upstream?.close()]).finally(() => process.exit(0));
  });
  // Don't let a hung client hold the process: force after a grace period.
  setTimeout(() => server.forceShutdown(), 5000).unref();
};
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
