/**
 * The gateway's HTTP server on 127.0.0.1: every /v1/ request goes through forward() (sealed,
 * verified); /mcp is the memory tools over MCP's streamable HTTP (mcp-transports.ts), through
 * the same sealed call; anything else is not the API and is answered here. After each request the
 * newest state head is written to the state file (only when it moved).
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiError, notFound, tooLarge } from '../common/errors.js';
import { limits } from '../common/limits.js';
import type { StateTracker } from '../protocol/response-signature.js';
import { forward, readRequest } from './forward.js';
import { isLoopbackHost } from './loopback-host.js';
import { handleMcpHttp } from './mcp-transports.js';
import type { StateFile } from './state-file.js';
import type { Trust } from './trust.js';

export interface GatewayServer {
  server: Server;
  port: number;
  close(): Promise<void>;
}

const sendError = (res: ServerResponse, error: ApiError) =>
  res.writeHead(error.status, { 'content-type': 'application/json', ...error.headers }).end(JSON.stringify(error.toBody()));

export async function startGateway(deps: { trust: Trust; tracker: StateTracker; stateFile: StateFile; port: number }): Promise<GatewayServer> {
  const server = createServer((req, res) => {
    const client = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) client.abort();
    });
    void (async () => {
      const afterCall = () => deps.stateFile.save(deps.tracker);
      if ((req.url ?? '').split('?')[0] === '/mcp') return handleMcpHttp(req, res, { trust: deps.trust, afterCall }, client.signal);
      if (!isLoopbackHost(req.headers.host)) return sendError(res, new ApiError('gateway_host_refused', 'agent-gateway serves the API to loopback hosts only (Host: 127.0.0.1, localhost or [::1])'));
      if (!(req.url ?? '').startsWith('/v1/')) return sendError(res, notFound(`agent-gateway serves the API under /v1/, not ${req.url?.split('?')[0]}`));
      const request = await readRequest(req, res, limits.maxBodyBytes, client.signal);
      if (request === 'too-large') return sendError(res, tooLarge(`the request body is larger than ${limits.maxBodyBytes} bytes`));
      await forward(deps.trust, request, res);
      afterCall();
    })().catch((error: unknown) => {
      // Nothing of the request or its answer in the message: it may be the user's data.
      process.stderr.write(`agent-gateway: request failed: ${(error as Error)?.name ?? 'error'}\n`);
      if (!res.headersSent) sendError(res, new ApiError('internal_error', 'agent-gateway failed'));
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(deps.port, '127.0.0.1', resolve);
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}
