import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { configFromCli } from '../common/config.js';
import { createLogger } from '../common/logger.js';
import { modelsDir } from '../common/paths.js';
import { createApi } from './api/index.js';
import { createAttestationProvider } from './attestation/create-provider.js';
import { setUpAuth } from './auth/setup.js';
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

let auth: ReturnType<typeof setUpAuth>;
try {
  auth = setUpAuth(config, log);
} catch (err) {
  // A bad keys file or a forbidden open mode stops the enclave, with the reason.
  log.fatal({ problem: (err as Error).message }, 'cannot start');
  process.stderr.write(`${(err as Error).message}\n`);
  process.exit(2);
}
process.on('SIGHUP', () => auth.reload());

const identity = generateIdentity();
const operatorKey = resolveOperatorKey(config.operatorPubkey, dataDir);
const embedder = await loadEmbedder({ name: config.embeddingModel, modelsDir });
const memory = new MemoryService(embedder);
const provider = await createAttestationProvider({ config, dataDir, embedder, operatorKey });
const userData = Buffer.from(JSON.stringify({ v: 1, operator_pubkey: Buffer.from(operatorKey).toString('base64') }));

const api = createApi({
  memory,
  attestation: { provider, identity, operatorKey, userData },
  auth: auth.authorizer,
  work: { maxInFlight: config.maxInFlight, timeoutMs: config.timeoutMs },
  log,
});
const server = createGrpcServer(api, () => ({
  ready: true,
  tee_name: provider.teeName,
  embedding_model: embedder.id,
  tenants: memory.tenantCount,
  auth_required: auth.authorizer.required,
}), log);

const port = await listen(server, config.address);
log.info({ address: config.address, port, tee: provider.teeName, embedding: embedder.id, dim: embedder.dimension }, 'enclave listening');

let stopping = false;
const stop = (signal: string) => {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'stopping');
  server.tryShutdown(() => {
    void embedder.close().finally(() => process.exit(0));
  });
  // Don't let a hung client hold the process: force after a grace period.
  setTimeout(() => server.forceShutdown(), 5000).unref();
};
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
