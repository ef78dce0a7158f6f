import { ApiError, internal } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import type { Authorizer } from '../auth/authorizer.js';
import type { MemoryService } from '../memory/memory-service.js';
import { attestationRoute, type AttestationDeps } from './attestation-route.js';
import { memoryRoutes } from './memory-routes.js';
import { errorReply, requestIdForLog } from './request.js';
import { WorkGate, type WorkLimits } from './work-gate.js';

/** What the transport knows about a call: its deadline (epoch ms), if the caller set one. */
export interface CallContext {
  deadline?: number;
}

export type Handler = (request: ApiRequest, context?: CallContext) => Promise<ApiReply>;

export interface EnclaveApi {
  GetAttestation: Handler;
  AddMemory: Handler;
  QueryMemory: Handler;
  GetMemory: Handler;
  DeleteMemory: Handler;
}

export interface ApiDeps {
  memory: MemoryService;
  attestation: AttestationDeps;
  auth: Authorizer;
  work: WorkLimits;
  log: Logger;
}

/**
 * The enclave's API, one handler per RPC. Every handler answers with a complete reply:
 * refusals become OpenAI-shaped error bodies here, and anything unexpected becomes a
 * bare 500 (details go to the log, never to the caller). Every handler runs through one
 * WorkGate: a bounded number at once, each within its time limit.
 */
export function createApi(deps: ApiDeps): EnclaveApi {
  const memory = memoryRoutes(deps.memory, deps.auth);
  const gate = new WorkGate(deps.work);
  const wrap = (rpc: string, handler: Handler): Handler => async (request, context) => {
    const started = performance.now();
    const log = deps.log.child({ reqId: requestIdForLog(request.request_id), rpc });
    let reply: ApiReply;
    try {
      reply = await gate.run(() => handler(request, context), context?.deadline);
    } catch (err) {
      if (err instanceof ApiError) {
        reply = errorReply(err);
      } else {
        log.error({ err }, 'unexpected error');
        reply = errorReply(internal());
      }
    }
    log.info({ status: reply.status, ms: Math.round(performance.now() - started) }, 'handled');
    return reply;
  };

  return {
    GetAttestation: wrap('GetAttestation', attestationRoute(deps.attestation)),
    AddMemory: wrap('AddMemory', memory.add),
    QueryMemory: wrap('QueryMemory', memory.query),
    GetMemory: wrap('GetMemory', memory.get),
    DeleteMemory: wrap('DeleteMemory', memory.delete),
  };
}
