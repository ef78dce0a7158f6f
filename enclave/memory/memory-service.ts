import { randomBytes } from 'node:crypto';
import type { AddMemoryInput, QueryMemoryInput } from '../../common/schemas.js';
import type { Embedder } from '../embedding/embedder.js';
import type { EmbeddingModelId } from './model-change.js';
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
  score: number;
}

interface Tenant {
  index: TenantIndex;
  records: Map<string, MemoryRecord>;
}

export const newMemoryId = (): string => `mem_${randomBytes(16).toString('hex')}`;

/** Texts per embed call when re-embedding: large enough for full ONNX runs, small enough for steady progress. */
const REEMBED_BATCH = 64;

/**
 * Every tenant's memories: records plus an HNSW index each. Lookups always go through
 * the tenant first, so one tenant's ids are simply absent from another's view.
 */
export class MemoryService {
  private readonly tenants = new Map<string, Tenant>();
  private reembedding = false;

  constructor(private embedder: Embedder) {}

  get tenantCount(): number {
    return this.tenants.size;
  }

  /** The model every indexed vector comes from; record it with the memories (model-change.ts). */
  get embeddingModel(): EmbeddingModelId {
    return { id: this.embedder.id, dimension: this.embedder.dimension, sha256: this.embedder.sha256 };
  }

  /**
   * Re-embeds every stored memory from its content with `embedder`, in batches, and from then
   * on uses it for adds and queries, so vectors of two models never share an index. New
   * indexes are built aside and swapped in at the end: if embedding fails, nothing changes.
   * Meant for start-up, before requests are served (an add racing it would index with the
   * old model).
   */
  async reembed(embedder: Embedder, onProgress?: (done: number, total: number) => void): Promise<void> {
    if (this.reembedding) throw new Error('re-embedding is already running');
    this.reembedding = true;
    try {
      const total = [...this.tenants.values()].reduce((sum, tenant) => sum + tenant.records.size, 0);
      const rebuilt = new Map<Tenant, TenantIndex>();
      let done = 0;
      onProgress?.(done, total);
      for (const tenant of this.tenants.values()) {
        const records = [...tenant.records.values()];
        const index = new TenantIndex(embedder.dimension, Math.max(256, records.length));
        for (let start = 0; start < records.length; start += REEMBED_BATCH) {
          const batch = records.slice(start, start + REEMBED_BATCH);
          const vectors = await embedder.embed(batch.map((record) => record.content));
          batch.forEach((record, i) => index.add(record.id, vectors[i]));
          done += batch.length;
          onProgress?.(done, total);
        }
        rebuilt.set(tenant, index);
      }
      for (const [tenant, index] of rebuilt) tenant.index = index;
      this.embedder = embedder;
    } finally {
      this.reembedding = false;
    }
  }

  async add(input: AddMemoryInput): Promise<MemoryRecord> {
    const [vector] = await this.embedder.embed([input.content]);
    const record: MemoryRecord = {
      id: newMemoryId(),
      object: 'memory',
      tenant_id: input.tenant_id,
      content: input.content,
      metadata: { ...(input.metadata ?? {}) },
      created_at: Math.floor(Date.now() / 1000),
    };
    const tenant = this.tenant(input.tenant_id, true)!;
    tenant.records.set(record.id, record);
    tenant.index.add(record.id, vector);
    return record;
  }

  async query(input: QueryMemoryInput): Promise<ScoredMemory[]> {
    const tenant = this.tenant(input.tenant_id, false);
    if (!tenant || tenant.records.size === 0) return [];
    const [vector] = await this.embedder.embed([input.query]);
    return tenant.index
      .search(vector, input.top_k)
      .map(({ id, score }) => ({ record: tenant.records.get(id)!, score }));
  }

  get(tenantId: string, id: string): MemoryRecord | undefined {
    return this.tenant(tenantId, false)?.records.get(id);
  }

  delete(tenantId: string, id: string): boolean {
    const tenant = this.tenant(tenantId, false);
    if (!tenant?.records.delete(id)) return false;
    tenant.index.remove(id);
    return true;
  }

  private tenant(id: string, create: boolean): Tenant | undefined {
    let tenant = this.tenants.get(id);
    if (!tenant && create) {
      tenant = { index: new TenantIndex(this.embedder.dimension), records: new Map() };
      this.tenants.set(id, tenant);
    }
    return tenant;
  }
}
