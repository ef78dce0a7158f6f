import { describe, expect, it } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { exposureProblem } from '../../proxy/exposure.js';

const log = createLogger('test', 'silent');
const enclave = (health: () => Promise<{ auth_required: boolean }>) => ({ health: health as never });

describe('the proxy\'s exposure check', () => {
  it('does not ask the enclave when listening on loopback', async () => {
    let asked = false;
    const e = enclave(async () => { asked = true; return { auth_required: false }; });
    expect(await exposureProblem({ host: '127.0.0.1', allowOpen: false, enclave: e, log })).toBeUndefined();
    expect(await exposureProblem({ host: '::1', allowOpen: false, enclave: e, log })).toBeUndefined();
    expect(asked).toBe(false);
  });

  it('beyond loopback, needs an enclave that requires keys, or ALLOW_OPEN', async () => {
    const keyed = enclave(async () => ({ auth_required: true }));
    const open = enclave(async () => ({ auth_required: false }));
    expect(await exposureProblem({ host: '0.0.0.0', allowOpen: false, enclave: keyed, log })).toBeUndefined();
    expect(await exposureProblem({ host: '0.0.0.0', allowOpen: false, enclave: open, log })).toMatch(/runs without API keys/);
    expect(await exposureProblem({ host: '10.1.2.3', allowOpen: true, enclave: open, log })).toBeUndefined();
  });

  it('waits for an enclave that is not up yet, and refuses when it never answers', async () => {
    let calls = 0;
    const late = enclave(async () => {
      if (++calls < 3) throw new Error('unavailable');
      return { auth_required: true };
    });
    expect(await exposureProblem({ host: '0.0.0.0', allowOpen: false, enclave: late, log, waitMs: 10_000 })).toBeUndefined();
    expect(calls).toBe(3);
    const never = enclave(async () => { throw new Error('unavailable'); });
    expect(await exposureProblem({ host: '0.0.0.0', allowOpen: false, enclave: never, log, waitMs: 300 })).toMatch(/cannot confirm/);
  });
});
