import type { ChatMessage } from '../../common/chat-schema.js';
import { ApiError, badRequest } from '../../common/errors.js';
import { limits } from '../../common/limits.js';
import type { ChangeAuthor, ChangePlan, MemoryService } from '../memory/memory-service.js';
import type { MemoryMeter } from '../memory/meter.js';
import type { Metadata, MemoryRecord, MemoryScope, ReplayMark } from '../memory/types.js';
import { AnswerUpstream } from './answer-upstream.js';
import { readDecisions, readFacts, type Decision } from './extraction-answer.js';
import { conversationText, decisionMessages, EXTRACTION_PROMPT_VERSION, factsMessages } from './extraction-prompt.js';
import { OFFLINE_MODEL } from './offline-responder.js';
import type { UpstreamModel } from './upstream.js';

/** Held memories shown to the model for each fact, and for all the facts of one conversation. */
const NEAREST_PER_FACT = 5;
const MAX_SHOWN = 20;

export interface ExtractionRequest {
  tenant: string;
  scope: MemoryScope;
  messages: readonly ChatMessage[];
  /** The model that extracts (default: the first of MODEL_NAMES). */
  model?: string;
  /** Given to what is added, and to what is updated. */
  occurred_at?: string;
  /** Given to what is added. */
  metadata?: Metadata;
}

export interface ExtractionCall {
  keyTenants?: ReadonlySet<string>;
  keyId?: string;
  /** The sealed request's replay id, logged with the change. */
  replay?: ReplayMark;
  meter?: MemoryMeter;
  signal: AbortSignal;
  /** Where a chat answer's requests went: extraction after it must go to the same key (answer-upstream.ts). */
  upstream?: AnswerUpstream;
}

/** What was done about one fact: `memory` the memory's text now (for DELETE: as it was), `previous_memory` before an UPDATE. */
export interface ExtractedResult {
  event: 'ADD' | 'UPDATE' | 'DELETE' | 'NONE';
  id: string;
  memory: string;
  previous_memory?: string;
}

export interface ExtractionOutcome {
  results: ExtractedResult[];
  /** Where the conversation and the memories shown went (signed with the answer). */
  upstream: AnswerUpstream;
  /** The held memories whose content reached the model. */
  shownIds: string[];
  model: string;
}

/**
 * Extraction (POST /v1/memory with `infer: true`): the model lists the facts of a
 * conversation worth keeping (first pass), is shown the tenant's memories nearest to them in
 * the request's scope, and decides for each fact ADD, UPDATE, DELETE or NONE (second pass),
 * which is applied as one change. Both prompts are fixed (extraction-prompt.ts); both answers
 * are validated before anything changes (extraction-answer.ts). The second pass is the
 * model's, as Mem0's, because whether a fact contradicts a memory is a matter of meaning that
 * no rule on vectors decides; with MEMORY_UPSTREAM=never no memory may reach the model, so
 * the facts are then added by the near-duplicate rule alone (ADD or UPDATE, never DELETE).
 */
export class Extractor {
  constructor(
    private readonly memory: MemoryService,
    private readonly upstream: UpstreamModel | undefined,
    private readonly settings: { memoryUpstream?: 'send' | 'never'; defaultModel?: string },
  ) {}

  async extract(request: ExtractionRequest, call: ExtractionCall): Promise<ExtractionOutcome> {
    const model = request.model ?? this.settings.defaultModel;
    if (!this.upstream || model === OFFLINE_MODEL) {
      throw badRequest(`${OFFLINE_MODEL}, the built-in offline responder, cannot extract memories (infer: true): set MODEL_BASE_URL to a chat model, or add the memories yourself`, 'infer', 'unsupported_by_offline_model');
    }
    if (!model) throw badRequest('name the model that extracts memories ("model"), or set MODEL_NAMES', 'model', 'missing_required_parameter');
    const withheld = this.settings.memoryUpstream === 'never';
    const upstream = call.upstream ?? AnswerUpstream.remote(this.upstream.origin, withheld);
    const done = (results: ExtractedResult[], shownIds: string[] = []): ExtractionOutcome => ({ results, upstream, shownIds, model });
    const conversation = conversationText(request.messages);
    if (conversation === '') return { ...done([]), upstream: AnswerUpstream.local() };
    const ask = async (messages: ChatMessage[]) => {
      const answer = await this.upstream!.complete({ model, messages, temperature: 0, response_format: { type: 'json_object' } }, call.signal, upstream.seen);
      return answer.choices[0].message.content;
    };
    const facts = readFacts(await ask(factsMessages(conversation)));
    if (facts.length === 0) return done([]);
    const author: ChangeAuthor = { keyId: call.keyId, replay: call.replay, extracted: true };
    if (withheld) return done(await this.byRule(request, facts, call, author));

    const shown = await this.nearest(request, facts, call.meter);
    const byShortId = new Map(shown.map((record, i) => [String(i), record]));
    const decisions = readDecisions(await ask(decisionMessages(shown.map((m, i) => ({ id: String(i), text: m.content })), facts)), new Set(byShortId.keys()), facts.length);
    return done(await this.apply(request, decisions, byShortId, call, author), shown.map((m) => m.id));
  }

