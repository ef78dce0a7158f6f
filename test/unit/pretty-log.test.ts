import { describe, expect, it } from 'vitest';
import { prettyLine } from '../../common/pretty-log.js';

const record = (fields: Record<string, unknown>) => JSON.stringify({ level: 30, time: Date.UTC(2026, 0, 2, 3, 4, 5, 678), pid: 1, hostname: 'h', process: 'enclave', msg: 'handled', ...fields });

describe('prettyLine (LOG_FORMAT=pretty)', () => {
  it('puts time, level, process and message first, then the fields', () => {
    expect(prettyLine(record({ route: 'AddMemory', status: 200, cancelled: undefined }))).toBe('03:04:05.678 INFO  enclave    handled route=AddMemory status=200\n');
  });

  it('quotes values that could be misread, and writes objects as JSON', () => {
    const line = prettyLine(record({ problem: 'a b="c"', head: { seq: 1 } }));
    expect(line).toContain('problem="a b=\\"c\\""');
    expect(line).toContain('head={"seq":1}');
  });

  it('shows an error\'s message inline and its stack below', () => {
    const line = prettyLine(JSON.stringify({ level: 50, time: 0, process: 'proxy', msg: 'unexpected error', err: { type: 'TypeError', message: 'boom', stack: 'TypeError: boom\n    at f (x.js:1:1)' } }));
    expect(line).toMatch(/^00:00:00\.000 ERROR proxy {6}unexpected error err="TypeError: boom"\n {4}at f \(x\.js:1:1\)\n$/);
  });

  it('keeps what pino redacted redacted, and colours only when asked', () => {
    const line = prettyLine(record({ authorization: '[redacted]' }), { colour: true });
    expect(line).toContain('authorization=[redacted]');
    expect(line).toContain('\u001b[32mINFO \u001b[0m');
  });

  it('passes a line that is not JSON through unchanged', () => {
    expect(prettyLine('plain text')).toBe('plain text\n');
  });
});
