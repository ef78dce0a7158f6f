import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { requestLogger } from '../../proxy/request-logger.js';

/** The proxy's logger at `level`, its JSON lines collected. */
function collected(level: string): { log: ReturnType<typeof createLogger>; lines: () => Record<string, unknown>[] } {
  const out: string[] = [];
  const sink = new Writable({ write(chunk, _enc, done) { out.push(String(chunk)); done(); } });
  const log = createLogger('proxy', level, 'json', { sink });
  return { log, lines: () => out.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe('requestLogger', () => {
  it('makes no pino child for a request that writes nothing at the logger\'s level', () => {
    const { log, lines } = collected('warn');
    const child = vi.spyOn(log, 'child');
    const req = requestLogger(log, { reqId: 'r-1' });
    req.info({ path: '/v1/memory', status: 200 }, 'request');
    req.debug('nothing');
    expect(child).not.toHaveBeenCalled();
    expect(lines()).toEqual([]);
  });

  it('writes what it is given with the request id bound, redacted as any line, through one child', () => {
    const { log, lines } = collected('info');
    const child = vi.spyOn(log, 'child');
    const req = requestLogger(log, { reqId: 'r-2' });
    req.info({ path: '/v1/memory', authorization: 'Bearer sk-1' }, 'request');
    req.error({ status: 500 }, 'unexpected error');
    expect(child).toHaveBeenCalledTimes(1);
    expect(lines().map(({ reqId, msg, authorization, status }) => ({ reqId, msg, authorization, status }))).toEqual([
      { reqId: 'r-2', msg: 'request', authorization: '[redacted]', status: undefined },
      { reqId: 'r-2', msg: 'unexpected error', authorization: undefined, status: 500 },
    ]);
  });

  it('is a logger fastify accepts: its level, level checks, bindings and children are the request child\'s', () => {
    const { log, lines } = collected('info');
    const req = requestLogger(log, { reqId: 'r-3' });
    expect(req.level).toBe('info');
    expect(req.isLevelEnabled('debug')).toBe(false);
    expect(req.bindings()).toMatchObject({ reqId: 'r-3' });
    req.child({ part: 'stream' }).warn('closed early');
    expect(lines()).toMatchObject([{ reqId: 'r-3', part: 'stream', msg: 'closed early' }]);
  });
});