  /** The tenant's memories in scope nearest to each fact, each once, at most MAX_SHOWN. */
  private async nearest(request: ExtractionRequest, facts: readonly string[], meter?: MemoryMeter): Promise<MemoryRecord[]> {
    const shown = new Map<string, MemoryRecord>();
    for (const fact of facts) {
      const found = await this.memory.query({ tenant_id: request.tenant, query: fact.slice(0, limits.maxQueryChars), top_k: NEAREST_PER_FACT, ...request.scope }, undefined, meter);
      for (const { record } of found) if (shown.size < MAX_SHOWN) shown.set(record.id, record);
    }
    return [...shown.values()];
  }

  /** The decisions as one change; an UPDATE to the text a memory holds already is a NONE. */
  private async apply(request: ExtractionRequest, decisions: readonly Decision[], byShortId: ReadonlyMap<string, MemoryRecord>, call: ExtractionCall, author: ChangeAuthor): Promise<ExtractedResult[]> {
    const plan: ChangePlan = { adds: [], updates: [], deletes: [] };
    const { occurred_at } = request;
    for (const decision of decisions) {
      if (decision.event === 'ADD') plan.adds.push({ content: decision.text, metadata: request.metadata, ...request.scope, ...(occurred_at ? { occurred_at } : {}) });
      else if (decision.event === 'UPDATE' && decision.text !== byShortId.get(decision.id)!.content) plan.updates.push({ id: byShortId.get(decision.id)!.id, content: decision.text, occurred_at });
      else if (decision.event === 'DELETE') plan.deletes.push(byShortId.get(decision.id)!.id);
    }
    const outcome = await this.memory.change(request.tenant, plan, call.keyTenants, call.meter, author);
    if (!outcome) throw new ApiError('memory_changed', 'a memory the model decided to update or delete was deleted meanwhile; nothing was changed: try again');
    const added = outcome.added.values();
    const updated = outcome.updated.values();
    const deleted = outcome.deleted.values();
    return decisions.map((decision): ExtractedResult => {
      if (decision.event === 'ADD') {
        const record = added.next().value!;
        return { event: 'ADD', id: record.id, memory: record.content };
      }
      const held = byShortId.get(decision.id)!;
      if (decision.event === 'UPDATE' && decision.text !== held.content) {
        const { record, previous } = updated.next().value!;
        return { event: 'UPDATE', id: record.id, memory: record.content, previous_memory: previous.content };
      }
      if (decision.event === 'DELETE') {
        const record = deleted.next().value!;
        return { event: 'DELETE', id: record.id, memory: record.content };
      }
      return { event: 'NONE', id: held.id, memory: held.content };
    });
  }

  /** MEMORY_UPSTREAM=never: each fact added, or updating its near-duplicate (memory/near-duplicates.ts). */
  private async byRule(request: ExtractionRequest, facts: readonly string[], call: ExtractionCall, author: ChangeAuthor): Promise<ExtractedResult[]> {
    const inputs = facts.map((content) => ({ tenant_id: request.tenant, content, metadata: request.metadata, ...request.scope, dedupe: true, ...(request.occurred_at ? { occurred_at: request.occurred_at } : {}) }));
    const outcomes = await this.memory.remember(inputs, call.keyTenants, call.meter, author);
    return outcomes.map((o) => (o.event === 'ADD'
      ? { event: 'ADD', id: o.record.id, memory: o.record.content }
      : { event: 'UPDATE', id: o.record.id, memory: o.record.content, previous_memory: o.previous.content }));
  }
}

export { EXTRACTION_PROMPT_VERSION };
