import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startService, type RunningService } from '../helpers/service.js';

/**
 * The tests' own helper (test/helpers/service.ts) under the race that failed a CI run: the port
 * it chose for the proxy was taken by another test's proxy before its own listened. Probing
 * /healthz then reached that other service (200), and the test read a data folder that service
 * did not use. Here a stand-in answers 200 on the chosen port: the helper must notice that its
 * own proxy exited on the busy port, start again on new ports, and hand back its own service.
 */
let other: Server;
let otherPort: number;
let svc: RunningService;

beforeAll(async () => {
  otherPort = await freePort();
  other = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}'));
  await new Promise<void>((resolve) => other.listen(otherPort, '127.0.0.1', resolve));
  svc = await startService({}, { firstPort: otherPort });
});
afterAll(async () => {
  await svc?.stop();
  await new Promise((resolve) => other?.close(resolve));
});

describe('startService when another program takes its port first', () => {
  it('starts again on another port and returns its own service', async () => {
    expect(svc.baseUrl).not.toBe(`http://127.0.0.1:${otherPort}`);
    // Its own enclave made the simulated root in its own folder, and its proxy answers the API.
    expect(existsSync(join(svc.dataDir, 'simulated-root.pem'))).toBe(true);
    const models = await fetch(`${svc.baseUrl}/v1/models`);
    expect(models.status).toBe(200);
    expect(svc.proxy.exitCode).toBeNull();
  });
});
