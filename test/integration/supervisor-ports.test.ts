import { createServer, type Server } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { scratch, stackTraceLine, startSupervisor } from '../helpers/supervisor.js';

/**
 * A port another program holds is configuration, not a crash: `npm start` stops with exit
 * code 2 and one last line naming the port and the setting, without restarting or a stack trace.
 */
const folder = scratch();
const held: Server[] = [];
afterAll(async () => {
  await Promise.all(held.map((s) => new Promise((res) => s.close(res))));
  await folder.remove();
});

/** Another program listening on a free loopback port; resolves with the port. */
async function holdPort(): Promise<number> {
  const server = createServer();
  held.push(server);
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  return (server.address() as { port: number }).port;
}

describe('npm start with a port another program holds', () => {
  it.each([
    ['PORT', (port: number) => String(port)],
    ['ENCLAVE_ADDR', (port: number) => `127.0.0.1:${port}`],
    ['HOST_STORE_ADDR', (port: number) => `127.0.0.1:${port}`],
  ])('%s: exit 2, the last line names the port and the setting, no restart, no stack trace', async (setting, value) => {
    const port = await holdPort();
    const s = await startSupervisor(folder.dir, { [setting]: value(port), LOG_LEVEL: 'info' });
    expect(await s.exited).toBe(2);
    expect(s.lastLine()).toMatch(new RegExp(`^agent-service: .*port ${port} .*\\(${setting}\\) is in use by another program; set ${setting} to a free port$`));
    expect(s.output()).not.toMatch(/restarting/);
    expect(s.output()).not.toMatch(stackTraceLine);
    // Each process's start and stop at info level, and no more.
    expect(s.output().trimEnd().split('\n').length).toBeLessThan(20);
  });
});
