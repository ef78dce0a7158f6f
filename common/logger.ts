import { pino, type DestinationStream, type Logger } from 'pino';
import { prettyLine } from './pretty-log.js';

export type { Logger };

export type LogFormat = 'json' | 'pretty';

/**
 * Logs for every process: JSON lines by default, or LOG_FORMAT=pretty for a terminal.
 * Contents, keys and credentials are redacted by path as a backstop, in both formats (the
 * pretty one formats the redacted JSON); the code's rule is simpler: never pass them to
 * the logger at all.
 */
export function createLogger(name: string, level: string, format: LogFormat = 'json', how: { sync?: boolean; sink?: DestinationStream } = {}): Logger {
  const options = {
    name,
    level,
    base: { process: name },
    redact: {
      paths: ['authorization', '*.authorization', 'headers.authorization', 'req.headers.authorization', 'content', '*.content', 'body', '*.body', 'apiKey', '*.apiKey', 'secretKey', '*.secretKey'],
      censor: '[redacted]',
    },
  };
  // A second destination (the enclave's host log receiver) gets the same JSON lines, and
  // does its own, stricter redaction before anything leaves.
  const withSink = (stdout: DestinationStream) => (how.sink && level !== 'silent'
    ? pino.multistream([{ level: level as pino.Level, stream: stdout }, { level: level as pino.Level, stream: how.sink }])
    : stdout);
  if (format === 'pretty') return pino(options, withSink(prettyStdout()));
  // pino's default stdout writes asynchronously (fast under load); `sync` is for a process
  // whose own last line must come after its log lines (npm start's supervisor).
  if (how.sync) return pino(options, withSink(pino.destination({ dest: 1, sync: true })));
  return how.sink ? pino(options, withSink(pino.destination({ dest: 1, sync: false }))) : pino(options);
}

/** pino's own synchronous stdout, fed formatted lines instead of JSON. */
function prettyStdout(): DestinationStream {
  const out = pino.destination({ dest: 1, sync: true });
  const colour = process.stdout.isTTY === true;
  return { write: (line: string) => { out.write(prettyLine(line, { colour })); } };
}
