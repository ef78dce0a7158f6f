import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { configFromCli } from '../common/config.js';
import { listen } from '../common/grpc-listen.js';
import { createLogger } from '../common/logger.js';
import { hostStoreSettings, parseS3Url } from './config.js';
import { FsBlobStore } from './fs-blob-store.js';
import type { BlobStore } from '../common/blob-store.js';
import { createHostStoreServer } from './grpc-service.js';
import { stopOnSignals } from '../common/grpc-stop.js';
import { exitWithConfigError, stopWithSupervisor, tellSupervisorReady } from '../common/supervised.js';
import { addressTarget, listenErrorLine } from '../common/listen-error.js';
import { lockDataDir } from './data-dir-lock.js';
import { HostCopies } from './host-copies.js';

const config = configFromCli('agent-service host store: keeps the enclave\'s sealed blobs on the host\'s disk or in S3 (it sees names and sizes, never contents).', hostStoreSettings);
const log = createLogger('host-store', config.logLevel, config.logFormat);

/** What a restart cannot fix: one line naming the setting, exit 2, no restart. */
const configError = (line: string) => {
  log.fatal({ problem: line }, 'cannot start');
  return exitWithConfigError('host-store', line);
};

/** The blobs: in an S3 bucket, or in DATA_DIR (locked to this process). */
async function openStore(): Promise<{ store: BlobStore; where: Record<string, string> }> {
  const dataDir = resolve(config.dataDir);
  if (config.s3 !== undefined) {
    const s3 = parseS3Url(config.s3);
    if (!s3) return configError(`BLOB_STORE_S3 ${JSON.stringify(config.s3)} is not s3://<bucket>/<prefix>`);
    // DATA_DIR keeps copies of what the host's tools read (the simulated root), as it does without S3.
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    // Loaded only here: the AWS SDK costs a start about 0.4 s of CPU that a store on disk never uses.
    const [{ S3BlobStore }, { S3Objects }] = await Promise.all([import('./s3-blob-store.js'), import('./s3-objects.js')]);
    const store = new HostCopies(new S3BlobStore(new S3Objects(s3.bucket, { endpoint: config.s3Endpoint }), s3.prefix), dataDir);
    await store.refresh();
    return { store, where: { bucket: s3.bucket, prefix: s3.prefix, dataDir } };
  }
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
  return { store, where: { dataDir } };
}

const { store, where } = await openStore();
const server = createHostStoreServer(store, log);
const port = await listen(server, config.address).catch((err: unknown) => configError(listenErrorLine(addressTarget('HOST_STORE_ADDR', config.address), err)));
log.info({ address: config.address, port, ...where }, 'host store listening');
tellSupervisorReady();

// Every acknowledged write is already on disk: nothing to flush.
stopOnSignals(server, log, 3000);
stopWithSupervisor();
