/**
 * Memory tools for MCP clients (Claude Desktop, Cursor, any Model Context Protocol client):
 * five thin adapters, each one memory route of the API for one tenant, sent through the
 * gateway's own sealed, verified call (forward.ts sealedCall). So the host sees of a tool
 * call what it sees of any gateway call: an envelope, and nothing of the content, query,
 * tenant or key. A failed check is a tool error naming it (failures.ts), never a result.
 *
 * The sdk's low-level Server rather than McpServer: the tools' inputs are JSON Schema built
 * from the API's own schemas (common/schemas.ts) and checked with the same ajv, so a tool
 * cannot accept what the service refuses, and no zod copy of them can drift.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { addMemorySchema, listOrQueryMemorySchema, searchMemorySchema } from '../common/schemas.js';
import { validator } from '../common/validation.js';
import type { SealedCallError } from '../sdk/client.js';
import { failureOf } from './failures.js';
import { sealedCall } from './forward.js';
import type { Trust } from './trust.js';

/** Who the tools act for: one tenant, with the caller's key (sealed, never sent outside the envelope). */
export interface McpCaller {
  trust: Trust;
  tenant: string;
  /** `Bearer <key>`, or none for a service without keys. */
  authorization?: string;
  /** Runs after every tool call (the state file keeps the newest head seen). */
  afterCall?: () => void;
}

type Args = Record<string, unknown>;

interface MemoryTool extends Tool {
  /** The API request the tool stands for: its target names the tenant in the query or the body. */
  request(args: Args, tenant: string): { method: string; target: string; body?: Args };
}

const describe = <T extends object>(schema: T, description: string) => ({ ...schema, description });
const content = (what: string) => describe(addMemorySchema.properties.content, what);
const metadata = (what: string) => describe(addMemorySchema.properties.metadata, what);
// Ids are the service's (`mem_<hex>`): letters, digits, _ and - only, so an id cannot change the path it is put in.
const memoryId = { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9_-]+$', description: 'The id of a memory, e.g. mem_d92e7ffe9ea2140d3f75a9c973c3528a, as add_memory, search_memory or list_memories return it' } as const;
const q = (tenant: string) => `tenant_id=${encodeURIComponent(tenant)}`;
const object = (properties: Record<string, object>, required: string[] = []) =>
  ({ type: 'object' as const, properties, required, additionalProperties: false });

export const memoryTools: MemoryTool[] = [
  {
    name: 'add_memory',
    description: 'Remember one fact, preference or note about the user for later conversations. Store one self-contained statement per memory (e.g. "Prefers window seats on long flights"). Returns the stored memory with its id.',
    inputSchema: object({
      content: content('The text to remember, in a sentence that makes sense on its own'),
      metadata: metadata('Optional flat key/value labels (strings, numbers, booleans), e.g. {"source": "chat", "topic": "travel"}'),
    }, ['content']),
    request: (args, tenant) => ({ method: 'POST', target: '/v1/memory', body: { ...args, tenant_id: tenant } }),
  },
  {
    name: 'search_memory',
    description: 'Find the memories most related to a question or topic, by meaning and by exact words (names, numbers, codes). Use it before answering anything that may depend on what the user said earlier. Returns the best matches first, each with its id, content and score.',
    inputSchema: object({
      query: describe(searchMemorySchema.properties.query, 'What to look for, in natural language or keywords'),
      top_k: describe(searchMemorySchema.properties.top_k, 'How many memories to return (default 5, at most 100)'),
    }, ['query']),
    request: (args, tenant) => ({ method: 'POST', target: '/v1/memory/search', body: { ...args, tenant_id: tenant } }),
  },
  {
    name: 'list_memories',
    description: 'List the stored memories, newest first, one page at a time. To get the next page, pass the last id of this page (last_id) as `after`; has_more says whether there is one.',
    inputSchema: object({
      limit: describe(listOrQueryMemorySchema.properties.limit, 'How many memories per page (default 20, at most 100)'),
      after: describe(memoryId, 'The last id of the previous page, to continue after it'),
    }),
    request: (args, tenant) => {
      const page = Object.entries(args).map(([name, value]) => `&${name}=${encodeURIComponent(String(value))}`).join('');
      return { method: 'GET', target: `/v1/memory?${q(tenant)}${page}` };
    },
  },
  {
    name: 'update_memory',
    description: 'Correct or extend a memory: new content (searched by its new meaning at once) and/or new metadata (replaces the old metadata whole). Give at least one of them. Returns the updated memory.',
    inputSchema: object({
      id: memoryId,
      content: content('The new text of the memory'),
      metadata: metadata('The new metadata, replacing the old whole'),
    }, ['id']),
    request: ({ id, ...change }, tenant) => ({ method: 'PATCH', target: `/v1/memory/${String(id)}?${q(tenant)}`, body: change }),
  },
  {
    name: 'delete_memory',
    description: 'Forget one memory for good, by its id (e.g. when the user asks to, or it is no longer true).',
    inputSchema: object({ id: memoryId }, ['id']),
    request: ({ id }, tenant) => ({ method: 'DELETE', target: `/v1/memory/${String(id)}?${q(tenant)}` }),
  },
];

const byName = new Map(memoryTools.map((tool) => [tool.name, { tool, check: validator<Args>(tool.inputSchema, 'body') }]));

const toolError = (text: string): CallToolResult => ({ isError: true, content: [{ type: 'text', text }] });

/** The service's own words for a refusal: `error.message` of its OpenAI-shaped body. */
const refusalText = (status: number | undefined, body: unknown): string => {
  const message = (body as { error?: { message?: unknown } } | undefined)?.error?.message;
  return `the service refused the call (HTTP ${status ?? '?'}): ${typeof message === 'string' ? message : JSON.stringify(body)}`;
};

async function callTool(caller: McpCaller, name: string, args: Args | undefined, signal: AbortSignal): Promise<CallToolResult> {
  const entry = byName.get(name);
  if (!entry) throw new McpError(ErrorCode.InvalidParams, `unknown tool: ${name}`);
  let input: Args;
  try {
    input = entry.check(args ?? {});
  } catch (error) {
    return toolError(`invalid arguments for ${name}: ${(error as Error).message}`);
  }
  const { method, target, body } = entry.tool.request(input, caller.tenant);
  const bytes = body === undefined ? new Uint8Array() : new Uint8Array(Buffer.from(JSON.stringify(body)));
  try {
    const answer = await sealedCall(caller.trust, { method, target, body: bytes, authorization: caller.authorization, signal });
    if (answer.status >= 400) return toolError(refusalText(answer.status, answer.body));
    return { content: [{ type: 'text', text: Buffer.from(answer.raw).toString('utf8') }] };
  } catch (error) {
    // A failed check names itself; what is left is the enclave's signed refusal of the envelope (401, 413, 429…).
    const failure = failureOf(error);
    if (failure) return toolError(failure.message);
    const refused = error as SealedCallError;
    return toolError(refusalText(refused.status, refused.body));
  } finally {
    caller.afterCall?.();
  }
}

/** An MCP server whose tools act for `caller`; connect it to one transport (mcp-transports.ts). */
export function createMcpServer(caller: McpCaller): Server {
  const server = new Server(
    { name: 'agent-gateway', version: '0.1.0' },
    {
      capabilities: { tools: {} },
      instructions: 'Private long-term memory for this user: search_memory before answering what may depend on earlier conversations; add_memory for facts worth keeping. Everything is sealed to an attested enclave; the host that runs the service cannot read it.',
    },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: memoryTools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema })),
  }));
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => callTool(caller, request.params.name, request.params.arguments, extra.signal));
  return server;
}
