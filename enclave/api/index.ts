import { ApiError, internal } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import type { ChatService } from '../chat/chat-service.js';
import type { MemoryService } from '../memory/memory-service.js';
import { attestationRoute, type AttestationDeps } from './attestation-route.js';
import { chatRoutes } from './chat-route.js';
import { memoryRoutes } from './memory-routes.js';
import { errorReply } from './request.js';
import { wrapStream, type StreamHandler } from './stream.js';

/** A unary RPC; `signal` is aborted when the caller cancels the call. */
export type Handler = (request: ApiRequest, signal?: AbortSignal) => Promise<ApiReply>;
export type { StreamHandler };

export interface EnclaveApi {
  GetAttestation: Handler;
  AddMemory: Handler;
  QueryMemory: Handler;
  GetMemory: Handler;
  DeleteMemory: Handler;
  ChatCompletion: Handler;
  ChatCompletionStream: StreamHandler;
}

export interface ApiDeps {
  memory: MemoryService;
  attestation: AttestationDeps;
  chat: ChatService;
  log: Logger;
}

/**
 * The enclave's API, one handler per RPC. Every handler answers with a complete reply:
 * refusals become OpenAI-shaped error bodies here, and anything unexpected becomes a
 * bare 500 (details go to the log, never to the caller).
 */
export function createApi(deps: ApiDeps): EnclaveApi {
  const memory = memoryRoutes(deps.memory);
  const chat = chatRoutes(deps.chat);
  const wrap = (rpc: string, handler: Handler): Handler => async (request, signal) => {
    const started = performance.now();
    const log = deps.log.child({ reqId: request.request_id, rpc });
    let reply: ApiReply;
    try {
      reply = await handler(request, signal);
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
    ChatCompletion: wrap('ChatCompletion', chat.complete),
    ChatCompletionStream: wrapStream('ChatCompletionStream', chat.stream, deps.log),
  };
}
