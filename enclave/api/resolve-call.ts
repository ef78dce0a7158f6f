import { badRequest, methodNotAllowed, notFound } from '../../common/errors.js';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import {
  apiRoutes, matchRoute, type BodyOf, type ParamsOf, type QueryOf, type RouteName, type StreamRouteName,
} from '../../common/routes.js';
import { validator } from '../../common/validation.js';
import { boundedBytes, parseJsonBody, parseTarget } from './request.js';
import type { ChunkSink } from './stream.js';
import type { Place } from './work-gate.js';
import type { MemoryMeter } from '../memory/meter.js';
import type { Caller } from '../auth/caller.js';

/** What the transport knows about a call: its deadline (epoch ms), and a signal that fires when the caller cancels it. */
export interface CallContext {
  deadline?: number;
  signal?: AbortSignal;
  /** The call's place in the work gate (a sealed call moves it to its inner key's share). */
  place?: Place;
  /** Told of the call's embeds and searches; a sealed call's are told to no one (memory/meter.ts). */
  meter?: MemoryMeter;
}

/**
 * `context` with a place or a meter of its own, its signal read only when asked for: the
 * Exchange stream makes a call's AbortSignal only then (grpc-server.ts), and a spread of the
 * context read it for every call (about 2% of the enclave's CPU a single-item add).
 */
export function withContext(context: CallContext | undefined, extra: Pick<CallContext, 'place' | 'meter'>): CallContext {
  return {
    deadline: context?.deadline,
    place: 'place' in extra ? extra.place : context?.place,
    meter: 'meter' in extra ? extra.meter : context?.meter,
    get signal() {
      return context?.signal;
    },
  };
}

/** A request resolved to its route, its inputs validated against the route table's schemas. */
export interface RouteCall<N extends RouteName> {
  /** The request without its Authorization header: handlers act on `caller`, never on the header. */
  request: Omit<ApiRequest, 'authorization'>;
  /** Who sent it, identified once where the request entered (enclave/auth/caller.ts). */
  caller: Caller;
  body: BodyOf<N>;
  query: QueryOf<N>;
  params: ParamsOf<N>;
}

export type RouteHandler<N extends RouteName> = (call: RouteCall<N>, context?: CallContext) => Promise<ApiReply>;
export type RouteStreamHandler<N extends RouteName> = (call: RouteCall<N>, sink: ChunkSink, signal: AbortSignal, context?: CallContext) => Promise<void>;

/** One handler per route of common/routes.ts: a route without one is a compile error. */
export type RouteHandlers = { [N in RouteName]: RouteHandler<N> };
/** The streamed answer of each route that may stream. */
export type StreamHandlers = { [N in StreamRouteName]: RouteStreamHandler<N> };

export interface ResolvedCall {
  name: RouteName;
  call: RouteCall<RouteName>;
}

type Validate = (value: unknown) => unknown;
const validators = new Map<string, Validate>();

function validate(name: RouteName, part: 'body' | 'querystring' | 'params', value: unknown): unknown {
  const schema = (apiRoutes[name].schema as Record<string, object | undefined>)[part];
  if (!schema) return part === 'body' ? undefined : value;
  const key = `${name}:${part}`;
  let check = validators.get(key);
  if (!check) {
    check = validator<unknown>(schema, part);
    validators.set(key, check);
  }
  return check(value);
}

/**
 * Resolves a request (as the proxy relayed it, or as a sealed request carried it) to its
 * route, and validates its inputs again: the enclave does not trust the host's routing or
 * checks. Unknown paths are 404, known paths with another method 405 (with Allow);
 * `admit` may refuse the route before its inputs are validated.
 */
export function resolveCall(request: ApiRequest, caller: Caller, admit?: (name: RouteName) => void): ResolvedCall {
  const target = parseTarget(request.target);
  const match = matchRoute(request.method, target.path);
  if (match.kind === 'none') throw notFound(`no route for ${request.method || '(no method)'} ${target.path}`, 'unknown_route');
  if (match.kind === 'method') throw methodNotAllowed(request.method || '(no method)', target.path, match.allowed);
  const { name } = match;
  // Before the inputs are read: e.g. a sealed request may not carry another sealed request.
  admit?.(name);
  const params: Record<string, string> = {};
  for (const [key, raw] of Object.entries(match.params)) params[key] = decodeSegment(raw, key);
  const spec = apiRoutes[name];
  const hasBody = 'body' in spec.schema;
  const limit = 'bodyLimit' in spec ? spec.bodyLimit : undefined;
  const call = {
    request,
    caller,
    params: validate(name, 'params', params),
    query: validate(name, 'querystring', { ...target.query }),
    body: 'bodyType' in spec ? boundedBytes(request.body, limit) : hasBody ? validate(name, 'body', parseJsonBody(request.body, limit)) : undefined,
  } as RouteCall<RouteName>;
  return { name, call };
}

/** A path segment as the proxy's router sees it: percent-decoded (a malformed escape is a 400). */
function decodeSegment(segment: string, param: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw badRequest(`invalid ${param} in the path`, param, 'invalid_url');
  }
}

/** Whether a route may answer with a stream. */
export const streams = (name: RouteName): name is StreamRouteName => 'streams' in apiRoutes[name];
