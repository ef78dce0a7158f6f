import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/service.js';
import { scratch, stackTraceLine, startSupervisor } from '../helpers/supervisor.js';

/** `npm start`'s supervisor as an operator meets it: bad configuration, signals, a supervisor killed outright. */
const folder = scratch();
afterAll(() => folder.remove());

const alive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };

describe('the supervisor (npm start)', () => {
  it('a configuration error (PORT=abc) stops it with one line and exit 2, without a restart loop or a stack trace', async () => {
    const s = await startSupervisor(folder.dir, { PORT: 'abc' });
    expect(await s.exited).toBe(2);
    expect(s.output()).toMatch(/PORT/);
    expect(s.lastLine()).toMatch(/^agent-service: the proxy cannot run with this configuration/);
    expect(s.output()).not.toMatch(/restarting/);
    expect(s.output()).not.toMatch(stackTraceLine);
  });

  it('an embedding model that is not installed stops it the same way', async () => {
    const s = await startSupervisor(folder.dir, { EMBEDDING_MODEL: 'no-such-model' });
    expect(await s.exited).toBe(2);
    expect(s.output()).toMatch(/cannot load embedding model "no-such-model"/);
    expect(s.output()).not.toMatch(stackTraceLine);
  });

  it('kill -9 of the supervisor leaves no child running, so the next start finds its ports free', async () => {
    const s = await startSupervisor(folder.dir);
    await s.ready();
    const children = s.children();
    expect(children.length).toBe(3);
    s.child.kill('SIGKILL');
    await waitFor(async () => children.every((pid) => !alive(pid)), 20_000, () => `still running: ${children.filter(alive).join(' ')}`);
  });

  it('SIGTERM stops all three processes and exits 0', async () => {
    const s = await startSupervisor(folder.dir);
    await s.ready();
    const children = s.children();
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
    expect(children.filter(alive)).toEqual([]);
  });
});
