import { hostPort, logFormat, logLevel, text } from '../common/config.js';

/** Every setting of the host store; `npm run start:host-store -- --help` prints this table. */
export const hostStoreSettings = {
  address: hostPort('HOST_STORE_ADDR', 'Address the host store listens on and the enclave dials (on Nitro, through a vsock bridge)', '127.0.0.1:50052'),
  dataDir: text('DATA_DIR', 'The host store\'s folder: the enclave\'s sealed blobs (log segments, snapshots, the wrapped sealing key); the enclave has no folder of its own. One host store at a time: a second one exits 2', './data'),
  logLevel: logLevel(),
  logFormat: logFormat(),
};
