import type { ChatCompletionInput, ChatMessage, ToolCall, ToolDefinition } from '../../common/chat-schema.js';
import { ApiError } from '../../common/errors.js';
import { limits } from '../../common/limits.js';
import { addMemorySchema, type AddMemoryInput } from '../../common/schemas.js';
import { validator } from '../../common/validation.js';
import type { MemoryMeter } from '../memory/meter.js';
import type { MemoryService } from '../memory/memory-service.js';
import type { MemoryScope, ReplayMark } from '../memory/types.js';
import { occurredAt } from '../memory/memory-time.js';

/**
 * The memory tools the enclave offers the model: `search_memory` and `add_memory`. Their
 * calls are executed here, against the request's tenant only, and never reach the client.
 */

export const SEARCH_MEMORY = 'search_memory';
export const ADD_MEMORY = 'add_memory';
const MAX_SEARCH_TOP_K = 20;

export const memoryTools: readonly ToolDefinition[] = [
  {
    type: 'function',
    function: {
      name: SEARCH_MEMORY,
      description: 'Search the memories saved for this user by meaning. Use it when facts from earlier conversations '
        + '(names, preferences, plans, details) could help answer.',
      parameters: {
        type: 'object',
        properties: {
          query: { type: 'string', description: 'What to look for, in words.' },
          top_k: { type: 'integer', minimum: 1, maximum: MAX_SEARCH_TOP_K, description: 'How many memories to return.' },
        },
        required: ['query'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: ADD_MEMORY,
      description: 'Save a fact about this user for later conversations. Use it when the user shares something worth remembering.',
      parameters: {
        type: 'object',
        properties: { content: { type: 'string', description: 'The fact, as a short self-contained sentence.' } },
        required: ['content'],
      },
    },
  },
];

/**
 * Which memory tools to offer for a request: none without a tenant, when the client said
 * `tool_choice: "none"`, or with several choices (n > 1, whose tool calls cannot be
 * followed one conversation at a time); never one whose name a client tool already uses,
 * since the client's tool is then the one the model means.
 */
export function memoryToolsToOffer(request: ChatCompletionInput, enabled: boolean): Set<string> {
  if (!enabled || request.tool_choice === 'none' || (request.n ?? 1) > 1) return new Set();
  const taken = new Set((request.tools ?? []).map((t) => t.function?.name));
  return new Set(memoryTools.map((t) => t.function!.name).filter((name) => !taken.has(name)));
}

/** The request with the offered memory tools added after the client's own. */
export function withMemoryTools(request: ChatCompletionInput, offered: ReadonlySet<string>): ChatCompletionInput {
  if (offered.size === 0) return request;
  return { ...request, tools: [...(request.tools ?? []), ...memoryTools.filter((t) => offered.has(t.function!.name))] };
}

const validAdd = validator<AddMemoryInput>(addMemorySchema, 'body');

export interface ToolScope {
  tenant: string;
  /** The memory scopes searched and saved in (none: tenant-wide). */
  scope?: MemoryScope;
  /** Every tenant of the caller's key: add_memory counts against the key's share (MAX_MEMORIES_PER_KEY). */
  keyTenants?: ReadonlySet<string>;
  /** The caller's key id: the author add_memory records in the memory's history. */
  keyId?: string;
  /** The sealed request's replay id, logged with what add_memory saves. */
  replay?: ReplayMark;
  /** Told of the tools' searches and saves (none for a sealed call). */
  meter?: MemoryMeter;
  /** search_memory's top_k when the model gives none. */
  topK: number;
  /** Memories add_memory may save in one request (CHAT_TOOL_MAX_ADDS). */
  maxAdds: number;
}

/** Runs memory tool calls for one tenant and remembers which memories it showed the model. */
export class MemoryToolRunner {
  /** Ids of every memory a search returned to the model, in order, without repeats. */
  readonly shownIds: string[] = [];

  private added = 0;

  constructor(
    private readonly memory: MemoryService,
    private readonly scope: ToolScope,
  ) {}

  /** The tool message answering `call`. A bad call gets an error the model can read and correct. */
  async run(call: ToolCall): Promise<ChatMessage> {
    let result: unknown;
    try {
      const args = parseArguments(call.function.arguments);
      result = call.function.name === SEARCH_MEMORY ? await this.search(args) : await this.add(args);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      result = { error: err.message };
    }
    return { role: 'tool', tool_call_id: call.id, content: JSON.stringify(result) };
  }

  private async search(args: Record<string, unknown>) {
    const { query } = args;
    if (typeof query !== 'string' || !/\S/.test(query)) throw toolError('search_memory needs a non-empty string "query"');
    const topK = args.top_k === undefined ? Math.max(1, this.scope.topK) : args.top_k;
    if (!Number.isInteger(topK) || (topK as number) < 1 || (topK as number) > MAX_SEARCH_TOP_K) {
      throw toolError(`"top_k" must be an integer from 1 to ${MAX_SEARCH_TOP_K}`);
    }
    const found = await this.memory.query({ tenant_id: this.scope.tenant, query: query.slice(0, limits.maxQueryChars), top_k: topK as number, ...this.scope.scope }, undefined, this.scope.meter);
    for (const { record } of found) if (!this.shownIds.includes(record.id)) this.shownIds.push(record.id);
    return {
      memories: found.map(({ record, score }) => ({
        id: record.id,
        content: record.content,
        date: occurredAt(record).slice(0, 10),
        score: Math.round(score * 1000) / 1000,
      })),
    };
  }

  private async add(args: Record<string, unknown>) {
    // A model answer is untrusted input: however many calls it makes, one request saves at most maxAdds.
    if (this.added >= this.scope.maxAdds) {
      throw toolError(`this conversation already saved ${this.added} memories, the most one request may (CHAT_TOOL_MAX_ADDS); save no more`);
    }
    const input = validAdd({ content: args.content, tenant_id: this.scope.tenant, metadata: { source: ADD_MEMORY }, dedupe: true, ...this.scope.scope });
    this.added++;
    const record = await this.memory.add(input, this.scope.keyTenants, this.scope.meter, { keyId: this.scope.keyId, replay: this.scope.replay });
    return { id: record.id, saved: true };
  }
}

export const isMemoryTool = (name: string | undefined, offered: ReadonlySet<string>): boolean =>
  name !== undefined && offered.has(name);

function parseArguments(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text === '' ? '{}' : text);
  } catch {
    throw toolError('the arguments are not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw toolError('the arguments must be a JSON object');
  return value as Record<string, unknown>;
}

const toolError = (message: string) => new ApiError('invalid_value', message);
