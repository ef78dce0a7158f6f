/**
 * How the enclave starts its access control: with API_KEYS_FILE, keys are required;
 * without, the service is open, which the enclave allows only where that cannot expose
 * tenants by accident.
 *
 * The enclave cannot see where the proxy listens (the proxy is untrusted and its HOST is
 * not the enclave's to check), so it judges what it can see: its own gRPC address and TEE
 * mode. A simulated enclave on loopback may run open; anything else needs ALLOW_OPEN=1.
 * The proxy adds the other half (proxy/exposure.ts): it refuses to listen beyond loopback
 * while the enclave reports keys off. A compromised host could skip that check, but it
 * could also call an open enclave directly, so open mode is for trusted set-ups only.
 */
import { readFileSync } from 'node:fs';
import { parseHostPort } from '../../common/config.js';
import type { Logger } from '../../common/logger.js';
import { isLoopbackHost } from '../../common/loopback.js';
import { KeyRing, keyAuthorizer, openAuthorizer, type Authorizer } from './authorizer.js';
import { parseKeysFile } from './keys-file.js';

export interface AuthConfig {
  apiKeysFile?: string;
  allowOpen: boolean;
  teeMode: string;
  /** The enclave's own gRPC listen address. */
  address: string;
}

export interface AuthSetup {
  authorizer: Authorizer;
  /** Re-reads API_KEYS_FILE (SIGHUP). A bad file is refused and the current keys stay. */
  reload(): void;
}

/** Why open mode is not allowed here, or undefined when it is. */
export function openModeProblem(config: AuthConfig): string | undefined {
  if (config.allowOpen) return undefined;
  if (config.teeMode !== 'simulated') return `TEE_MODE=${config.teeMode} without API_KEYS_FILE: set API_KEYS_FILE, or ALLOW_OPEN=1 to run without keys`;
  const host = parseHostPort(config.address)?.host ?? '';
  if (!isLoopbackHost(host)) return `ENCLAVE_ADDR ${config.address} is not loopback and API_KEYS_FILE is not set: set API_KEYS_FILE, or ALLOW_OPEN=1 to run without keys`;
  return undefined;
}

/**
 * Why API_KEYS_BLOB cannot be used as configured, or undefined. The signed file is only as
 * good as the key that checks it: the local key pair the enclave makes without
 * OPERATOR_PUBKEY lives in the host store, so the host could sign with it.
 */
export function hostStoreKeysProblem(config: { apiKeysBlob?: string; apiKeysFile?: string; operatorPubkey?: string }): string | undefined {
  if (config.apiKeysBlob === undefined) return undefined;
  if (config.apiKeysFile !== undefined) return 'API_KEYS_BLOB and API_KEYS_FILE are two sources of keys: set one';
  if (!config.operatorPubkey) return 'API_KEYS_BLOB needs OPERATOR_PUBKEY: the signed keys file is checked against it (without it the operator key pair would be kept by the host, which could then sign keys)';
  return undefined;
}

/** Builds the authorizer for the configuration; throws (with a message for the operator) when it may not start. */
export function setUpAuth(config: AuthConfig, log: Logger): AuthSetup {
  const file = config.apiKeysFile;
  if (file === undefined) {
    const problem = openModeProblem(config);
    if (problem) throw new Error(problem);
    log.warn('API keys are OFF (no API_KEYS_FILE): any caller can read and write every tenant\'s memories; run like this only on a trusted machine');
    return { authorizer: openAuthorizer, reload: () => log.warn('SIGHUP ignored: no API_KEYS_FILE to reload') };
  }

  const load = (): KeyRing => {
    const entries = parseKeysFile(readFileSync(file, 'utf8'));
    const plaintext = entries.filter((e) => e.plaintext).length;
    if (plaintext) log.warn({ file, plaintext }, 'the API keys file holds keys in plaintext; `agent-keys` stores only their SHA-256');
    if (entries.length === 0) log.warn({ file }, 'the API keys file holds no keys: every request that needs a key will be refused');
    return new KeyRing(entries);
  };
  let ring = load();
  log.info({ file, keys: ring.size }, 'API keys loaded: every memory and chat request needs a key for its tenant');

  return {
    authorizer: keyAuthorizer(() => ring),
    reload() {
      try {
        ring = load();
        log.info({ file, keys: ring.size }, 'API keys reloaded');
      } catch (err) {
        log.error({ file, problem: (err as Error).message }, 'API keys file refused on reload; keeping the keys already loaded');
      }
    },
  };
}
