import { hostPort, integer } from '../common/config.js';

/** Every setting of the host log receiver; `node dist/host-log/main.js --help` prints this table. */
export const hostLogSettings = {
  listenAddr: hostPort('LOG_LISTEN_ADDR', 'Where the host log receiver listens for the enclave\'s log lines and boot stages (on Nitro behind deploy/host-log-bridge.sh, which relays vsock port 8004 here)', '127.0.0.1:50053'),
  maxLineBytes: integer('LOG_MAX_LINE_BYTES', 'Longest line the host log receiver writes to the journal; longer ones are cut', 8192, 256, 1_048_576),
};
