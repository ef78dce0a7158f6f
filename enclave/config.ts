import { ConfigError, flag, hostPort, parseHostPort, integer, logFormat, logLevel, oneOf, list, optionalText, text, type Setting } from '../common/config.js';
import { MAX_SHARDS } from '../protocol/shards.js';
import { DEFAULT_SHARDS } from './storage/sharded-store.js';
import { kmsKeyArnProblem, parseKmsKeyArn } from './storage/kms-key-arn.js';

/** An optional http(s) URL, checked at start-up rather than at the first chat request. */
function optionalHttpUrl(name: string, description: string): Setting<string | undefined> {
  return {
    name,
    description,
    parse(raw) {
      if (raw === undefined || raw === '') return undefined;
      let url: URL | undefined;
      try {
        url = new URL(raw);
      } catch {
        url = undefined;
      }
      if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
        throw new ConfigError([`${name}: expected an http(s) URL, got "${raw}"`]);
      }
      return raw;
    },
  };
}

/** An optional host:port. */
function optionalHostPort(name: string, description: string): Setting<string | undefined> {
  return {
    name,
    description,
    parse(raw) {
      if (raw === undefined || raw === '') return undefined;
      if (!parseHostPort(raw)) throw new ConfigError([`${name}: expected host:port, got "${raw}"`]);
      return raw;
    },
  };
}

/**
 * SHARDS: unset is not the same as the default, since a count set explicitly must equal the
 * one the data was made with (storage/sharded-store.ts), while unset takes whatever it was.
 */
function shardCount(name: string, description: string): Setting<number | undefined> {
  return {
    name,
    description,
    parse(raw) {
      if (raw === undefined || raw === '') return undefined;
      if (!/^\d+$/.test(raw.trim()) || Number(raw) < 1 || Number(raw) > MAX_SHARDS) throw new ConfigError([`${name}: must be an integer from 1 to ${MAX_SHARDS}, got "${raw}"`]);
      return Number(raw);
    },
  };
}

/** OWNER_GENERATION: unset is the start time (openMemoryStore), not a fixed default. */
function ownerGeneration(name: string, description: string): Setting<number | undefined> {
  return {
    name,
    description,
    parse(raw) {
      if (raw === undefined || raw === '') return undefined;
      if (!/^\d{1,15}$/.test(raw.trim())) throw new ConfigError([`${name}: must be a non-negative integer below 10^15, got "${raw}"`]);
      return Number(raw);
    },
  };
}

/** An optional KMS key ARN: an alias or a bare key id is a configuration error (kms-key-arn.ts says why). */
function optionalKmsKeyArn(name: string, description: string): Setting<string | undefined> {
  return {
    name,
    description,
    parse(raw) {
      if (raw === undefined || raw === '') return undefined;
      if (!parseKmsKeyArn(raw)) throw new ConfigError([`${name}: ${kmsKeyArnProblem(raw)}`]);
      return raw;
    },
  };
}

/**
 * SHA-256 SPKI pins, comma-separated, each 32 bytes in base64 or hex; parsed to base64, the
 * form answers name them in (protocol/upstream.ts).
 */
function spkiPins(name: string, description: string): Setting<string[]> {
  return {
    name, description, defaultText: '(empty)',
    parse(raw) {
      const items = (raw ?? '').split(',').map((item) => item.trim()).filter(Boolean);
      const bad = items.filter((item) => pinBytes(item) === undefined);
      if (bad.length > 0) throw new ConfigError([`${name}: each pin must be a SHA-256 (32 bytes) in base64 or hex, got ${bad.map((b) => JSON.stringify(b)).join(', ')}`]);
      return [...new Set(items.map((item) => pinBytes(item)!.toString('base64')))].sort();
    },
  };
}

function pinBytes(text: string): Buffer | undefined {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  const bytes = /^[A-Za-z0-9+/]{43}=$/.test(text) ? Buffer.from(text, 'base64') : undefined;
  return bytes?.length === 32 ? bytes : undefined;
}

