import { ApiError, notFound } from '../../common/errors.js';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import { errorReply, parseTarget } from './request.js';

/** What the transport knows about a call: its deadline (epoch ms), and a signal that fires when the caller cancels it. */
export interface CallContext {
  deadline?: number;
  signal?: AbortSignal;
}

export type Handler = (request: ApiRequest, context?: CallContext) => Promise<ApiReply>;

/**
 * The enclave's routing table: which RPC serves which HTTP method and path. The proxy
 * picks the RPC for a plain request; for a sealed request the host cannot see the
 * method or path, so the enclave picks it here, from the decrypted request. The HTTP
 * method of each RPC is also what its response signature states.
 */
export interface Route {
  rpc: string;
  method: 'GET' | 'POST' | 'DELETE';
  path: RegExp;
}

export const routes: readonly Route[] = [
  { rpc: 'GetAttestation', method: 'GET', path: /^\/v1\/attestation\/?$/ },
  { rpc: 'AddMemory', method: 'POST', path: /^\/v1\/memory\/?$/ },
  { rpc: 'QueryMemory', method: 'GET', path: /^\/v1\/memory\/?$/ },
  { rpc: 'GetMemory', method: 'GET', path: /^\/v1\/memory\/[^/]+$/ },
  { rpc: 'DeleteMemory', method: 'DELETE', path: /^\/v1\/memory\/[^/]+$/ },
  { rpc: 'ChatCompletion', method: 'POST', path: /^\/v1\/chat\/completions\/?$/ },
  { rpc: 'ChatCompletionStream', method: 'POST', path: /^\/v1\/chat\/completions\/?$/ },
  { rpc: 'Sealed', method: 'POST', path: /^\/v1\/sealed\/?$/ },
];

/** The HTTP method an RPC serves; throws for an RPC missing from the table, so it cannot go unsigned. */
export function methodOf(rpc: string): Route['method'] {
  const route = routes.find((r) => r.rpc === rpc);
  if (!route) throw new Error(`RPC ${rpc} has no entry in enclave/api/routes.ts`);
  return route.method;
}

/**
 * The RPC for a method and path, or undefined. ChatCompletionStream shares its route
 * with ChatCompletion; a unary dispatch finds ChatCompletion first.
 */
export function findRoute(method: string, path: string): Route | undefined {
  return routes.find((r) => r.method === method && r.path.test(path));
}

/**
 * Dispatch of a decrypted (sealed) request: to the RPC handler its method and path name,
 * the same handler the plain route reaches through the proxy. `sign` signs the replies
 * made here (no route, bad target) like every other reply.
 */
export function dispatcher(
  handlers: Readonly<Record<string, Handler | undefined>>,
  sign: (method: string, request: ApiRequest, reply: ApiReply) => ApiReply,
): (method: string, request: ApiRequest, context?: CallContext) => Promise<ApiReply> {
  return async (method, request, context) => {
    let path: string;
    try {
      path = parseTarget(request.target).path;
    } catch (error) {
      if (error instanceof ApiError) return sign(method, request, errorReply(error));
      throw error;
    }
    const rpc = findRoute(method, path)?.rpc;
    // A sealed request cannot nest another sealed request.
    const handler = rpc === undefined || rpc === 'Sealed' ? undefined : handlers[rpc];
    if (!handler) return sign(method, request, errorReply(notFound(`no route for ${method} ${path}`, 'unknown_route')));
    return handler(request, context);
  };
}
