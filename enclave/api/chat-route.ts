import type { ChatCompletionInput } from '../../common/chat-schema.js';
import { badRequest } from '../../common/errors.js';
import type { ApiReply } from '../../common/proto.js';
import { sseDone, sseEvent, sseHeaders } from '../../common/sse.js';
import type { AnswerUpstream } from '../chat/answer-upstream.js';
import type { ChatService } from '../chat/chat-service.js';
import { normalizeChat } from '../chat/messages.js';
import { scopeOf } from '../memory/memory-scope.js';
import type { ScopeInput } from '../../common/schemas.js';
import { TENANT_HEADER } from '../../protocol/response-signature.js';
import { chatCaller, type ChatCaller } from './chat-tenant.js';
import { jsonReply } from './request.js';
import type { CallContext, RouteCall } from './resolve-call.js';
import type { MemoryMeter } from '../memory/meter.js';
import { sendReply, type ChunkSink } from './stream.js';

/**
 * The memories the model was given, for audit (the body's `memory_ids` says the same), and
 * the tenant whose memories they are and where the prompt went, both signed with the answer.
 */
export const memoryIdsHeader = (ids: readonly string[], tenant: string | undefined, upstream: AnswerUpstream) =>
  ({ 'x-memory-ids': ids.join(','), [TENANT_HEADER]: tenant ?? '', ...upstream.headers() });

/** POST /v1/chat/completions on the enclave's side: the inputs are validated; decide the tenant, answer. */
export function chatRoutes(chat: ChatService) {
  const parse = ({ request, caller, body }: RouteCall<'ChatCompletion'>) => {
    // The scopes are the service's, not the model's: taken out of what the model is sent.
    const { user_id, agent_id, run_id, ...rest } = body;
    const requested = scopeOf({ user_id, agent_id, run_id } as ScopeInput);
    return { input: normalizeChat(rest as ChatCompletionInput), caller: chatCaller(request, caller, requested) };
  };

  const answer = async (input: ChatCompletionInput, caller: ChatCaller, signal: AbortSignal, meter?: MemoryMeter): Promise<ApiReply> => {
    const { completion, memoryIds, upstream } = await chat.complete(input, { ...caller, signal, meter });
    return jsonReply(200, completion, memoryIdsHeader(memoryIds, caller.tenant, upstream));
  };

  return {
    /** A non-streamed completion. */
    async complete(call: RouteCall<'ChatCompletion'>, context?: CallContext): Promise<ApiReply> {
      const { input, caller } = parse(call);
      if (input.stream === true) throw badRequest('a streamed request (stream: true) must be sent on the streaming call (sealed: POST /v1/sealed/stream)', 'stream', 'stream_mismatch');
      return answer(input, caller, context?.signal ?? new AbortController().signal, context?.meter);
    },

    /** `stream: true`: Server-Sent Events of chat.completion.chunk objects, ending with [DONE]. */
    async stream(call: RouteCall<'ChatCompletion'>, sink: ChunkSink, signal: AbortSignal, context?: CallContext): Promise<void> {
      const { input, caller } = parse(call);
      const meter = context?.meter;
      if (input.stream !== true) return sendReply(sink, await answer(input, caller, signal, meter));
      await chat.stream(input, { ...caller, signal, meter }, {
        start: (ids, upstream) => sink.head({ status: 200, body: Buffer.alloc(0), headers: { ...sseHeaders, ...memoryIdsHeader(ids, caller.tenant, upstream) } }),
        chunk: (chunk) => sink.data(sseEvent(chunk)),
      });
      await sink.data(sseDone());
    },
  };
}
