import { ConfigError, hostPort, integer, logLevel, oneOf, optionalText, text, type Setting } from '../common/config.js';

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

/** Every setting of the enclave process; `npm run start:enclave -- --help` prints this table. */
export const enclaveSettings = {
  address: hostPort('ENCLAVE_ADDR', 'Address the enclave\'s gRPC server listens on', '127.0.0.1:50051'),
  dataDir: text('DATA_DIR', 'Folder for the enclave\'s state (keys, simulated CA, memories)', './data'),
  teeMode: oneOf('TEE_MODE', 'Attestation provider', ['simulated', 'nitro'] as const, 'simulated'),
  operatorPubkey: optionalText('OPERATOR_PUBKEY', 'Operator Ed25519 public key, base64 or hex (default: a key pair kept in DATA_DIR)'),
  modelBaseUrl: optionalHttpUrl('MODEL_BASE_URL', 'OpenAI-compatible chat model base URL, e.g. https://api.openai.com/v1 (default: built-in offline responder)'),
  modelApiKey: optionalText('MODEL_API_KEY', 'API key for MODEL_BASE_URL; lives only in the enclave'),
  modelConnectTimeoutMs: integer('MODEL_CONNECT_TIMEOUT_MS', 'Longest wait to connect to the chat model (then 503)', 5_000, 100, 120_000),
  modelTimeoutMs: integer('MODEL_TIMEOUT_MS', 'Longest wait for the chat model\'s answer to start, and between streamed pieces (then 504)', 120_000, 100, 3_600_000),
  modelConnectRetries: integer('MODEL_CONNECT_RETRIES', 'Retries when connecting to the chat model fails (nothing was sent, so retrying is safe)', 2, 0, 10),
  chatMemoryTopK: integer('CHAT_MEMORY_TOP_K', 'Memories of the tenant added to each chat request (0 = none)', 5, 0, 100),
  chatToolRounds: integer('CHAT_TOOL_ROUNDS', 'Rounds in which the chat model may call search_memory/add_memory (0 = tools not offered)', 4, 0, 16),
  embeddingModel: text('EMBEDDING_MODEL', 'Embedding model name', 'static'),
  logLevel: logLevel(),
  nsmHelper: text('NSM_HELPER', 'With TEE_MODE=nitro: the helper that asks /dev/nsm for documents', '/usr/local/bin/nsm-attest'),
};
