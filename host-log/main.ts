/**
 * The host log receiver: takes the enclave's log lines and boot stages (redacted inside
 * the enclave, enclave/observability/host-log-redaction.ts) and writes one journal entry
 * each, as `<priority>enclave: <JSON>` on stdout, which systemd turns into a journal entry
 * of that priority (agent-host-log.service; `journalctl -u agent-host-log`). It runs on
 * the untrusted host and trusts nothing it receives beyond writing it: control characters
 * are removed and lines are cut at LOG_MAX_LINE_BYTES, so one connection cannot forge
 * several entries or flood one.
 */
import { createServer, type Socket } from 'node:net';
import { configFromCli, parseHostPort } from '../common/config.js';
import { hostLogSettings } from './config.js';

const config = configFromCli('agent-service host log receiver: writes the enclave\'s redacted log lines and boot stages to the journal.', hostLogSettings);

/** pino's levels to syslog priorities (sd-daemon(3) prefixes). */
const priority = (level: unknown): number => {
  if (typeof level !== 'number') return 6;
  if (level >= 60) return 2;
  if (level >= 50) return 3;
  if (level >= 40) return 4;
  return level >= 30 ? 6 : 7;
};

function entry(raw: string): string {
  // eslint-disable-next-line no-control-regex -- removing control characters is the point
  const line = raw.replace(/[\u0000-\u001f\u007f]/g, '').slice(0, config.maxLineBytes);
  let level: unknown;
  try {
    level = (JSON.parse(line) as { level?: unknown }).level;
  } catch {
    return `<4>enclave (not JSON): ${line}\n`;
  }
  return `<${priority(level)}>enclave: ${line}\n`;
}

const server = createServer((socket: Socket) => {
  let pending = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    pending += chunk;
    let at: number;
    while ((at = pending.indexOf('\n')) >= 0) {
      if (at > 0) process.stdout.write(entry(pending.slice(0, at)));
      pending = pending.slice(at + 1);
    }
    // A line that never ends is cut, not buffered without bound.
    if (pending.length > config.maxLineBytes) {
      process.stdout.write(entry(pending));
      pending = '';
    }
  });
  socket.on('end', () => { if (pending) process.stdout.write(entry(pending)); });
  socket.on('error', () => socket.destroy());
});
const { host, port } = parseHostPort(config.listenAddr)!;
server.listen(port, host, () => process.stderr.write(`host-log: listening on ${config.listenAddr}\n`));
server.on('error', (err) => {
  process.stderr.write(`host-log: cannot listen on LOG_LISTEN_ADDR ${config.listenAddr}: ${err.message}\n`);
  process.exit(2);
});
// Each line is written when it is received (stdout to the journal is synchronous on Linux),
// so nothing is lost by not waiting for the enclave's connections to end.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(0));
