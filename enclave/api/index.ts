import { ApiError, internal } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import type { Authorizer } from '../auth/authorizer.js';
import type { EnclaveIdentity, SealedRequestKey } from '../keys.js';
import type { ChatService } from '../chat/chat-service.js';
import type { MemoryService } from '../memory/memory-service.js';
import { attestationRoute, type AttestationDeps } from './attestation-route.js';
import { chatRoutes } from './chat-route.js';
import { memoryRoutes } from './memory-routes.js';
import type { ReplayGuard } from './replay-guard.js';
import { errorReply, requestIdForLog } from './request.js';
import { dispatcher, methodOf, type Handler } from './routes.js';
import { sealedRoute } from './sealed-route.js';
import { signReply, type ResponseSigner } from './signing.js';
import { keyId, type StateHead } from '../../sdk/protocol/response-signature.js';
import { WorkGate, type WorkLimits } from './work-gate.js';

import { wrapStream, type StreamHandler } from './stream.js';

export type { CallContext, Handler } from './routes.js';
export type { StreamHandler };

export interface EnclaveApi {
  GetAttestation: Handler;
  AddMemory: Handler;
  QueryMemory: Handler;
  GetMemory: Handler;
  DeleteMemory: Handler;
  Sealed: Handler;
  ChatCompletion: Handler;
  ChatCompletionStream: StreamHandler;
}

export interface ApiDeps {
  memory: MemoryService;
  attestation: AttestationDeps;
  /** Signs every reply (enclave/api/signing.ts). */
  identity: EnclaveIdentity;
  /** The store's state head, reported in every signed reply. */
  stateHead: () => StateHead;
  sealed: { key: SealedRequestKey; replay: ReplayGuard };
  auth: Authorizer;
  work: WorkLimits;
  chat: ChatService;
  log: Logger;
}

/**
 * The enclave's API, one handler per RPC. Every handler answers with a complete reply:
 * refusals become OpenAI-shaped error bodies here, and anything unexpected becomes a
 * bare 500 (details go to the log, never to the caller). Every call takes a place in one
 * WorkGate (a bounded number at once, each within its time limit), and every reply,
 * errors included, leaves signed by the enclave's key. POST /v1/sealed opens a sealed
 * request and dispatches it to the same handlers, within the sealed call's place.
 */
export function createApi(deps: ApiDeps): EnclaveApi {
  const memory = memoryRoutes(deps.memory, deps.auth);
  const chat = chatRoutes(deps.chat, deps.auth);
  const gate = new WorkGate(deps.work);
  const signer: ResponseSigner = { ...deps.identity, state: deps.stateHead };
  const sign = (method: string, request: ApiRequest, reply: ApiReply) => signReply(signer, method, request, reply);
  // Chat waits on the model, whose own timeouts (MODEL_TIMEOUT_MS) and the caller's
  // deadline bound it, and a sealed call may carry chat; ENCLAVE_TIMEOUT_MS bounds the
  // enclave's own work.
  const timeLimit = (rpc: string) => (rpc.startsWith('ChatCompletion') || rpc === 'Sealed' ? Infinity : undefined);

  /**
   * Turns whatever the handler threw into a reply, logs the outcome, signs the reply. The
   * request inside a sealed call is `quiet`: its route and status would tell the host, which
   * reads the log and chose the request id, what the sealed call did; only the outer call is
   * logged (as Sealed), and an unexpected failure inside without naming the route.
   */
  const settle = (rpc: string, handler: Handler, quiet = false): Handler => async (request, context) => {
    const started = performance.now();
    const log = quiet ? deps.log.child({ rpc: 'Sealed (inner request)' }) : deps.log.child({ reqId: requestIdForLog(request.request_id), rpc });
    let reply: ApiReply;
    try {
      reply = await handler(request, context);
    } catch (err) {
      if (err instanceof ApiError) {
        reply = errorReply(err);
      } else {
        log.error({ err }, 'unexpected error');
        reply = errorReply(internal());
      }
    }
    if (!quiet) log.info({ status: reply.status, ms: Math.round(performance.now() - started) }, 'handled');
    return sign(methodOf(rpc), request, reply);
  };
  // Each API key gets a fair share of the gate (keyId: the key never sits in memory by name).
  const gated = (rpc: string, handler: Handler): Handler => (request, context) =>
    gate.run(() => handler(request, context), context?.deadline, timeLimit(rpc), keyId(request.authorization));

  const handlers: Record<string, Handler> = {
    GetAttestation: attestationRoute(deps.attestation),
    AddMemory: memory.add,
    QueryMemory: memory.query,
    GetMemory: memory.get,
    DeleteMemory: memory.delete,
    ChatCompletion: chat.complete,
  };
  const each = (make: (rpc: string, handler: Handler) => Handler) =>
    Object.fromEntries(Object.entries(handlers).map(([rpc, handler]) => [rpc, make(rpc, handler)]));
  // A sealed call already holds its place in the gate: the request inside it does not take another.
  const dispatch = dispatcher(each((rpc, handler) => settle(rpc, handler, true)), sign);
  const unary = each((rpc, handler) => settle(rpc, gated(rpc, handler))) as Pick<EnclaveApi, 'GetAttestation' | 'AddMemory' | 'QueryMemory' | 'GetMemory' | 'DeleteMemory' | 'ChatCompletion'>;
  return {
    ...unary,
    ChatCompletionStream: wrapStream('ChatCompletionStream', chat.stream, {
      log: deps.log,
      signer,
      gate: (work, deadline, authorization) => gate.run(work, deadline, timeLimit('ChatCompletionStream'), keyId(authorization)),
      maxStreamMs: deps.work.maxStreamMs,
    }),
    Sealed: settle('Sealed', gated('Sealed', sealedRoute({ ...deps.sealed, authenticate: (a) => deps.auth.authenticate(a), dispatch }))),
  };
}
