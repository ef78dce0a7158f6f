import type { ApiReply } from '../../common/proto.js';
import { sseEvent, sseHeaders } from '../../common/sse.js';
import type { ChatService } from '../chat/chat-service.js';
import { chatRequestOf, newMessageId, newResponseId, outputMessage, responseFromCompletion, responseObject, type ResponseParts } from '../chat/responses.js';
import type { Usage } from '../chat/types.js';
import { memoryIdsHeader } from './chat-route.js';
import { chatCaller } from './chat-tenant.js';
import { jsonReply } from './request.js';
import type { CallContext, RouteCall } from './resolve-call.js';
import { sendFinal, sendReply, type ChunkSink } from './stream.js';
import type { MemoryMeter } from '../memory/meter.js';

/** POST /v1/responses: text in, text out, with the tenant's memories as chat gets them. */
export function responsesRoutes(chat: ChatService) {
  const complete = async ({ request, caller: from, body }: RouteCall<'CreateResponse'>, signal: AbortSignal, meter?: MemoryMeter): Promise<ApiReply> => {
    const caller = chatCaller(request, from);
    const { tenant } = caller;
    const { completion, memoryIds, upstream } = await chat.complete(chatRequestOf(body, false), { ...caller, signal, meter });
    const response = responseFromCompletion(
      { id: newResponseId(), messageId: newMessageId(), createdAt: Math.floor(Date.now() / 1000), instructions: body.instructions ?? null },
      completion,
    );
    return jsonReply(200, response, memoryIdsHeader(memoryIds, tenant, upstream));
  };

  return {
    complete: (call: RouteCall<'CreateResponse'>, context?: CallContext) => complete(call, context?.signal ?? new AbortController().signal, context?.meter),

    /** The Responses event stream: created, the message's text as deltas, completed. */
    async stream(call: RouteCall<'CreateResponse'>, sink: ChunkSink, signal: AbortSignal, context?: CallContext): Promise<void> {
      const meter = context?.meter;
      if (call.body.stream !== true) return sendReply(sink, await complete(call, signal, meter));
      const caller = chatCaller(call.request, call.caller);
      const { tenant } = caller;
      const chatRequest = chatRequestOf(call.body, true);
      let sequence = 0;
      const send = (event: Record<string, unknown>) => sink.data(sseEvent({ ...event, sequence_number: sequence++ }));
      let parts: ResponseParts | undefined;
      let text = '';
      let usage: Usage | null = null;
      let finish: string | null = null;
      await chat.stream(chatRequest, { ...caller, signal, meter }, {
        start: (ids, upstream) => {
          parts = {
            id: newResponseId(), messageId: newMessageId(), model: call.body.model, createdAt: Math.floor(Date.now() / 1000),
            instructions: call.body.instructions ?? null, memoryIds: ids,
          };
          sink.head({ status: 200, body: Buffer.alloc(0), headers: { ...sseHeaders, ...memoryIdsHeader(ids, tenant, upstream) } });
        },
        chunk: async (chunk) => {
          const p = parts!;
          if (sequence === 0) {
            p.model = chunk.model || p.model;
            await send({ type: 'response.created', response: responseObject(p, { status: 'in_progress' }) });
            await send({ type: 'response.in_progress', response: responseObject(p, { status: 'in_progress' }) });
            await send({ type: 'response.output_item.added', output_index: 0, item: outputMessage(p.messageId, '', 'in_progress') });
            await send({ type: 'response.content_part.added', item_id: p.messageId, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
          }
          if (chunk.usage) usage = chunk.usage;
          const choice = chunk.choices.find((c) => c.index === 0);
          if (choice?.finish_reason) finish = choice.finish_reason;
          const delta = choice?.delta.content;
          if (typeof delta === 'string' && delta !== '') {
            text += delta;
            await send({ type: 'response.output_text.delta', item_id: p.messageId, output_index: 0, content_index: 0, delta, logprobs: [] });
          }
        },
      });
      const p = parts!;
      await send({ type: 'response.output_text.done', item_id: p.messageId, output_index: 0, content_index: 0, text, logprobs: [] });
      await send({ type: 'response.content_part.done', item_id: p.messageId, output_index: 0, content_index: 0, part: { type: 'output_text', text, annotations: [] } });
      await send({ type: 'response.output_item.done', output_index: 0, item: outputMessage(p.messageId, text, 'completed') });
      const status = finish === 'length' ? 'incomplete' : 'completed';
      // The last event carries the stream's signature (enclave/api/stream.ts).
      await sendFinal(sink, { type: status === 'completed' ? 'response.completed' : 'response.incomplete', response: responseObject(p, { status, text, usage }), sequence_number: sequence++ });
    },
  };
}
