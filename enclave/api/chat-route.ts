import type { ChatCompletionInput } from '../../common/chat-schema.js';
import { ApiError, badRequest } from '../../common/errors.js';
import type { ApiReply } from '../../common/proto.js';
import { sseComment, sseDone, sseEvent, sseHeaders } from '../../common/sse.js';
import type { AnswerUpstream } from '../chat/answer-upstream.js';
import type { ChatService } from '../chat/chat-service.js';
import { EXTRACTION_PROMPT_VERSION, type Extractor } from '../chat/extraction.js';
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
    // Asked for by the request, or the key's default (a request's false turns it off).
    const asked = memory_infer === true;
    const infer = typeof memory_infer === 'boolean' ? memory_infer : caller.memoryInfer === true;
    return { input, infer, asked, caller: chatCaller(request, caller, requested) };
  };

  const offline = () => badRequest('memory_infer needs a chat model (MODEL_BASE_URL); the built-in offline responder cannot extract memories', 'memory_infer', 'unsupported_by_offline_model');

  /**
   * Whether extraction can run for this chat: with a model. Without one, a request that asked
   * for it is refused before answering; a key's default gives its error as the outcome instead.
   */
  const canExtract = ({ input, infer, asked }: ReturnType<typeof parse>): boolean => {
    if (!infer) return false;
    const can = extractor !== undefined && Boolean(chat.upstreamFor(input));
    if (!can && asked) throw offline();
    return can;
  };

  /**
   * Memory extraction after the answer: the conversation and the answer (`said`) go through
   * extraction (chat/extraction.ts) with the chat's model, tenant and scope. The answer stands
   * whatever extraction does: its outcome, or its error, is `memory_extraction`.
   */
  const extractAfter = async (input: ChatCompletionInput, said: string | undefined, caller: ChatCaller, call: { signal: AbortSignal; meter?: MemoryMeter; upstream: AnswerUpstream }) => {
    if (!caller.tenant) return { memory_extraction: { error: badRequest('memory_infer needs a tenant (organization_id or OpenAI-Organization header)', 'memory_infer', 'invalid_value').toBody().error }, shown: [] };
    const messages = said === undefined ? input.messages : [...input.messages, { role: 'assistant' as const, content: said }];
    try {
      const outcome = await extractor!.extract({ tenant: caller.tenant, scope: caller.scope, messages, model: input.model }, { keyTenants: caller.keyTenants, keyId: caller.keyId, replay: caller.replay, ...call });
      return { memory_extraction: { object: 'list', data: outcome.results, prompt_version: EXTRACTION_PROMPT_VERSION, memory_ids: outcome.shownIds }, shown: outcome.shownIds };
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      return { memory_extraction: { error: err.toBody().error }, shown: [] };
    }
  };

  const answer = async (parsed: ReturnType<typeof parse>, signal: AbortSignal, meter?: MemoryMeter): Promise<ApiReply> => {
    const { input, infer, caller } = parsed;
    // Refused before answering when asked for: without a model there is nothing to extract with.
    const extract = canExtract(parsed);
    const { completion, memoryIds, upstream } = await chat.complete(input, { ...caller, signal, meter });
    if (!infer) return jsonReply(200, completion, memoryIdsHeader(memoryIds, caller.tenant, upstream));
    const said = completion.choices[0]?.message;
    const { memory_extraction, shown } = extract
      ? await extractAfter(input, said ? said.content ?? '' : undefined, caller, { signal, meter, upstream })
      : { memory_extraction: { error: offline().toBody().error }, shown: [] };
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

    /**
     * `stream: true`: Server-Sent Events of chat.completion.chunk objects, ending with [DONE].
     * With memory_infer, extraction runs once the answer's last chunk is sent, and its outcome
     * comes before [DONE] as a comment line (`: memory_extraction {…}`), which OpenAI's clients skip.
     */
    async stream(call: RouteCall<'ChatCompletion'>, sink: ChunkSink, signal: AbortSignal, context?: CallContext): Promise<void> {
      const parsed = parse(call);
      const { input, caller, infer } = parsed;
      const meter = context?.meter;
      if (input.stream !== true) return sendReply(sink, await answer(parsed, signal, meter));
      const extract = canExtract(parsed);
      let said = '';
      let used: AnswerUpstream | undefined;
      await chat.stream(input, { ...caller, signal, meter }, {
        start: (ids, upstream) => {
          used = upstream;
          return sink.head({ status: 200, body: Buffer.alloc(0), headers: { ...sseHeaders, ...memoryIdsHeader(ids, caller.tenant, upstream) } });
        },
        chunk: (chunk) => {
          said += chunk.choices.find((c) => c.index === 0)?.delta.content ?? '';
          return sink.data(sseEvent(chunk));
        },
      });
      if (infer && !signal.aborted) {
        const { memory_extraction } = extract && used
          ? await extractAfter(input, said, caller, { signal, meter, upstream: used })
          : { memory_extraction: { error: offline().toBody().error } };
        await sink.data(sseComment('memory_extraction', memory_extraction));
      }
      await sink.data(sseDone());
    },
  };
}
