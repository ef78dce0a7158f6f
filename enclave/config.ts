import { flag, hostPort, integer, logLevel, oneOf, optionalText, text } from '../common/config.js';

/** Every setting of the enclave process; `npm run start:enclave -- --help` prints this table. */
export const enclaveSettings = {
  address: hostPort('ENCLAVE_ADDR', 'Address the enclave\'s gRPC server listens on', '127.0.0.1:50051'),
  dataDir: text('DATA_DIR', 'Folder for the enclave\'s state (keys, simulated CA, memories)', './data'),
  teeMode: oneOf('TEE_MODE', 'Attestation provider', ['simulated', 'nitro'] as const, 'simulated'),
  operatorPubkey: optionalText('OPERATOR_PUBKEY', 'Operator Ed25519 public key, base64 or hex (default: a key pair kept in DATA_DIR)'),
  modelBaseUrl: optionalText('MODEL_BASE_URL', 'OpenAI-compatible chat model base URL, e.g. https://api.openai.com/v1 (default: built-in offline responder)'),
  modelApiKey: optionalText('MODEL_API_KEY', 'API key for MODEL_BASE_URL; lives only in the enclave'),
  embeddingModel: text('EMBEDDING_MODEL', 'Embedding model name', 'static'),
  apiKeysFile: optionalText('API_KEYS_FILE', 'JSON file {"<key or sha256:hex>": ["<tenant>", ...]} read at start and on SIGHUP; set = every memory and chat request needs a key (manage with agent-keys)'),
  allowOpen: flag('ALLOW_OPEN', 'Without API_KEYS_FILE, run open even where not loopback-only (non-loopback ENCLAVE_ADDR or TEE_MODE=nitro)'),
  maxInFlight: integer('ENCLAVE_MAX_IN_FLIGHT', 'Requests the enclave handles at once; beyond, 503 enclave_overloaded', 64, 1, 100_000),
  timeoutMs: integer('ENCLAVE_TIMEOUT_MS', 'Longest the enclave works on one request (or the caller\'s gRPC deadline, if sooner) before 504', 30_000, 100, 600_000),
  logLevel: logLevel(),
  nsmHelper: text('NSM_HELPER', 'With TEE_MODE=nitro: the helper that asks /dev/nsm for documents', '/usr/local/bin/nsm-attest'),
};
