import { errorCatalogue } from '../../common/errors.js';
import { apiRoutes, routeNames, type RouteName, type RouteSpec } from '../../common/routes.js';

/**
 * The OpenAPI 3.1 document of the API, generated from the route table (common/routes.ts):
 * a route added there appears here with its schemas, and test/unit/openapi.test.ts fails
 * if the two ever disagree. The request schemas are the ones both processes validate
 * with; JSON Schema as OpenAPI 3.1 takes it, so they go in unchanged.
 */

type Json = Record<string, unknown>;

const TAGS: Record<RouteSpec['tag'], string> = {
  attestation: 'Proof of what code runs in the enclave, and the keys it holds',
  memory: 'A tenant\'s memories: store, list, search by meaning, change, delete',
  chat: 'OpenAI-compatible chat, given the tenant\'s relevant memories',
  models: 'The chat and embedding models',
  sealed: 'Requests encrypted to the enclave',
};

/** `/v1/memory/:id` → `/v1/memory/{id}`. */
export const openApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

export function openApiDocument(version: string): Json {
  const paths: Record<string, Record<string, Json>> = {};
  for (const name of routeNames) {
    const spec: RouteSpec = apiRoutes[name];
    const path = openApiPath(spec.path);
    paths[path] ??= {};
    paths[path][spec.method.toLowerCase()] = operation(name, spec);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Private agent service',
      version,
      description: 'Agents with their own memory, served by an enclave behind an untrusted proxy. Every answer from the enclave is signed (x-tee-signature); verify the enclave with GET /v1/attestation.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    tags: Object.entries(TAGS).map(([tag, description]) => ({ name: tag, description })),
    security: [{}, { apiKey: [] }],
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key from agent-keys; required when the enclave runs with API_KEYS_FILE' },
      },
      schemas: { Error: errorSchema() },
      responses: {
        Error: {
          description: 'OpenAI\'s error shape; `code` is one of the catalogue\'s (docs/api.md, Errors)',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
      },
      headers: {
        Signature: { description: 'The enclave\'s Ed25519 signature over the request and this answer (docs/trust-model.md, Signed responses)', schema: { type: 'string' } },
        Timestamp: { description: 'When the enclave signed, unix milliseconds', schema: { type: 'string' } },
      },
    },
  };
}

function operation(name: RouteName, spec: RouteSpec): Json {
  const parameters = [
    ...parametersOf(spec.schema.params, 'path'),
    ...parametersOf(spec.schema.querystring, 'query'),
    ...parametersOf(spec.schema.headers, 'header'),
  ];
  const json = { 'application/json': { schema: { type: 'object' } } };
  const events = spec.streams === 'always'
    ? { 'text/event-stream': { schema: { type: 'string', description: 'Server-Sent Events, each `data: <base64>`: a secretstream header, then sealed frames (docs/api.md, Sealed streams)' } } }
    : { ...json, 'text/event-stream': { schema: { type: 'string', description: 'with "stream": true: Server-Sent Events, ending with a signature event and [DONE]' } } };
  const envelope = { 'application/octet-stream': { schema: { type: 'string', format: 'binary', description: 'nonce (24 bytes) ‖ box: the inner answer sealed to the client (docs/api.md, Sealed requests)' } } };
  const content = spec.streams ? events : spec.bodyType === 'bytes' ? envelope : json;
  const requestBody = spec.bodyType === 'bytes'
    ? { 'application/octet-stream': { schema: { type: 'string', format: 'binary', description: 'client public key (32 bytes) ‖ nonce (24 bytes) ‖ box (docs/api.md, Sealed requests)' } } }
    : spec.schema.body && { 'application/json': { schema: copy(spec.schema.body) } };
  return {
    operationId: name,
    summary: spec.summary,
    tags: [spec.tag],
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(requestBody ? { requestBody: { required: true, content: requestBody } } : {}),
    responses: {
      200: {
        description: 'The enclave\'s answer, signed',
        headers: { 'x-tee-signature': { $ref: '#/components/headers/Signature' }, 'x-tee-timestamp': { $ref: '#/components/headers/Timestamp' } },
        content,
      },
      '4XX': { $ref: '#/components/responses/Error' },
      '5XX': { $ref: '#/components/responses/Error' },
    },
    'x-time-budget': spec.budget,
    ...('inferBudget' in spec ? { 'x-time-budget-infer': spec.inferBudget } : {}),
    'x-sealable': spec.sealable,
  };
}

interface ObjectSchema {
  properties?: Record<string, { description?: string }>;
  required?: readonly string[];
}

function parametersOf(schema: object | undefined, where: 'path' | 'query' | 'header'): Json[] {
  if (!schema) return [];
  const { properties = {}, required = [] } = schema as ObjectSchema;
  return Object.entries(properties).map(([name, property]) => ({
    name,
    in: where,
    // A path parameter is always required in OpenAPI.
    required: where === 'path' || required.includes(name),
    ...(property.description ? { description: property.description } : {}),
    schema: copy(property),
  }));
}

function errorSchema(): Json {
  return {
    type: 'object',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['message', 'type', 'param', 'code'],
        properties: {
          message: { type: 'string' },
          type: { type: 'string', enum: [...new Set(Object.values(errorCatalogue).map((c) => c.type))] },
          param: { type: ['string', 'null'] },
          code: { type: ['string', 'null'], enum: [...Object.keys(errorCatalogue), null] },
        },
      },
    },
  };
}

/** A plain, mutable copy (the table's schemas are deeply readonly constants). */
const copy = (value: object): Json => JSON.parse(JSON.stringify(value)) as Json;
