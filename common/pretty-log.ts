/**
 * LOG_FORMAT=pretty: one readable line per log record for a terminal, written
 * synchronously in the logging process (no transport, so no worker thread: the enclave
 * starts none it does not need). It formats what pino already serialized, so redaction
 * (common/logger.ts) has happened before a record gets here.
 */

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const COLOURS: Record<number, string> = { 10: '90', 20: '36', 30: '32', 40: '33', 50: '31', 60: '35' };
/** Fields every record has, shown in the line's head or not at all. */
const HEAD = new Set(['level', 'time', 'pid', 'hostname', 'name', 'process', 'msg']);

export interface PrettyOptions {
  /** ANSI colours for the level (a terminal); off when writing to a file or pipe. */
  colour?: boolean;
}

/** `12:04:05.123 INFO  enclave  handled  route=AddMemory status=200 ms=3`, with an error's stack indented below. */
export function prettyLine(json: string, options: PrettyOptions = {}): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const level = typeof record.level === 'number' ? record.level : 30;
  const label = (LEVELS[level] ?? `L${level}`).padEnd(5);
  const time = typeof record.time === 'number' ? new Date(record.time).toISOString().slice(11, 23) : '--:--:--.---';
  const who = String(record.process ?? record.name ?? '');
  const fields: string[] = [];
  let stack = '';
  for (const [key, value] of Object.entries(record)) {
    if (HEAD.has(key) || value === undefined) continue;
    if (isError(value)) {
      fields.push(`${key}=${quote(`${value.type ?? 'Error'}: ${value.message}`)}`);
      if (typeof value.stack === 'string') stack = `\n    ${value.stack.split('\n').slice(1).map((l) => l.trim()).join('\n    ')}`;
      continue;
    }
    fields.push(`${key}=${typeof value === 'string' ? quote(value) : JSON.stringify(value)}`);
  }
  const levelText = options.colour ? `\u001b[${COLOURS[level] ?? '0'}m${label}\u001b[0m` : label;
  const parts = [time, levelText, who.padEnd(10), String(record.msg ?? ''), ...fields].filter((p) => p !== '');
  return `${parts.join(' ')}${stack}\n`;
}

/** Bare when it cannot be misread, JSON-quoted otherwise (spaces, quotes, '='). */
function quote(value: string): string {
  return /^[^\s"'=\\]+$/.test(value) ? value : JSON.stringify(value);
}

function isError(value: unknown): value is { type?: string; message: string; stack?: unknown } {
  return typeof value === 'object' && value !== null && typeof (value as { message?: unknown }).message === 'string' && 'stack' in value;
}
