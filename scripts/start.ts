import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { configFromCli, logFormat, logLevel } from '../common/config.js';
import { createLogger } from '../common/logger.js';
import { supervised, Supervisor } from './lib/supervisor.js';

/**
 * `npm start`: runs the host store, then the enclave once the store listens, then the proxy
 * once the enclave listens; restarts any of them if it dies, and stops all on Ctrl-C /
 * SIGTERM. The children get this process's environment, so the same variables configure
 * a supervised or a lone run. It learns that a child listens, or cannot run with this
 * configuration, from that child's own IPC messages (common/supervised.ts), never by
 * dialling its address: another instance may be answering there.
 */
const config = configFromCli(
  'agent-service: starts the host store, the enclave and the proxy together (see also start:host-store, start:enclave, start:proxy --help; start:cluster for several enclaves).',
  {
    logLevel: logLevel(),
    logFormat: logFormat(),
  },
);
// Synchronous, so that the one line it may stop with (stop()) is the last one out.
const log = createLogger('supervisor', config.logLevel, config.logFormat, { sync: true });
const distRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const hostStore = supervised('host-store', { script: resolve(distRoot, 'host-store/main.js') });
const enclave = supervised('enclave', { script: resolve(distRoot, 'enclave/main.js') });
const proxy = supervised('proxy', { script: resolve(distRoot, 'proxy/main.js') });
// The host store last: the enclave may still be handing it its last writes as it stops.
const supervisor = new Supervisor(log, () => [[proxy, enclave], [hostStore]]);
supervisor.stopOnSignals();
// SIGHUP reloads the enclave's API keys; pass it on rather than die of it.
process.on('SIGHUP', () => { enclave.child?.kill('SIGHUP'); });

// A process that keeps failing, or cannot run with this configuration, stops everything
// (above); until then each start waits for the one before to listen, however long a model
// change's re-embedding keeps the enclave busy.
supervisor.run(hostStore);
await supervisor.listening(hostStore);
supervisor.run(enclave);
await supervisor.listening(enclave);
log.info('enclave ready; starting proxy');
supervisor.run(proxy);
// The last line of a start: where to go (the console and the API).
log.info(`ready: ${await supervisor.listening(proxy) ?? 'the proxy listens'}`);
