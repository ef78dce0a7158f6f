import { randomBytes } from 'node:crypto';
import type { AddMemoryInput, QueryMemoryInput } from '../../common/schemas.js';
import type { Embedder } from '../embedding/embedder.js';
import { Bm25Index } from '../retrieval/bm25.js';
import { FUSION_DEPTH, fuse, type Candidate, type RetrievalMode } from '../retrieval/hybrid.js';
import { TenantIndex } from './tenant-index.js';

export type Metadata = Record<string, string | number | boolean | null>;

export interface MemoryRecord {
  id: string;
  object: 'memory';
  tenant_id: string;
  content: string;
  metadata: Metadata;
  /** Unix seconds, as OpenAI's `created` fields. */
  created_at: number;
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

interface Tenant {
  index: TenantIndex;
  /** BM25 over the same memories, kept in step with `index` and `records`. */
  lexical: Bm25Index;
  records: Map<string, MemoryRecord>;
}

export const newMemoryId = (): string => `mem_${randomBytes(16).toString('hex')}`;

/**
 * Every tenant's memories: records plus an HNSW index each. Lookups always go through
 * the tenant first, so one tenant's ids are simply absent from another's view.
 */
export class MemoryService {
  private readonly tenants = new Map<string, Tenant>();

  constructor(private readonly embedder: Embedder) {}

  get tenantCount(): number {
    return this.tenants.size;
  }

  async add(input: AddMemoryInput): Promise<MemoryRecord> {
    const [record] = await this.addMany([input]);
    return record;
  }

  /**
   * Stores memories (of any tenants) in order, embedding all of them in one embedder call.
   * The embedding is the step that can fail, and it comes first: then nothing is stored.
   */
  async addMany(inputs: readonly AddMemoryInput[]): Promise<MemoryRecord[]> {
    const vectors = await this.embedder.embed(inputs.map((input) => input.content));
    const createdAt = Math.floor(Date.now() / 1000);
    return inputs.map((input, i) => {
      const record: MemoryRecord = {
        id: newMemoryId(),
        object: 'memory',
        tenant_id: input.tenant_id,
        content: input.content,
        metadata: { ...(input.metadata ?? {}) },
        created_at: createdAt,
      };
      const tenant = this.tenant(input.tenant_id, true)!;
      tenant.records.set(record.id, record);
      tenant.index.add(record.id, vectors[i]);
      tenant.lexical.add(record.id, record.content);
      return record;
    });
  }

  /**
   * The tenant's top_k memories for the query: the vector (HNSW) ranking and the lexical
   * (BM25) ranking fused by a convex combination of their scores (see retrieval/hybrid.ts).
   * `mode` picks another ranking, which only the evaluation uses.
   */
  async query(input: QueryMemoryInput, mode: RetrievalMode = 'hybrid'): Promise<ScoredMemory[]> {
    const tenant = this.tenant(input.tenant_id, false);
    if (!tenant || tenant.records.size === 0) return [];
    const [vector] = await this.embedder.embed([input.query]);
    const depth = Math.max(input.top_k, FUSION_DEPTH);
    const candidates = new Map<string, Candidate>();
    tenant.index.search(vector, depth).forEach(({ id, score }, i) => candidates.set(id, { id, vector: score, vectorRank: i + 1 }));
    tenant.lexical.search(input.query, depth).forEach(({ id, score }, i) => {
      const candidate = candidates.get(id);
      if (candidate) Object.assign(candidate, { lexical: score, lexicalRank: i + 1 });
      // A memory only the lexical ranking found still gets its cosine similarity.
      else candidates.set(id, { id, vector: tenant.index.similarity(id, vector) ?? 0, lexical: score, lexicalRank: i + 1 });
    });
    return fuse([...candidates.values()], mode)
      .slice(0, input.top_k)
      .map((hit) => ({
        record: tenant.records.get(hit.id)!,
        score: hit.fused,
        scores: { vector: hit.vector, lexical: hit.lexical ?? null, fused: hit.fused },
      }));
  }

  get(tenantId: string, id: string): MemoryRecord | undefined {
    return this.tenant(tenantId, false)?.records.get(id);
  }

  delete(tenantId: string, id: string): boolean {
    const tenant = this.tenant(tenantId, false);
    if (!tenant?.records.delete(id)) return false;
    tenant.index.remove(id);
    tenant.lexical.remove(id);
    return true;
  }

  private tenant(id: string, create: boolean): Tenant | undefined {
    let tenant = this.tenants.get(id);
    if (!tenant && create) {
      tenant = { index: new TenantIndex(this.embedder.dimension), lexical: new Bm25Index(), records: new Map() };
      this.tenants.set(id, tenant);
    }
    return tenant;
  }
}
