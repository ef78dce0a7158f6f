import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { repoRoot } from '../../common/paths.js';
import { pageHeaders } from '../page-headers.js';
import { docsPage } from './docs-page.js';
import { openApiDocument } from './document.js';

/** GET /openapi.json and GET /docs: built once, from the route table, when the proxy starts. */
export function registerOpenApiRoutes(app: FastifyInstance): void {
  const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
  const document = openApiDocument(version);
  const json = JSON.stringify(document, null, 2);
  const html = docsPage(document);
  app.get('/openapi.json', async (_req, reply) => {
    void reply.type('application/json; charset=utf-8').header('cache-control', 'no-cache').send(json);
  });
  app.get('/docs', async (_req, reply) => {
    void pageHeaders(reply).type('text/html; charset=utf-8').send(html);
  });
}
