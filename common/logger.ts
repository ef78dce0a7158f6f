import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * JSON logs for both processes. Contents, keys and credentials are redacted by path
 * as a backstop; the code's rule is simpler: never pass them to the logger at all.
 */
export function createLogger(name: string, level: string): Logger {
  return pino({
    name,
    level,
    base: { process: name },
    redact: {
      paths: ['authorization', '*.authorization', 'headers.authorization', 'req.headers.authorization', 'content', '*.content', 'body', '*.body', 'apiKey', '*.apiKey', 'secretKey', '*.secretKey'],
      censor: '[redacted]',
    },
  });
}

