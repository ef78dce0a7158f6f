import { chatCompletionSchema, chatHeadersSchema, type ChatCompletionInput } from './chat-schema.js';
import { limits } from './limits.js';
import {
  attestationQuerySchema, embeddingsRequestSchema, exportQuerySchema, importMemoriesSchema, type ExportQuery, type ImportMemoriesInput, listOrQueryMemorySchema, memoryIdParamsSchema, modelIdParamsSchema,
  knownStateHeadersSchema, responsesRequestSchema, searchMemorySchema, tenantQuerySchema, deleteMemoriesQuerySchema, updateMemorySchema,
  type AttestationQuery, type EmbeddingsInput, type ListOrQueryMemoryInput, type ResponsesInput,
  type SearchMemoryInput, type TenantInput, type TenantScopeInput, type UpdateMemoryInput,
} from './schemas.js';
import { memoryRequestSchema, type MemoryRequest } from './infer-schema.js';

/**
 * The API's one route table. The proxy registers its HTTP routes from it, the enclave
 * routes plain and sealed requests with it and validates each request against the same
 * schemas, the OpenAPI document is generated from it, and the enclave's handler map is
 * typed by it (a route without a handler does not compile). Adding an endpoint is an entry
 * here plus a handler.
 */

export type HttpMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

export interface RouteSchemas {
  body?: object;
  querystring?: object;
  params?: object;
  /** Checked by the proxy only: the enclave reads the headers it needs (organization, known state) from the request. */
  headers?: object;
}

export interface RouteSpec {
  method: HttpMethod;
  /** fastify's syntax: `:name` is a path parameter (one segment). */
  path: string;
  /** One line for the OpenAPI document. */
  summary: string;
  tag: 'attestation' | 'memory' | 'chat' | 'models' | 'sealed';
  schema: RouteSchemas;
  /**
   * Which time budget the call gets: `enclave` (ENCLAVE_TIMEOUT_MS, the proxy's default
   * deadline) or `model`, for calls that wait on the chat model (CHAT_TIMEOUT_MS; the
   * enclave bounds its own part by the model's timeouts instead).
   */
  budget: 'enclave' | 'model';
  /** The budget of a body with `infer: true` (it waits on the model: extraction), when not `budget`. */
  inferBudget?: 'model';
  /**
   * `true`: the body may ask for a stream (`stream: true`), and the proxy then uses the
   * streaming call; `'always'`: the answer is always a stream (a sealed stream).
   */
  streams?: true | 'always';
  /** Largest body, when not limits.maxBodyBytes. */
  bodyLimit?: number;
  /**
   * `'bytes'`: the body is bytes of Content-Type application/octet-stream, not JSON (a sealed
   * envelope): the proxy relays them unparsed and the handler gets them as sent, at most
   * `bodyLimit` bytes. Such a route has no body schema.
   */
  bodyType?: 'bytes';
  /** May be sent inside a sealed request (every route but /v1/sealed itself). */
  sealable: boolean;
}

/** Phantom types of a route's validated inputs, so handlers get typed values. */
interface Inputs<Body, Query, Params> {
  readonly inputs?: { body: Body; query: Query; params: Params };
}

type NoInput = Record<string, never>;

const route = <Body = undefined, Query = NoInput, Params = NoInput>() =>
  <const S extends RouteSpec>(spec: S): S & Inputs<Body, Query, Params> => spec;

