import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { ApiError, badRequest, methodNotAllowed } from '../common/errors.js';
import { limits } from '../common/limits.js';
import { SEALED_CONTENT_TYPE, SealedFormatError, splitRequestEnvelope, TENANT_KEY_HEADER } from '../protocol/sealed.js';
import type { Logger } from '../common/logger.js';
import type { ApiReplyIn } from '../common/proto.js';
import { apiRoutes, budgetOf, pathMethods, routeNames } from '../common/routes.js';
import { compileSchema } from '../common/validation.js';
import { answerAfterBody, answerProtocolEdges, clientErrorHandler, lingerOnRefusedBody } from './client-errors.js';
import { destinationOf } from './destination.js';
import { streamingRoute } from './streaming-route.js';
import type { EnclaveLink, ForwardedRequest } from './enclave-client.js';
import { registerGuards, type GuardOptions } from './guards.js';
import { ProxyMetrics } from './metrics.js';
import { registerOpsRoutes } from './ops-routes.js';
import { registerOpenApiRoutes } from './openapi/routes.js';
import { registerConsoleRoutes } from './console-routes.js';
import { routeNotFound, toApiError } from './http-errors.js';
import { requestLogger } from './request-logger.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The body exactly as the client sent it: what the enclave parses and signs over. */
    rawBody?: Buffer;
  }
  interface FastifyContextConfig {
    /** The route's body is bytes, not JSON (common/routes.ts bodyType). */
    bodyType?: 'bytes';
  }
}

export interface ProxyOptions {
  enclave: EnclaveLink;
  logger: Logger;
  tls?: { cert: string; key: string };
  guards: GuardOptions;
  /** Longest a client may take to send its whole request. */
  receiveTimeoutMs: number;
  /** Deadline of a chat completion (default 300 s). */
  chatTimeoutMs?: number;
  /** GET /metrics (a fresh registry when absent). */
  metrics?: ProxyMetrics;
  /** The host store's folder, where the console finds the simulated root (default ./data). */
  dataDir?: string;
  /** Several enclaves behind `enclave` (a ClusterRouter): each request says where it goes. */
  cluster?: boolean;
}

const requestIdPattern = /^[A-Za-z0-9._-]{1,64}$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The untrusted host's HTTP front: routing, schema validation and body limits, then a
 * relay of the client's exact bytes to the enclave and of the enclave's answer back.
 */
