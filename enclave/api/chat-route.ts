import type { ChatCompletionInput } from '../../common/chat-schema.js';
import { ApiError, badRequest } from '../../common/errors.js';
import type { ApiReply } from '../../common/proto.js';
import { sseDone, sseEvent, sseHeaders } from '../../common/sse.js';
import type { AnswerUpstream } from '../chat/answer-upstream.js';
import type { ChatService } from '../chat/chat-service.js';
import { EXTRACTION_PROMPT_VERSION, type Extractor } from '../chat/extraction.js';
import type { Completion } from '../chat/types.js';
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
export function chatRoutes(chat: ChatService, extractor?: Extractor) {
  const parse = ({ request, caller, body }: RouteCall<'ChatCompletion'>) => {
    // The scopes and memory_infer are the service's, not the model's: taken out of what the model is sent.
    const { user_id, agent_id, run_id, memory_infer, ...rest } = body;
    const requested = scopeOf({ user_id, agent_id, run_id } as ScopeInput);
    const input = normalizeChat(rest as ChatCompletionInput);
    const infer = memory_infer === true;
    if (infer && input.stream === true) throw badRequest('memory_infer works with answers that do not stream (stream: false)', 'memory_infer', 'invalid_value');
    return { input, infer, caller: chatCaller(request, caller, requested) };
  };

  /**
   * memory_infer: true, after the answer: the conversation and the answer go through
   * extraction (chat/extraction.ts) with the chat's model, tenant and scope. The answer
   * stands whatever extraction does: its outcome, or its error, is `memory_extraction`.
   */
  const extractAfter = async (input: ChatCompletionInput, completion: Completion, caller: ChatCaller, call: { signal: AbortSignal; meter?: MemoryMeter; upstream: AnswerUpstream }) => {
    if (!caller.tenant) return { memory_extraction: { error: badRequest('memory_infer needs a tenant (organization_id or OpenAI-Organization header)', 'memory_infer', 'invalid_value').toBody().error }, shown: [] };
    const said = completion.choices[0]?.message;
    const messages = said ? [...input.messages, { role: 'assistant' as const, content: said.content ?? '' }] : input.messages;
    try {
      const outcome = await extractor!.extract({ tenant: caller.tenant, scope: caller.scope, messages, model: input.model }, { keyTenants: caller.keyTenants, keyId: caller.keyId, replay: caller.replay, ...call });
      return { memory_extraction: { object: 'list', data: outcome.results, prompt_version: EXTRACTION_PROMPT_VERSION, memory_ids: outcome.shownIds }, shown: outcome.shownIds };
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      return { memory_extraction: { error: err.toBody().error }, shown: [] };
    }
  };

  const answer = async ({ input, infer, caller }: ReturnType<typeof parse>, signal: AbortSignal, meter?: MemoryMeter): Promise<ApiReply> => {
    // Refused before answering: without a model there is nothing to extract with.
    if (infer && (!extractor || !chat.upstreamFor(input))) throw badRequest('memory_infer needs a chat model (MODEL_BASE_URL); the built-in offline responder cannot extract memories', 'memory_infer', 'unsupported_by_offline_model');
    const { completion, memoryIds, upstream } = await chat.complete(input, { ...caller, signal, meter });
    if (!infer) return jsonReply(200, completion, memoryIdsHeader(memoryIds, caller.tenant, upstream));
    const { memory_extraction, shown } = await extractAfter(input, completion, caller, { signal, meter, upstream });
    const ids = [...new Set([...memoryIds, ...shown])];
    return jsonReply(200, { ...completion, memory_ids: ids, memory_extraction }, memoryIdsHeader(ids, caller.tenant, upstream));
  };

  return {
    /** A non-streamed completion. */
    async complete(call: RouteCall<'ChatCompletion'>, context?: CallContext): Promise<ApiReply> {
      const parsed = parse(call);
      if (parsed.input.stream === true) throw badRequest('a streamed request (stream: true) must be sent on the streaming call (sealed: POST /v1/sealed/stream)', 'stream', 'stream_mismatch');
      return answer(parsed, context?.signal ?? new AbortController().signal, context?.meter);
    },

    /** `stream: true`: Server-Sent Events of chat.completion.chunk objects, ending with [DONE]. */
    async stream(call: RouteCall<'ChatCompletion'>, sink: ChunkSink, signal: AbortSignal, context?: CallContext): Promise<void> {
      const parsed = parse(call);
      const { input, caller } = parsed;
      const meter = context?.meter;
      if (input.stream !== true) return sendReply(sink, await answer(parsed, signal, meter));
      await chat.stream(input, { ...caller, signal, meter }, {
        start: (ids, upstream) => sink.head({ status: 200, body: Buffer.alloc(0), headers: { ...sseHeaders, ...memoryIdsHeader(ids, caller.tenant, upstream) } }),
        chunk: (chunk) => sink.data(sseEvent(chunk)),
      });
      await sink.data(sseDone());
    },
  };
}