export const apiRoutes = {
  GetAttestation: route<undefined, AttestationQuery>()({
    method: 'GET', path: '/v1/attestation', tag: 'attestation', budget: 'enclave', sealable: true,
    summary: 'The enclave\'s attestation document, its signing key and sealed-request key',
    schema: { querystring: attestationQuerySchema, headers: knownStateHeadersSchema },
  }),
  AddMemory: route<MemoryRequest>()({
    method: 'POST', path: '/v1/memory', tag: 'memory', budget: 'enclave', inferBudget: 'model', sealable: true,
    summary: 'Store one memory, or a batch under `memories`; or, with `messages` and `infer: true`, the memories the model extracts from a conversation',
    schema: { body: memoryRequestSchema, headers: knownStateHeadersSchema },
  }),
  ListMemories: route<undefined, ListOrQueryMemoryInput>()({
    method: 'GET', path: '/v1/memory', tag: 'memory', budget: 'enclave', sealable: true,
    summary: 'With `query`: the top-k memories for it. Without: the tenant\'s memories, newest first, in pages',
    schema: { querystring: listOrQueryMemorySchema, headers: knownStateHeadersSchema },
  }),
  DeleteMemories: route<undefined, TenantScopeInput>()({
    method: 'DELETE', path: '/v1/memory', tag: 'memory', budget: 'enclave', sealable: true,
    summary: 'Delete every memory of a tenant, or of its scopes named (user_id, agent_id, run_id)',
    schema: { querystring: deleteMemoriesQuerySchema, headers: knownStateHeadersSchema },
  }),
  SearchMemory: route<SearchMemoryInput>()({
    method: 'POST', path: '/v1/memory/search', tag: 'memory', budget: 'enclave', sealable: true,
    summary: 'The top-k memories for a query, optionally filtered by metadata and scopes',
    schema: { body: searchMemorySchema, headers: knownStateHeadersSchema },
  }),
  ImportMemories: route<ImportMemoriesInput>()({
    method: 'POST', path: '/v1/memory/import', tag: 'memory', budget: 'enclave', sealable: true,
    summary: 'Restore memories with their ids: lines of an export (history included) or a Mem0 export\'s items, up to 100 at once',
    schema: { body: importMemoriesSchema, headers: knownStateHeadersSchema },
  }),
  // Before GetMemory: the static path wins over `/v1/memory/:id`.
  ExportMemories: route<undefined, ExportQuery>()({
    method: 'GET', path: '/v1/memory/export', tag: 'memory', budget: 'enclave', sealable: true, streams: 'always',
    summary: 'Every memory of the tenant, with its history, as JSON Lines sealed to the caller\'s X25519 key (a sealed event stream)',
    schema: { querystring: exportQuerySchema, headers: knownStateHeadersSchema },
  }),
  GetMemory: route<undefined, TenantInput, { id: string }>()({
    method: 'GET', path: '/v1/memory/:id', tag: 'memory', budget: 'enclave', sealable: true,
    summary: 'One memory',
    schema: { params: memoryIdParamsSchema, querystring: tenantQuerySchema, headers: knownStateHeadersSchema },
  }),
  UpdateMemory: route<UpdateMemoryInput, TenantInput, { id: string }>()({
    method: 'PATCH', path: '/v1/memory/:id', tag: 'memory', budget: 'enclave', sealable: true,
    summary: 'Change a memory\'s content or metadata (re-embedded at once)',
    schema: { params: memoryIdParamsSchema, querystring: tenantQuerySchema, body: updateMemorySchema, headers: knownStateHeadersSchema },
  }),
  GetMemoryHistory: route<undefined, TenantInput, { id: string }>()({
    method: 'GET', path: '/v1/memory/:id/history', tag: 'memory', budget: 'enclave', sealable: true,
    summary: 'Every version of a memory, oldest first (a deleted memory\'s without content)',
    schema: { params: memoryIdParamsSchema, querystring: tenantQuerySchema, headers: knownStateHeadersSchema },
  }),
  DeleteMemory: route<undefined, TenantInput, { id: string }>()({
    method: 'DELETE', path: '/v1/memory/:id', tag: 'memory', budget: 'enclave', sealable: true,
    summary: 'Delete one memory',
    schema: { params: memoryIdParamsSchema, querystring: tenantQuerySchema, headers: knownStateHeadersSchema },
  }),
  ChatCompletion: route<ChatCompletionInput>()({
    method: 'POST', path: '/v1/chat/completions', tag: 'chat', budget: 'model', sealable: true, streams: true,
    summary: 'OpenAI chat completions, given the tenant\'s relevant memories',
    schema: { body: chatCompletionSchema, headers: chatHeadersSchema },
  }),
  CreateResponse: route<ResponsesInput>()({
    method: 'POST', path: '/v1/responses', tag: 'chat', budget: 'model', sealable: true, streams: true,
    summary: 'OpenAI Responses (text), given the tenant\'s relevant memories',
    schema: { body: responsesRequestSchema, headers: chatHeadersSchema },
  }),
  ListModels: route()({
    method: 'GET', path: '/v1/models', tag: 'models', budget: 'enclave', sealable: true,
    summary: 'The models chat can use',
    schema: { headers: knownStateHeadersSchema },
  }),
  GetModel: route<undefined, NoInput, { id: string }>()({
    method: 'GET', path: '/v1/models/:id', tag: 'models', budget: 'enclave', sealable: true,
    summary: 'One model',
    schema: { params: modelIdParamsSchema, headers: knownStateHeadersSchema },
  }),
  CreateEmbeddings: route<EmbeddingsInput>()({
    method: 'POST', path: '/v1/embeddings', tag: 'models', budget: 'enclave', sealable: true,
    summary: 'Embeddings from the enclave\'s embedding model',
    schema: { body: embeddingsRequestSchema, headers: knownStateHeadersSchema },
  }),
  Sealed: route<Uint8Array>()({
    method: 'POST', path: '/v1/sealed', tag: 'sealed', budget: 'model', sealable: false, bodyType: 'bytes', bodyLimit: limits.maxSealedEnvelopeBytes,
    summary: 'A request encrypted to the enclave: the host sees only the envelope',
    schema: { headers: knownStateHeadersSchema },
  }),
  // Its own path rather than a flag in the envelope: the proxy must pick the streaming call
  // before it could read any flag, and the envelope stays one shape (protocol/sealed-stream.ts).
  SealedStream: route<Uint8Array>()({
    method: 'POST', path: '/v1/sealed/stream', tag: 'sealed', budget: 'model', sealable: false, streams: 'always',
    bodyType: 'bytes', bodyLimit: limits.maxSealedEnvelopeBytes,
    summary: 'A sealed request whose answer streams back as sealed frames (streamed chat and responses included)',
    schema: {},
  }),
} as const;

