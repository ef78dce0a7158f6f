import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { configFromCli } from '../common/config.js';
import { listen } from '../common/grpc-listen.js';
import { createLogger } from '../common/logger.js';
import { hostStoreSettings } from './config.js';
import { FsBlobStore } from './fs-blob-store.js';
import { createHostStoreServer } from './grpc-service.js';
import { stopOnSignals } from '../common/grpc-stop.js';
import { exitWithConfigError, stopWithSupervisor, tellSupervisorReady } from '../common/supervised.js';
import { addressTarget, listenErrorLine } from '../common/listen-error.js';
import { lockDataDir } from './data-dir-lock.js';

const config = configFromCli('agent-service host store: keeps the enclave\'s sealed blobs on the host\'s disk (it sees names and sizes, never contents).', hostStoreSettings);
const log = createLogger('host-store', config.logLevel, config.logFormat);

/** What a restart cannot fix: one line naming the setting, exit 2, no restart. */
const configError = (line: string) => {
  log.fatal({ problem: line }, 'cannot start');
  return exitWithConfigError('host-store', line);
};

const dataDir = resolve(config.dataDir);
mkdirSync(dataDir, { recursive: true, mode: 0o700 });
// Before anything touches the folder: removing "leftovers" would delete another writer's
// writes in progress, and serving it would let two enclaves append to one log.
const lock = await lockDataDir(dataDir);
if (!lock.held) {
  await configError(`DATA_DIR ${dataDir} is in use by another instance (host store pid ${lock.holderPid ?? 'unknown'}); set DATA_DIR to another folder (a second instance needs its own PORT, ENCLAVE_ADDR and HOST_STORE_ADDR too)`);
}
const store = new FsBlobStore(dataDir);
const leftovers = await store.removeLeftovers();
if (leftovers.length > 0) log.info({ removed: leftovers.length }, 'removed temporary files of writes a crash interrupted');
const server = createHostStoreServer(store, log);
const port = await listen(server, config.address).catch((err: unknown) => configError(listenErrorLine(addressTarget('HOST_STORE_ADDR', config.address), err)));
log.info({ address: config.address, port, dataDir }, 'host store listening');
tellSupervisorReady();

// Every acknowledged write is already on disk: nothing to flush.
stopOnSignals(server, log, 3000);
stopWithSupervisor();