export async function buildProxy(options: ProxyOptions): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: options.logger,
    bodyLimit: limits.maxBodyBytes,
    requestTimeout: options.receiveTimeoutMs,
    clientErrorHandler,
    // Errors the router raises before any hook runs (bad percent-encoding, an overlong
    // path segment) take the same path to the error shape as everything else.
    frameworkErrors: (err: unknown, _req: FastifyRequest, reply: FastifyReply) => {
      const { error } = toApiError(err);
      void reply.code(error.status).send(error.toBody());
    },
    // Long enough that the id schema (≤ 128 characters) decides, not the router.
    routerOptions: { maxParamLength: 512 },
    // Node checks request timeouts on this interval (default 30 s); check every second.
    ...(options.tls
      ? { https: { cert: readFileSync(options.tls.cert), key: readFileSync(options.tls.key), connectionsCheckingInterval: 1000 } }
      : { http: { connectionsCheckingInterval: 1000 } }),
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && requestIdPattern.test(given) ? given : randomUUID();
    },
    // Query strings carry memory queries and tenant ids: log paths only.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: (logger, bindings) => requestLogger(logger as Logger, bindings),
  }) as unknown as FastifyInstance;

  // Node enforces requestTimeout only when headersTimeout (default 60 s) is not longer.
  app.server.headersTimeout = Math.min(app.server.headersTimeout, options.receiveTimeoutMs);
  answerProtocolEdges(app.server);

  app.setValidatorCompiler(({ schema, httpPart }) => compileSchema(schema, httpPart ?? 'body'));

  // Keep the raw bytes (the enclave needs them), and parse with fastify's own hardened
  // parser, which refuses __proto__ and constructor.prototype keys.
  const defaultJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    if (takesBytes(req)) {
      done(bytesOnly(req), undefined);
      return;
    }
    req.rawBody = body as Buffer;
    let text: string;
    try {
      // Invalid UTF-8 is not JSON; the enclave refuses it too, so refuse it here first.
      text = utf8.decode(body as Buffer);
    } catch {
      done(badRequest('request body is not valid JSON', null, 'invalid_json'), undefined);
      return;
    }
    void defaultJson(req, text, done);
  });
  // A sealed envelope: relayed as its bytes, never parsed. What the host can check of it is
  // its shape (long enough, a usable client key); the enclave checks that again.
  app.addContentTypeParser(SEALED_CONTENT_TYPE, { parseAs: 'buffer' }, (req, body, done) => {
    if (!takesBytes(req)) {
      done(new ApiError('unsupported_media_type', 'Content-Type must be application/json'), undefined);
      return;
    }
    try {
      splitRequestEnvelope(body as Buffer);
    } catch (error) {
      done(error instanceof SealedFormatError ? badRequest(error.message, null, 'invalid_sealed_request') : error as Error, undefined);
      return;
    }
    req.rawBody = body as Buffer;
    done(null, body);
  });

  const metrics = options.metrics ?? new ProxyMetrics();
  app.addHook('onResponse', (req, reply, done) => {
    req.log.info({ method: req.method, path: req.url.split('?')[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'request');
    metrics.observe(req, reply);
    done();
  });

  await registerGuards(app, options.guards);

  app.setErrorHandler((err, req, reply) => {
    const { error, unexpected } = toApiError(err, req.routeOptions.bodyLimit);
    if (unexpected) req.log.error({ err }, 'unexpected error');
    lingerOnRefusedBody(err, req, reply);
    return answerAfterBody(req, reply, error.status, () => void reply.code(error.status).headers(error.headers).send(error.toBody()));
  });
  app.setNotFoundHandler((req, reply) => {
    const error = routeNotFound(req.method, req.url);
    return answerAfterBody(req, reply, error.status, () => void reply.code(error.status).send(error.toBody()));
  });

  const forward = (req: FastifyRequest, sealed: boolean): ForwardedRequest => {
    // A tenant key belongs inside a sealed request: one in a plain header has passed the host in
    // the clear. Refused (never relayed), so the client learns it instead of quietly leaking it.
    if (req.headers[TENANT_KEY_HEADER] !== undefined) {
      throw badRequest(`a tenant key travels only inside a sealed request (the sdk's tenantKeyFile, the gateway's --tenant-key-file): this one was sent in a plain ${TENANT_KEY_HEADER} header, which the host reads; use a new key`, TENANT_KEY_HEADER, 'tenant_key_in_plain');
    }
    return {
      requestId: String(req.id),
      method: req.method,
      target: req.url,
      body: req.rawBody,
      authorization: req.headers.authorization,
      organization: header(req, 'organization_id') ?? header(req, 'openai-organization'),
      knownState: header(req, 'x-tee-known-state'),
      ...(options.cluster ? { destination: destinationOf(req, sealed) } : {}),
    };
  };
  const send = (req: FastifyRequest, reply: FastifyReply, answer: ApiReplyIn) => {
    // JSON unless the enclave says otherwise (a sealed reply is bytes).
    void reply.code(answer.status).headers(answer.headers).header('x-request-id', req.id);
    if (!reply.hasHeader('content-type')) void reply.type('application/json');
    void reply.send(answer.body);
  };
  const chatTimeoutMs = options.chatTimeoutMs ?? 300_000;

  // Every API route, from the one table the enclave routes by (common/routes.ts).
  for (const name of routeNames) {
    const spec = apiRoutes[name];
    // Routes that wait on the model (a sealed request may carry chat, which the host cannot see) get chat's time.
    const timeoutMs = (body: unknown) => (budgetOf(spec, body) === 'model' ? chatTimeoutMs : undefined);
    const sealed = spec.tag === 'sealed';
    app.route({
      method: spec.method,
      url: spec.path,
      schema: spec.schema,
      config: { bodyType: 'bodyType' in spec ? spec.bodyType : undefined },
      ...('bodyLimit' in spec ? { bodyLimit: spec.bodyLimit } : {}),
      // A body of bytes is required: without one (no body, or none fastify parsed) the route is refused here.
      ...('bodyType' in spec ? { preValidation: (req: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void) => done(req.rawBody ? undefined : bytesOnly(req)) } : {}),
      handler: 'streams' in spec
        ? streamingRoute({ enclave: options.enclave, forward: (req) => forward(req, sealed), send, timeoutMs: chatTimeoutMs, always: spec.streams === 'always' })
        : async (req, reply) => {
          const ms = timeoutMs(req.body);
          send(req, reply, await options.enclave.call(forward(req, sealed), ms === undefined ? {} : { timeoutMs: ms }));
        },
    });
  }
  // A known path with another method: 405 with the methods it takes.
  for (const [path, methods] of pathMethods()) {
    const others = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']
      .filter((m) => !methods.includes(m as never) && !(m === 'HEAD' && methods.includes('GET')));
    app.route({
      method: others, url: path,
      handler: async (req, reply) => {
        const error = methodNotAllowed(req.method, req.url.split('?')[0], methods);
        void reply.code(error.status).headers(error.headers).send(error.toBody());
      },
    });
  }

  app.get('/healthz', async (_req, reply) => {
    const health = await options.enclave.health();
    void reply.send({ status: 'ok', enclave: { ready: health.ready, tee_name: health.tee_name, embedding_model: health.embedding_model } });
  });

  registerOpsRoutes(app, { enclave: options.enclave, metrics });
  registerOpenApiRoutes(app);
  registerConsoleRoutes(app, { enclave: options.enclave, dataDir: options.dataDir ?? './data' });

  return app;
}

/** Whether the request's route takes its body as bytes (common/routes.ts bodyType). */
const takesBytes = (req: FastifyRequest) => req.routeOptions.config?.bodyType === 'bytes';

const bytesOnly = (req: FastifyRequest) => new ApiError(
  'unsupported_media_type',
  `${req.method} ${req.url.split('?')[0]} takes a body of Content-Type ${SEALED_CONTENT_TYPE}: the sealed envelope as bytes (client public key ‖ nonce ‖ box; docs/api.md, Sealed requests), not JSON`,
);

function header(req: FastifyRequest, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' && value !== '' ? value : undefined;
}
