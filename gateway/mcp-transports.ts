/**
 * The gateway's MCP server (mcp.ts) on its two transports. stdio (`agent-gateway --mcp`):
 * one tenant and key from the command line, for as long as the client keeps stdin open;
 * stdout is the protocol, so nothing else may write there. Streamable HTTP (`/mcp` of the
 * HTTP gateway): stateless, one server per request, acting for the tenant the request's
 * `X-Tenant-Id` header names with its own Authorization header, as every other request to
 * the gateway brings its own tenant and key.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { limits } from '../common/limits.js';
import { readRequest } from './forward.js';
import { isLoopbackHost } from './loopback-host.js';
import { createMcpServer, type McpCaller } from './mcp.js';

export const TENANT_HEADER = 'x-tenant-id';

/** Serves MCP on stdin/stdout; resolves `closed` when the client goes away. */
export async function serveMcpStdio(caller: McpCaller): Promise<{ closed: Promise<void>; close(): Promise<void> }> {
  const server = createMcpServer(caller);
  const closed = new Promise<void>((resolve) => { server.onclose = resolve; });
  await server.connect(new StdioServerTransport());
  // The sdk's stdio transport does not notice the end of stdin by itself.
  process.stdin.once('end', () => void server.close());
  return { closed, close: () => server.close() };
}

/** A JSON-RPC error answer of the transport (no request id: the request was not read). */
const rpcError = (res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}) =>
  res.writeHead(status, { 'content-type': 'application/json', ...headers })
    .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));

/**
 * One MCP request at /mcp. Only POST: the server is stateless and never sends first, so
 * there is no session to open a stream for (GET) or to end (DELETE). The Host must be this
 * machine's loopback name: a web page on another name that resolves here (DNS rebinding)
 * is refused, as the MCP transport spec asks.
 */
export async function handleMcpHttp(req: IncomingMessage, res: ServerResponse, deps: Omit<McpCaller, 'tenant' | 'authorization'>, signal: AbortSignal): Promise<void> {
  if (req.method !== 'POST') return void rpcError(res, 405, 'agent-gateway serves MCP over POST only (stateless: no session, no server-sent stream)', { allow: 'POST' });
  if (!isLoopbackHost(req.headers.host)) return void rpcError(res, 403, 'agent-gateway serves /mcp to loopback hosts only');
  const tenant = req.headers[TENANT_HEADER];
  if (typeof tenant !== 'string' || tenant === '') return void rpcError(res, 400, `the ${TENANT_HEADER} header must name the tenant whose memory the tools act on`);
  const request = await readRequest(req, res, limits.maxBodyBytes, signal);
  if (request === 'too-large') return void rpcError(res, 413, `the request body is larger than ${limits.maxBodyBytes} bytes`);
  let message: unknown;
  try {
    message = JSON.parse(Buffer.from(request.body).toString('utf8'));
  } catch {
    return void rpcError(res, 400, 'the request body is not JSON');
  }
  const server = createMcpServer({ ...deps, tenant, authorization: request.authorization });
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on('close', () => void server.close());
  await server.connect(transport);
  await transport.handleRequest(req, res, message);
}
