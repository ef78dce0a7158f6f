import { readFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { notFound } from '../common/errors.js';
import { repoRoot } from '../common/paths.js';
import type { EnclaveLink } from './enclave-client.js';
import { routeNotFound } from './http-errors.js';
import { pageHeaders } from './page-headers.js';

/**
 * The console's files, read once at start: the page's own from the source folder (which the
 * deploy image copies too), and the verifier, the sdk's attestation code bundled by
 * `npm run build` (scripts/build-console.ts), from dist/.
 */
const consoleDir = join(repoRoot, 'proxy', 'console');
const JS = 'text/javascript; charset=utf-8';
const FILES: Record<string, { path: string; type: string }> = {
  'console.js': { path: join(consoleDir, 'console.js'), type: JS },
  'pins.js': { path: join(consoleDir, 'pins.js'), type: JS },
  'verifier.js': { path: join(repoRoot, 'dist', 'console', 'verifier.js'), type: JS },
  'style.css': { path: join(consoleDir, 'style.css'), type: 'text/css; charset=utf-8' },
  'favicon.svg': { path: join(consoleDir, 'favicon.svg'), type: 'image/svg+xml' },
};

function readConsoleFile(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new Error(`the console needs ${path} (${(error as Error).message}): run npm run build`);
  }
}

/**
 * GET / (the web console) and its files under /console/. Also, only while the enclave
 * says it is simulated, GET /console/simulated-root.pem: the simulated CA's root from the
 * host store's folder (DATA_DIR), a convenience for trying the console locally. It comes
 * from the host, so it proves nothing against a hostile host: the page says so, and asks
 * for a root obtained out of band for a check that means something.
 */
export function registerConsoleRoutes(app: FastifyInstance, deps: { enclave: EnclaveLink; dataDir: string }): void {
  const index = readFileSync(join(consoleDir, 'index.html'));
  const files = new Map(Object.entries(FILES).map(([name, { path, type }]) => [name, { type, body: readConsoleFile(path) }]));

  app.get('/', async (req, reply) => {
    // The router also sends a target that is no path (`GET *`) here: that is no request for the page.
    if (!req.url.startsWith('/')) throw routeNotFound(req.method, req.url);
    void pageHeaders(reply).type('text/html; charset=utf-8').send(index);
  });
  app.get('/console/simulated-root.pem', async (_req, reply) => {
    const health = await deps.enclave.health();
    if (health.tee_name !== 'simulated') throw notFound('the enclave is not simulated: pin the AWS Nitro root, obtained from AWS');
    const pem = await readFile(join(deps.dataDir, 'simulated-root.pem')).catch(() => undefined);
    if (!pem) throw notFound('no simulated root in DATA_DIR (the proxy reads the host store\'s folder)');
    void reply.type('application/x-pem-file').header('cache-control', 'no-store').send(pem);
  });
  app.get<{ Params: { file: string } }>('/console/:file', async (req, reply) => {
    const file = files.get(req.params.file);
    if (!file) throw notFound(`no console file ${req.params.file}`);
    void pageHeaders(reply).type(file.type).send(file.body);
  });
}
