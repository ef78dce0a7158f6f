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
export function createLogger(name: string, level: string, format: LogFormat = 'json'): Logger {
  const options = {
    name,
    level,
    base: { process: name },
    redact: {
      paths: ['authorization', '*.authorization', 'headers.authorization', 'req.headers.authorization', 'content', '*.content', 'body', '*.body', 'apiKey', '*.apiKey', 'secretKey', '*.secretKey'],
      censor: '[redacted]',
    },
  };
  return format === 'pretty' ? pino(options, prettyStdout()) : pino(options);
}

/**
 * pino's own synchronous stdout (as for JSON, so a fatal line before exit is not lost),
 * fed formatted lines instead of JSON.
 */
function prettyStdout(): DestinationStream {
  const out = pino.destination({ dest: 1, sync: true });
  const colour = process.stdout.isTTY === true;
  return { write: (line: string) => { out.write(prettyLine(line, { colour })); } };
}
