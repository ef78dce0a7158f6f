/**
 * API keys kept in the host store, signed by the operator (signed-keys.ts), so a key change
 * needs neither a new image nor a restart. The enclave polls the blob rather than being
 * told to reload: the host cannot signal into an enclave, a new RPC would be one more
 * thing the untrusted side may call, and the signature, not whoever asks, is what decides.
 * A poll costs one small read; an unchanged file is not verified again.
 *
 * What the host can do: serve an unsigned file, one signed by another key, or an older one
 * signed by the operator (to bring back a revoked key). Each is refused and the current keys
 * stay. The highest version seen is held in memory only: after a restart the enclave takes
 * the operator's file the host serves, an older one included (deploy/README.md says so).
 */
import { createHash } from 'node:crypto';
import { readWhole, type BlobStore } from '../../common/blob-store.js';
import type { Logger } from '../../common/logger.js';
import { KeyRing, keyAuthorizer } from './authorizer.js';
import type { AuthSetup } from './setup.js';
import { verifySignedKeys } from './signed-keys.js';

export interface HostStoreKeysOptions {
  blobs: BlobStore;
  /** The blob's name in the host store (API_KEYS_BLOB). */
  name: string;
  operatorKey: Uint8Array;
  pollMs: number;
  log: Logger;
}

export interface HostStoreKeys extends AuthSetup {
  /** Reads the blob now; resolves when it was loaded or refused. */
  check(): Promise<void>;
  stop(): void;
}

/** Loads the signed keys (the enclave refuses to start without a valid file), then polls for new versions. */
export async function startHostStoreKeys(options: HostStoreKeysOptions): Promise<HostStoreKeys> {
  const { blobs, name, operatorKey, log } = options;
  const read = async () => {
    const bytes = await readWhole(blobs, name);
    if (!bytes) throw new Error(`no ${name} in the host store: sign one with \`agent-keys sign\` and put it there (deploy/README.md, "API keys")`);
    return bytes;
  };
  const first = await read();
  const verified = (() => {
    try {
      return verifySignedKeys(first.toString('utf8'), operatorKey);
    } catch (err) {
      throw new Error(`${name} in the host store refused: ${(err as Error).message}`);
    }
  })();
  let ring = new KeyRing(verified.entries);
  let version = verified.version;
  let seen = digest(first);
  log.info({ blob: name, version, keys: ring.size }, 'API keys loaded from the host store (signed by the operator key): every memory and chat request needs a key for its tenant');

  let running: Promise<void> | undefined;
  let lastProblem: string | undefined;
  const check = (): Promise<void> => {
    running ??= (async () => {
      try {
        const bytes = await read();
        const hash = digest(bytes);
        lastProblem = undefined;
        if (hash === seen) return;
        seen = hash; // refuse a bad file once, not on every poll
        const next = verifySignedKeys(bytes.toString('utf8'), operatorKey);
        if (next.version <= version) {
          if (next.version < version) throw new Error(`version ${next.version} is older than the loaded version ${version}`);
          return; // not newer: the version loaded stays
        }
        ring = new KeyRing(next.entries);
        version = next.version;
        log.info({ blob: name, version, keys: ring.size }, 'API keys reloaded from the host store');
      } catch (err) {
        const problem = (err as Error).message;
        // A missing or unreadable blob is reported once, not on every poll.
        if (problem !== lastProblem) log.error({ blob: name, version, problem }, 'API keys file in the host store refused; keeping the keys already loaded');
        lastProblem = problem;
      }
    })().finally(() => { running = undefined; });
    return running;
  };
  const timer = setInterval(() => void check(), options.pollMs);
  timer.unref();

  return {
    authorizer: keyAuthorizer(() => ring),
    reload: () => void check(),
    check,
    stop: () => clearInterval(timer),
  };
}

const digest = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');