export type RouteName = keyof typeof apiRoutes;
type InputsOf<N extends RouteName> = NonNullable<(typeof apiRoutes)[N]['inputs']>;
export type BodyOf<N extends RouteName> = InputsOf<N>['body'];
export type QueryOf<N extends RouteName> = InputsOf<N>['query'];
export type ParamsOf<N extends RouteName> = InputsOf<N>['params'];
/** The routes whose answer may be a stream. */
export type StreamRouteName = { [N in RouteName]: (typeof apiRoutes)[N] extends { streams: true | 'always' } ? N : never }[RouteName];

export const routeNames = Object.keys(apiRoutes) as RouteName[];

/** The time budget of one call of a route: its `inferBudget` when the body asks for extraction (`infer: true`). */
export function budgetOf(spec: RouteSpec, body: unknown): RouteSpec['budget'] {
  const infers = typeof body === 'object' && body !== null && (body as { infer?: unknown }).infer === true;
  return infers && spec.inferBudget ? spec.inferBudget : spec.budget;
}

interface CompiledPath {
  pattern: RegExp;
  params: string[];
}

const compiled = new Map<string, CompiledPath>();

/** `/v1/memory/:id` → /^\/v1\/memory\/([^/]+)\/?$/ and ['id']. A trailing slash is accepted, as the proxy's router does. */
function compilePath(path: string): CompiledPath {
  let c = compiled.get(path);
  if (!c) {
    const params: string[] = [];
    const source = path.split('/').map((segment) => {
      if (!segment.startsWith(':')) return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      params.push(segment.slice(1));
      return '([^/]+)';
    }).join('/');
    c = { pattern: new RegExp(`^${source}/?$`), params };
    compiled.set(path, c);
  }
  return c;
}

export type RouteMatch =
  | { kind: 'route'; name: RouteName; params: Record<string, string> }
  /** The path exists, but not with this method: 405 with these in Allow. */
  | { kind: 'method'; allowed: HttpMethod[] }
  | { kind: 'none' };

/**
 * Finds the route for a method and a path (already split from its query). Path parameters
 * are returned raw (still percent-encoded): decoding is the caller's, so a malformed escape
 * is its 400. A static path wins over a parameter (POST /v1/memory/search is a search).
 */
export function matchRoute(method: string, path: string): RouteMatch {
  const allowed = new Set<HttpMethod>();
  for (const name of routeNames) {
    const spec = apiRoutes[name];
    const m = compilePath(spec.path).pattern.exec(path);
    if (!m) continue;
    if (spec.method !== method) {
      allowed.add(spec.method);
      continue;
    }
    const params: Record<string, string> = {};
    compilePath(spec.path).params.forEach((p, i) => { params[p] = m[i + 1]!; });
    return { kind: 'route', name, params };
  }
  return allowed.size > 0 ? { kind: 'method', allowed: [...allowed].sort() } : { kind: 'none' };
}

/** The route's name for logs: never throws; 'unknown' when nothing matches. */
export function routeLabel(method: string, target: string): string {
  const match = matchRoute(method, target.split('?', 1)[0]);
  return match.kind === 'route' ? match.name : 'unknown';
}

/** Every path in the table with the methods it serves, sorted (for 405 answers and the OpenAPI document). */
export function pathMethods(): Map<string, HttpMethod[]> {
  const paths = new Map<string, HttpMethod[]>();
  for (const name of routeNames) {
    const { path, method } = apiRoutes[name];
    paths.set(path, [...(paths.get(path) ?? []), method].sort());
  }
  return paths;
}
