/**
 * What the memory layers share: the service, its journal, model changes and storage all
 * speak of these, so they live apart from each of them (and none imports another for a type).
 */

export type Metadata = Record<string, string | number | boolean | null>;

/** Who a memory is about inside its tenant (as Mem0's user, agent and run); each is optional. */
export const SCOPE_FIELDS = ['user_id', 'agent_id', 'run_id'] as const;
export type ScopeField = (typeof SCOPE_FIELDS)[number];
export type MemoryScope = Partial<Record<ScopeField, string>>;

export interface MemoryRecord {
  id: string;
  object: 'memory';
  tenant_id: string;
  content: string;
  metadata: Metadata;
  /** Unix seconds, as OpenAI's `created` fields. */
  created_at: number;
  /** Unix seconds of the last change by PATCH; absent until then. */
  updated_at?: number;
  /**
   * When what it records happened, RFC 3339 in UTC (`Date.toISOString`); when it was stored
   * unless the client said. A record stored before it existed has none: its created_at stands in (memory-time.ts).
   */
  occurred_at?: string;
  /** The scopes it was stored in; a record stored before scopes existed has none (read as tenant-wide). */
  user_id?: string;
  agent_id?: string;
  run_id?: string;
}

export interface ScoredMemory {
  record: MemoryRecord;
  /** The ranking score: results are in decreasing order of it (= scores.fused). */
  score: number;
  /**
   * What it is made of: `vector` the cosine similarity of query and memory (0 when either has
   * no vector), `lexical` the BM25 score (null when no query term matched), `fused` their
   * combination (see retrieval/hybrid.ts).
   */
  scores: { vector: number; lexical: number | null; fused: number };
}

/**
 * Who made a change and when (memory/history.ts): logged with the change, absent in changes
 * logged before history was kept.
 */
export interface ChangeInfo {
  /** Unix seconds. */
  at: number;
  /** The Caller's keyId (enclave/auth/caller.ts); null without one (open mode with no token). */
  key_id: string | null;
  /** Whether the change came from extraction (memories the model drew from a conversation). */
  extracted: boolean;
}

/**
 * The sealed request a change came from (enclave/api/sealed-route.ts): its replay id and when
 * its window ends (its timestamp + the window, epoch ms). Logged with the change, so that an
 * enclave that opens the shard later refuses the same envelope (storage/replay-ids.ts).
 */
export interface ReplayMark {
  id: string;
  expires_at: number;
}

/** One version of a memory, oldest first in its history; a deleted memory's keep no content (`record` absent). */
export interface MemoryVersion extends ChangeInfo {
  event: 'add' | 'update' | 'delete';
  /** The memory as this change left it; absent once the memory is deleted. */
  record?: MemoryRecord;
}

/** A change to the memory store: what the durable log records and replays. */
export type MemoryEvent =
  /** `past`: the versions before this one (snapshots only: memory/history.ts). */
  | { type: 'add'; record: MemoryRecord; vector: Float32Array; change?: ChangeInfo; past?: MemoryVersion[] }
  /** A new version of a stored memory (same id and tenant), replacing it where it stands. */
  | { type: 'update'; record: MemoryRecord; vector: Float32Array; change?: ChangeInfo }
  | { type: 'delete'; tenant_id: string; id: string; change?: ChangeInfo }
  /** A deleted memory's history, without content (snapshots, and an import's "deleted" lines). */
  | { type: 'tombstone'; tenant_id: string; id: string; versions: MemoryVersion[] };

type Unembedded<E> = E extends { vector: Float32Array } ? Omit<E, 'vector'> & { vector: null } : never;

/**
 * A change as restored at start. An add whose vector came from another embedding model is
 * restored without it (`vector: null`): the record is kept and is re-embedded before use.
 */
export type RestoredEvent = MemoryEvent | Unembedded<Extract<MemoryEvent, { type: 'add' | 'update' }>>;

/** The embedding model vectors come from: the same only if all three agree (model-change.ts). */
export interface EmbeddingModelId {
  id: string;
  dimension: number;
  /** Embedder.sha256: the hash attestation measures. */
  sha256: string;
}
