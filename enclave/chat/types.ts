import type { ChatMessage, ToolCall } from '../../common/chat-schema.js';

/**
 * The parts of OpenAI's response objects the enclave reads or writes. Everything else a
 * model server returns is kept as it is and passed on to the client.
 */

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  [detail: string]: unknown;
}

export interface CompletionChoice {
  index: number;
  message: ChatMessage & { role: 'assistant'; content: string | null; tool_calls?: ToolCall[] };
  finish_reason: string | null;
  [field: string]: unknown;
}

/** A `chat.completion`, plus the extension field listing the memories the model was given. */
export interface Completion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: CompletionChoice[];
  usage?: Usage;
  memory_ids?: string[];
  [field: string]: unknown;
}

export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
  [field: string]: unknown;
}

export interface ChunkChoice {
  index: number;
  delta: { role?: string; content?: string | null; tool_calls?: ToolCallDelta[]; [field: string]: unknown };
  finish_reason?: string | null;
  [field: string]: unknown;
}

/** A `chat.completion.chunk` of a streamed answer. */
export interface CompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: ChunkChoice[];
  usage?: Usage | null;
  memory_ids?: string[];
  [field: string]: unknown;
}