/** Every setting of the enclave process; `npm run start:enclave -- --help` prints this table. */
export const enclaveSettings = {
  address: hostPort('ENCLAVE_ADDR', 'Address the enclave\'s gRPC server listens on', '127.0.0.1:50051'),
  hostStoreAddr: hostPort('HOST_STORE_ADDR', 'Where the enclave dials the host store that keeps its sealed state (the enclave has no disk of its own)', '127.0.0.1:50052'),
  hostStoreTimeoutMs: integer('HOST_STORE_TIMEOUT_MS', 'Longest one host-store call may take (a write not confirmed by then answers 503); also how long start-up waits for the host store', 15_000, 100, 600_000),
  joinEnclaveAddr: optionalHostPort('JOIN_ENCLAVE_ADDR', 'Another running enclave of this service (its ENCLAVE_ADDR, as this one reaches it) to take the signing and box keys from, so clients see one service key: it hands them over only if this enclave\'s attestation verifies with PCRs and operator key equal to its own, and this one takes them only if that enclave\'s does (docs/trust-model.md, Keys shared by attestation). Refuses to start if the join fails. Unset: new keys'),
  teeMode: oneOf('TEE_MODE', 'Attestation provider', ['simulated', 'nitro'] as const, 'simulated'),
  operatorPubkey: optionalText('OPERATOR_PUBKEY', 'Operator Ed25519 public key, base64 or hex (default: a key pair kept in the host store)'),
  modelBaseUrl: optionalHttpUrl('MODEL_BASE_URL', 'OpenAI-compatible chat model base URL, e.g. https://api.openai.com/v1 (default: built-in offline responder)'),
  modelTlsPins: spkiPins('MODEL_TLS_PINS', 'SHA-256 pins of the chat model\'s TLS certificate key (SPKI), base64 or hex, comma-separated: the enclave refuses any other certificate before sending anything; measured with the configuration (needs an https MODEL_BASE_URL)'),
  memoryUpstream: oneOf('MEMORY_UPSTREAM', 'Whether the tenant\'s memories may go to MODEL_BASE_URL: send, or never (chat then sends the prompt without memories or memory tools, and answers say memories were withheld; the offline responder still uses them); measured with the configuration', ['send', 'never'] as const, 'send'),
  modelApiKey: optionalText('MODEL_API_KEY', 'API key for MODEL_BASE_URL; lives only in the enclave'),
  modelNames: list('MODEL_NAMES', 'Chat models GET /v1/models lists for MODEL_BASE_URL, comma-separated (chat passes any model name through)'),
  embeddingModel: text('EMBEDDING_MODEL', 'Embedding model name: static, or a transformer model installed by `npm run model:fetch -- <name>`', 'static'),
  onModelChange: oneOf('ON_MODEL_CHANGE', 'When the stored memories were embedded with another model than EMBEDDING_MODEL: re-embed them all at start (progress in the log), or refuse to start', ['reembed', 'refuse'] as const, 'reembed'),
  modelsDir: optionalText('MODELS_DIR', 'Folder holding the embedding models (default: models/ of the installation)'),
  apiKeysFile: optionalText('API_KEYS_FILE', 'JSON file {"<key or sha256:hex>": ["<tenant>", ...]} read at start and on SIGHUP; set = every memory and chat request needs a key (manage with agent-keys)'),
  apiKeysBlob: optionalText('API_KEYS_BLOB', 'Name of the API keys file in the host store, signed by the operator key (agent-keys sign); needs OPERATOR_PUBKEY; re-read every API_KEYS_POLL_SECONDS: a newer version replaces the keys, and a file unsigned, signed by another key or older than the loaded one is refused (instead of API_KEYS_FILE)'),
  apiKeysPollSeconds: integer('API_KEYS_POLL_SECONDS', 'With API_KEYS_BLOB: how often the enclave reads it for a new version', 10, 1, 3600),
  allowOpen: flag('ALLOW_OPEN', 'Without API_KEYS_FILE, run open even where not loopback-only (non-loopback ENCLAVE_ADDR or TEE_MODE=nitro)'),
  maxInFlight: integer('ENCLAVE_MAX_IN_FLIGHT', 'Requests the enclave handles at once; beyond, 503 enclave_overloaded', 64, 1, 100_000),
  maxInFlightPerKey: integer('ENCLAVE_MAX_IN_FLIGHT_PER_KEY', 'Requests one API key may have in the enclave at once, open streams included (its fair share); beyond, 429 too_many_concurrent_requests', 16, 1, 100_000),
  maxInFlightKeyless: integer('ENCLAVE_MAX_IN_FLIGHT_KEYLESS', 'With keys on: requests holding no valid API key (attestation, sealed envelopes until opened, refused keys) the enclave handles at once between them; beyond, 429 too_many_concurrent_requests', 16, 1, 100_000),
  maxStreamMs: integer('ENCLAVE_MAX_STREAM_MS', 'Longest a streamed chat may run in the enclave, whatever deadline its caller gave; then it ends with an error event and frees its place', 600_000, 1000, 86_400_000),
  timeoutMs: integer('ENCLAVE_TIMEOUT_MS', 'Longest the enclave works on one request (or the caller\'s gRPC deadline, if sooner) before 504', 30_000, 100, 600_000),
  modelConnectTimeoutMs: integer('MODEL_CONNECT_TIMEOUT_MS', 'Longest wait to connect to the chat model (then 503)', 5_000, 100, 120_000),
  modelTimeoutMs: integer('MODEL_TIMEOUT_MS', 'Longest wait for the chat model\'s answer to start, and between streamed pieces (then 504)', 120_000, 100, 3_600_000),
  modelConnectRetries: integer('MODEL_CONNECT_RETRIES', 'Retries when connecting to the chat model fails (nothing was sent, so retrying is safe)', 2, 0, 10),
  chatMemoryTopK: integer('CHAT_MEMORY_TOP_K', 'Memories of the tenant added to each chat request (0 = none)', 5, 0, 100),
  chatToolRounds: integer('CHAT_TOOL_ROUNDS', 'Rounds in which the chat model may call search_memory/add_memory (0 = tools not offered)', 4, 0, 16),
  chatToolMaxAdds: integer('CHAT_TOOL_MAX_ADDS', 'Most memories the chat model may save with add_memory in one request; later calls get an error the model can read', 10, 0, 1000),
  logLevel: logLevel(),
  logSinkFd: integer('LOG_SINK_FD', 'File descriptor (opened by whoever starts the enclave: on Nitro the entrypoint\'s pipe to the host\'s journal) that also gets the log lines and boot stages, redacted to closed-set values and numbers; 0 = none', 0, 0, 1024),
  logFormat: logFormat(),
  nsmHelper: text('NSM_HELPER', 'With TEE_MODE=nitro: the helper that asks /dev/nsm for documents', '/usr/local/bin/nsm-attest'),
  maxTenants: integer('MAX_TENANTS', 'Most tenants the enclave holds; an add for a new tenant past it answers 503 enclave_capacity_reached', 100_000, 1, 100_000_000),
  maxMemories: integer('MAX_MEMORIES', 'Most memories the enclave holds in all; adds past it answer 503 enclave_capacity_reached (about 900 bytes of enclave memory each, plus content)', 2_000_000, 1, 1_000_000_000),
  maxStoredBytes: integer('MAX_STORED_BYTES', 'Most bytes of memory content and metadata the enclave holds in all; adds (and updates that grow a memory) past it answer 503 enclave_capacity_reached', 1024 ** 3, 1, 2 ** 45),
  maxMemoriesPerKey: integer('MAX_MEMORIES_PER_KEY', 'Most memories all the tenants of one API key may hold together (with keys on); adding more answers 409 key_memory_limit_reached', 1_000_000, 1, 1_000_000_000),
  maxMemoriesPerTenant: integer('MAX_MEMORIES_PER_TENANT', 'Most memories one tenant may hold; adding more answers 409 memory_limit_reached', 100_000, 1, 1_000_000_000),
  maxTerms: integer('MAX_TERMS', 'Most distinct words the enclave\'s lexical indexes hold in all, each tenant\'s counted apart (each costs index memory beyond its content); adds and updates bringing new words past it answer 503 enclave_capacity_reached', 2_000_000, 1, 10_000_000),
  maxTermsPerTenant: integer('MAX_TERMS_PER_TENANT', 'Most distinct words one tenant\'s memories may hold together; an add or update bringing new words past it answers 409 term_limit_reached', 200_000, 1, 10_000_000),
  memoryHistoryVersions: integer('MEMORY_HISTORY_VERSIONS', 'Versions of each memory kept in its history (GET /v1/memory/{id}/history), the current one included; the oldest go first. Past versions count against MAX_STORED_BYTES; 1 keeps none', 20, 1, 1000),
  memoryHistoryDeleted: integer('MEMORY_HISTORY_DELETED', 'Deleted memories whose history (times and key ids, no content) each tenant keeps; the oldest deletions are forgotten first. Each version costs 64 bytes of MAX_STORED_BYTES', 1000, 0, 1_000_000),
  maxTermsPerMemory: integer('MAX_TERMS_PER_MEMORY', 'Most distinct words one memory\'s content may hold (words longer than 64 characters count by their first 64); more answers 400 too_many_terms', 4096, 1, 32_768),
  searchWorker: oneOf('SEARCH_WORKER', 'Large tenants (over 4,096 memories, their HNSW graph built, from their 50th query) are searched on a second thread, which holds a copy of each (about 3 KB a memory: some 300 MiB more for a tenant of 100k): on, or off to search them on the event loop', ['on', 'off'] as const, 'on'),
  shards: shardCount('SHARDS', `Shards the memories are kept in when the service's data is first made (1 to ${MAX_SHARDS}; unset: ${DEFAULT_SHARDS}); each tenant's shard is fixed by a hash of its id, and each shard is its own sealed store. Fixed once made: set, it must equal the count the data was made with (data from before shards is one shard)`),
  ownerGeneration: ownerGeneration('OWNER_GENERATION', 'This enclave\'s generation as owner of its shards (the fencing token; in a cluster the placement controller gives each OpenShard its own): opening a shard writes it in a fence entry, so an older owner\'s next write is refused (503 shard_not_owned), and a shard whose files name a higher one is refused at start, untouched. Unset: the enclave\'s start time in milliseconds, raised if need be to the shard\'s last owner\'s, so the enclave started last takes the shards over (a clock set back does not lock it out)'),
  shardsOpen: oneOf('SHARDS_OPEN', 'Which shards the enclave opens at start: all (one enclave serves every shard, as `npm start` does), or none (a cluster: it starts with the shard map and no shard open, healthy, and serves a shard only once the host\'s placement opens it with OpenShard, which names the owner generation; OWNER_GENERATION is then not used)', ['all', 'none'] as const, 'all'),
  preparedShardsMax: integer('PREPARED_SHARDS_MAX', 'A cluster: most shards the enclave keeps read ahead at once, not served (PrepareShard: a planned move\'s new owner, a warm standby of another owner\'s shard, docs/cluster.md). Each holds that shard\'s memories in this enclave\'s memory too; PrepareShard past it is refused', 4, 0, 1024),
  witnesses: integer('WITNESSES', 'Freshness across enclaves (a cluster, SHARDS_OPEN=none): how many other enclaves of the service must confirm a shard\'s new head before its writes are acknowledged (503 witness_unavailable otherwise), and must say which head they witnessed before OpenShard opens a shard (which it refuses when its store does not reach the highest). 0: none, as one enclave runs; measured with the configuration when above 0, so the host cannot lower it (docs/cluster.md)', 0, 0, 64),
  witnessTimeoutMs: integer('WITNESS_TIMEOUT_MS', 'With WITNESSES: how long an owner waits for one other enclave to confirm a new head, or to say which head it witnessed', 2_000, 10, 60_000),
  snapshotLogBytes: integer('SNAPSHOT_LOG_BYTES', 'Snapshot the memories and compact once the log passes this many bytes (and the last snapshot\'s size)', 64 * 1024 * 1024, 1, 2 ** 40),
  kmsKeyId: optionalKmsKeyArn('KMS_KEY_ID', 'With TEE_MODE=nitro: the ARN (arn:aws:kms:<region>:<account>:key/<id>; not an alias) of the KMS key whose data key seals the enclave\'s files; measured with the configuration (deploy/sealing.md)'),
  awsRegion: optionalText('AWS_REGION', 'With TEE_MODE=nitro: the region of KMS_KEY_ID'),
  kmsProxyPort: integer('KMS_PROXY_PORT', 'With TEE_MODE=nitro: vsock port of the proxy to KMS', 8000, 1, 4_294_967_295),
  kmsTool: text('KMS_TOOL', 'With TEE_MODE=nitro: path of AWS\'s kmstool_enclave_cli', '/usr/local/bin/kmstool_enclave_cli'),
  awsAccessKeyId: optionalText('AWS_ACCESS_KEY_ID', 'With TEE_MODE=nitro: the parent role\'s credentials for KMS calls (the key policy, not their secrecy, guards the key)'),
  awsSecretAccessKey: optionalText('AWS_SECRET_ACCESS_KEY', 'With TEE_MODE=nitro: see AWS_ACCESS_KEY_ID; never logged'),
  awsSessionToken: optionalText('AWS_SESSION_TOKEN', 'With TEE_MODE=nitro: see AWS_ACCESS_KEY_ID; never logged'),
};
