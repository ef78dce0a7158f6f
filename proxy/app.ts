import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { chatCompletionSchema, chatHeadersSchema } from '../common/chat-schema.js';
import { limits } from '../common/limits.js';
import type { Logger } from '../common/logger.js';
import type { ApiReplyIn } from '../common/proto.js';
import {
  addMemorySchema, attestationQuerySchema, memoryIdParamsSchema, queryMemorySchema, tenantQuerySchema,
} from '../common/schemas.js';
import { compileSchema } from '../common/validation.js';
import { chatRoute } from './chat-route.js';
import type { EnclaveConnection, ForwardedRequest, UnaryRpc } from './enclave-client.js';
import { routeNotFound, toApiError } from './http-errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The body exactly as the client sent it: what the enclave parses and signs over. */
    rawBody?: Buffer;
  }
}

export interface ProxyOptions {
  enclave: EnclaveConnection;
  logger: Logger;
  tls?: { cert: string; key: string };
  /** Deadline of a chat completion (default 300 s). */
  chatTimeoutMs?: number;
}

const requestIdPattern = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * The untrusted host's HTTP front: routing, schema validation and body limits, then a
 * relay of the client's exact bytes to the enclave and of the enclave's answer back.
 */
export function buildProxy(options: ProxyOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: options.logger,
    bodyLimit: limits.maxBodyBytes,
    https: options.tls ? { cert: readFileSync(options.tls.cert), key: readFileSync(options.tls.key) } : null,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && requestIdPattern.test(given) ? given : randomUUID();
    },
    // Query strings carry memory queries and tenant ids: log paths only.
    disableRequestLogging: true,
  }) as unknown as FastifyInstance;

  app.setValidatorCompiler(({ schema, httpPart }) => compileSchema(schema, httpPart ?? 'body'));

  // Keep the raw bytes (the enclave needs them), and parse with fastify's own hardened
  // parser, which refuses __proto__ and constructor.prototype keys.
  const defaultJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    req.rawBody = body as Buffer;
    defaultJson(req, (body as Buffer).toString('utf8'), done);
  });

  app.addHook('onResponse', (req, reply, done) => {
    req.log.info({ method: req.method, path: req.url.split('?')[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'request');
    done();
  });

  app.setErrorHandler((err, req, reply) => {
    const { error, unexpected } = toApiError(err);
    if (unexpected) req.log.error({ err }, 'unexpected error');
    void reply.code(error.status).headers(error.headers).send(error.toBody());
  });
  app.setNotFoundHandler((req, reply) => {
    const error = routeNotFound(req.method, req.url);
    void reply.code(error.status).send(error.toBody());
  });

  const forward = (req: FastifyRequest): ForwardedRequest => ({
    requestId: String(req.id),
    target: req.url,
    body: req.rawBody,
    authorization: req.headers.authorization,
    organization: header(req, 'organization_id') ?? header(req, 'openai-organization'),
  });
  const send = (req: FastifyRequest, reply: FastifyReply, answer: ApiReplyIn) => {
    void reply.code(answer.status).headers(answer.headers).header('x-request-id', req.id).type('application/json').send(answer.body);
  };
  const relay = (rpc: UnaryRpc) => async (req: FastifyRequest, reply: FastifyReply) => {
    send(req, reply, await options.enclave.call(rpc, forward(req)));
  };

  app.get('/v1/attestation', { schema: { querystring: attestationQuerySchema } }, relay('GetAttestation'));
  app.post('/v1/memory', { schema: { body: addMemorySchema } }, relay('AddMemory'));
  app.get('/v1/memory', { schema: { querystring: queryMemorySchema } }, relay('QueryMemory'));
  app.get('/v1/memory/:id', { schema: { params: memoryIdParamsSchema, querystring: tenantQuerySchema } }, relay('GetMemory'));
  app.delete('/v1/memory/:id', { schema: { params: memoryIdParamsSchema, querystring: tenantQuerySchema } }, relay('DeleteMemory'));
  app.post('/v1/chat/completions', { schema: { body: chatCompletionSchema, headers: chatHeadersSchema } },
    chatRoute({ enclave: options.enclave, forward, send, timeoutMs: options.chatTimeoutMs ?? 300_000 }));

  app.get('/healthz', async (_req, reply) => {
    const health = await options.enclave.health();
    void reply.send({ status: 'ok', enclave: { ready: health.ready, tee_name: health.tee_name, embedding_model: health.embedding_model } });
  });

  return app;
}

function header(req: FastifyRequest, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' && value !== '' ? value : undefined;
}
