import type { ChatCompletionInput } from '../../common/chat-schema.js';
import type { MemoryMeter } from '../memory/meter.js';
import type { MemoryService } from '../memory/memory-service.js';
import type { MemoryScope, ReplayMark } from '../memory/types.js';
import { AnswerUpstream } from './answer-upstream.js';
import { retrieveMemories, withMemories } from './memory-context.js';
import { MemoryToolRunner, memoryToolsToOffer } from './memory-tools.js';
import { OFFLINE_MODEL, offlineChunks, offlineCompletion, offlineRefusal } from './offline-responder.js';
import { badRequest } from '../../common/errors.js';
import { streamWithMemoryTools } from './stream-loop.js';
import { completeWithMemoryTools, type MemoryToolLoop } from './tool-loop.js';
import type { Completion, CompletionChunk } from './types.js';
import type { UpstreamModel } from './upstream.js';

export interface ChatSettings {
  /** Memories added to each request (0: none). */
  memoryTopK: number;
  /** Rounds in which the model may call the memory tools (0: tools not offered). */
  toolRounds: number;
  /** Memories the model may save with add_memory in one request. */
  toolMaxAdds: number;
  /** never: no memory (nor memory tool) ever goes to the upstream model, only to the offline responder. */
  memoryUpstream?: 'send' | 'never';
}

export interface ChatCall {
  /** The tenant whose memories the request may use; undefined: no memories at all. */
  tenant: string | undefined;
  /** Every tenant of the caller's API key (undefined in open mode): a saved memory counts against the key's share. */
  keyTenants?: ReadonlySet<string>;
  /** The memory scopes it reads and saves in (none: tenant-wide). */
  scope?: MemoryScope;
  /** The caller's key id, recorded as the author of memories the model saves. */
  keyId?: string;
  /** The tenant key its sealed request carried (MemoryService.admitTenant). */
  tenantKey?: Uint8Array;
  /** Its sealed request's replay id, logged with the memories the model saves. */
  replay?: ReplayMark;
  /** Told of the memory searches and saves the answer makes (none for a sealed call). */
  meter?: MemoryMeter;
  /** Aborted when the client goes away; the model call is aborted with it. */
  signal: AbortSignal;
}

export interface ChatStreamOutput {
  /** The answer is about to start; `memoryIds` are the memories added to the request, `upstream` where it went. */
  start(memoryIds: string[], upstream: AnswerUpstream): void;
  chunk(chunk: CompletionChunk): Promise<void>;
}

/**
 * Chat completions inside the enclave: add the tenant's relevant memories to the
 * conversation, then answer with the upstream model (running the memory tools it calls)
 * or, with no model configured, with the offline responder. Every answer lists in
 * `memory_ids` the memories whose content reached the model, and names where they went
 * (AnswerUpstream, signed). With MEMORY_UPSTREAM=never, memories are not even looked up
 * for the upstream model: it gets the prompt alone, and the answer says memories were withheld.
 */
export class ChatService {
  constructor(
    private readonly memory: MemoryService,
    private readonly upstream: UpstreamModel | undefined,
    private readonly settings: ChatSettings,
  ) {}

  /** Whether the request is answered by the upstream model (not the offline responder). */
  upstreamFor(request: ChatCompletionInput): boolean {
    return this.upstream !== undefined && request.model !== OFFLINE_MODEL;
  }

  async complete(request: ChatCompletionInput, call: ChatCall): Promise<{ completion: Completion; memoryIds: string[]; upstream: AnswerUpstream }> {
    const plan = await this.plan(request, call);
    if (plan.offline) {
      const completion = offlineCompletion({ request, tenant: call.tenant, memories: plan.memories });
      return { completion: { ...completion, memory_ids: plan.injected }, memoryIds: plan.injected, upstream: plan.upstream };
    }
    const upstream = this.upstream!;
    const completion = await completeWithMemoryTools((r) => upstream.complete(r, call.signal, plan.upstream.seen), plan.request, plan.loop);
    const memoryIds = plan.allIds();
    return { completion: { ...completion, memory_ids: memoryIds }, memoryIds, upstream: plan.upstream };
  }

  async stream(request: ChatCompletionInput, call: ChatCall, out: ChatStreamOutput): Promise<void> {
    const plan = await this.plan(request, call);
    if (plan.offline) {
      out.start(plan.injected, plan.upstream);
      const chunks = offlineChunks({ request, tenant: call.tenant, memories: plan.memories });
      chunks[0].memory_ids = plan.injected;
      for (const chunk of chunks) {
        if (chunk.choices.some((c) => c.index === 0 && c.finish_reason)) chunk.memory_ids = plan.injected;
        if (call.signal.aborted) return;
        await out.chunk(chunk);
      }
      return;
    }
    const upstream = this.upstream!;
    await streamWithMemoryTools(
      (r) => upstream.openStream(r, call.signal, plan.upstream.seen),
      plan.request,
      plan.loop,
      { injected: plan.injected, all: plan.allIds },
      { start: () => out.start(plan.injected, plan.upstream), chunk: (c) => out.chunk(c) },
    );
  }

  private async plan(request: ChatCompletionInput, { tenant, keyTenants, meter, scope = {}, keyId, tenantKey, replay }: ChatCall) {
    // Before anything reads or saves a memory: a keyed tenant needs its key, a locked one opens with it.
    if (tenant) this.memory.admitTenant(tenant, tenantKey);
    const offline = !this.upstream || request.model === OFFLINE_MODEL;
    const refusal = offline ? offlineRefusal(request) : undefined;
    if (refusal) throw badRequest(refusal.message, refusal.param, 'unsupported_by_offline_model');
    // The trust decision of MEMORY_UPSTREAM=never: for the upstream model, no memory is looked
    // up and no memory tool is offered, so no memory content can be in what it is sent.
    const withheld = !offline && this.settings.memoryUpstream === 'never';
    const memories = withheld ? [] : await retrieveMemories(this.memory, { tenant, scope }, request.messages, this.settings.memoryTopK, meter);
    const injected = memories.map((m) => m.id);
    const upstream = offline ? AnswerUpstream.local() : AnswerUpstream.remote(this.upstream!.origin, withheld);
    const runner = tenant && !offline && !withheld ? new MemoryToolRunner(this.memory, { tenant, scope, keyTenants, keyId, replay, meter, topK: this.settings.memoryTopK, maxAdds: this.settings.toolMaxAdds }) : undefined;
    const loop: MemoryToolLoop = {
      offered: memoryToolsToOffer(request, runner !== undefined && this.settings.toolRounds > 0),
      runner,
      maxRounds: this.settings.toolRounds,
    };
    return {
      memories,
      injected,
      offline,
      upstream,
      loop,
      request: { ...request, messages: withMemories(request.messages, memories) },
      allIds: () => [...new Set([...injected, ...(runner?.shownIds ?? [])])],
    };
  }
}
