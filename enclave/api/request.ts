import { ApiError, badRequest, notFound } from '../../common/errors.js';
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
    throw badRequest('invalid request target');
  }
  let url: URL;
  try {
    url = new URL(target, 'http://enclave.invalid');
  } catch {
    throw badRequest('invalid request target');
  }
  const query: Record<string, string> = Object.create(null);
  for (const [k, v] of url.searchParams) query[k] = v;
  return { path: url.pathname, query: { ...query } };
}

/** Parses a JSON body; anything but a JSON object or array is refused with a 400. */
export function parseJsonBody(body: Uint8Array): unknown {
  if (body.length === 0) throw badRequest('request body is required', null, 'missing_body');
  try {
    return JSON.parse(Buffer.from(body).toString('utf8'));
  } catch {
    throw badRequest('request body is not valid JSON', null, 'invalid_json');
  }
}

/** Refuses a target whose path is not the one the operation serves. */
export function expectPath(target: Target, pattern: RegExp): RegExpExecArray {
  const m = pattern.exec(target.path);
  if (!m) throw notFound(`no route for ${target.path}`, 'unknown_route');
  return m;
}

export function jsonReply(status: number, body: unknown, headers: Record<string, string> = {}): ApiReply {
  return { status, body: Buffer.from(JSON.stringify(body)), headers };
}

export function errorReply(err: ApiError): ApiReply {
  return jsonReply(err.status, err.toBody(), err.headers);
}
