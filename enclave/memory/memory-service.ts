import { randomBytes } from 'node:crypto';
import type { AddMemoryInput, QueryMemoryInput } from '../../common/schemas.js';
import type { Embedder } from '../embedding/embedder.js';
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
