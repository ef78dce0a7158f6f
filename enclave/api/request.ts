import { ApiError, badRequest, tooLarge } from '../../common/errors.js';
import { limits } from '../../common/limits.js';
import type { ApiReply } from '../../common/proto.js';

export interface Target {
  path: string;
  /** Query parameters; a repeated parameter keeps its last value. */
  query: Record<string, string>;
}

/**
 * Parses the request target the client sent (relayed by the proxy). The enclave reads
 * the query itself rather than trusting a parsed copy from the host.
 */
export function parseTarget(target: string): Target {
  if (typeof target !== 'string' || !target.startsWith('/') || target.length > 16 * 1024) {
    throw badRequest('invalid request target', null, 'invalid_target');
  }
  let url: URL;
  try {
    url = new URL(target, 'http://enclave.invalid');
  } catch {
    throw badRequest('invalid request target', null, 'invalid_target');
  }
  const query: Record<string, string> = Object.create(null);
  for (const [k, v] of url.searchParams) query[k] = v;
  return { path: url.pathname, query: { ...query } };
}

/**
 * Parses a JSON body under the same rules as the proxy: at most `maxBytes` (413; the
 * route's limit, limits.maxBodyBytes unless it says otherwise),
 * valid UTF-8 JSON (400), and no `__proto__` or `constructor.prototype` keys (400), which
 * the proxy's parser refuses too, so both sides agree on what a body means.
 */
export function parseJsonBody(body: Uint8Array, maxBytes: number = limits.maxBodyBytes): unknown {
  if (body.length === 0) throw badRequest('request body is required', null, 'missing_body');
  if (body.length > maxBytes) throw tooLarge(`request body is larger than ${maxBytes} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch {
    throw badRequest('request body is not valid JSON', null, 'invalid_json');
  }
  const problem = structureProblem(value);
  if (problem) throw badRequest(problem, null, 'invalid_json');
  return value;
}

/** A body of bytes (a route with bodyType 'bytes'), as sent: at most `maxBytes` (413, as for JSON). */
export function boundedBytes(body: Uint8Array, maxBytes: number = limits.maxBodyBytes): Uint8Array {
  if (body.length > maxBytes) throw tooLarge(`request body is larger than ${maxBytes} bytes`);
  return body;
}

/**
 * Walks the parsed value without recursion (nesting depth is the client's choice) and names
 * what is wrong with it: a `__proto__` or `constructor.prototype` key, or nesting deeper
 * than limits.maxJsonDepth.
 */
function structureProblem(root: unknown): string | undefined {
  const stack: Array<[unknown, number]> = [[root, 1]];
  while (stack.length) {
    const [node, depth] = stack.pop()!;
    if (typeof node !== 'object' || node === null) continue;
    if (depth > limits.maxJsonDepth) return `request body is nested more than ${limits.maxJsonDepth} levels deep`;
    if (!Array.isArray(node)) {
      if (Object.hasOwn(node, '__proto__')) return 'request body has a forbidden key (__proto__ or constructor.prototype)';
      const ctor = (node as Record<string, unknown>).constructor;
      if (Object.hasOwn(node, 'constructor') && typeof ctor === 'object' && ctor !== null && Object.hasOwn(ctor, 'prototype')) {
        return 'request body has a forbidden key (__proto__ or constructor.prototype)';
      }
    }
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return undefined;
}

export function jsonReply(status: number, body: unknown, headers: Record<string, string> = {}): ApiReply {
  return { status, body: Buffer.from(JSON.stringify(body)), headers };
}

export function errorReply(err: ApiError): ApiReply {
  return jsonReply(err.status, err.toBody(), err.headers);
}

/**
 * The request id as it may appear in logs. The proxy makes ids safe, but the enclave does
 * not rely on the proxy: anything else is logged as "invalid", so a hostile host cannot
 * write arbitrary text (or megabytes) into the enclave's logs through it.
 */
export function requestIdForLog(id: string): string {
  return /^[A-Za-z0-9._-]{1,64}$/.test(id) ? id : 'invalid';
}
