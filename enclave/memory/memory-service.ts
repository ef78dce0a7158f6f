import { randomBytes } from 'node:crypto';
import { ApiError } from '../../common/errors.js';
import type { AddMemoryInput, QueryMemoryInput } from '../../common/schemas.js';
import type { Embedder } from '../embedding/embedder.js';
import type { MemoryEvent, MemoryJournal } from './journal.js';
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
  /** Kept for snapshots, so recovery needs no re-embedding. */
  vectors: Map<string, Float32Array>;
}

export interface MemoryServiceOptions {
  /** Most memories one tenant may hold; adding beyond it is refused with 409. */
  maxMemoriesPerTenant?: number;
}

export const DEFAULT_MAX_MEMORIES_PER_TENANT = 100_000;

export const newMemoryId = (): string => `mem_${randomBytes(16).toString('hex')}`;

/**
 * Every tenant's memories: records plus an HNSW index each. Lookups always go through
 * the tenant first, so one tenant's ids are simply absent from another's view.
 */
export class MemoryService {
  private readonly tenants = new Map<string, Tenant>();
  /** Adds admitted but not yet committed, per tenant: they count towards the maximum. */
  private readonly pending = new Map<string, number>();
  private readonly maxPerTenant: number;
  private journal?: MemoryJournal;

  constructor(private readonly embedder: Embedder, options: MemoryServiceOptions = {}) {
    this.maxPerTenant = options.maxMemoriesPerTenant ?? DEFAULT_MAX_MEMORIES_PER_TENANT;
  }

  /** From now on every change is made durable in `journal` before it is applied and acknowledged. */
  useJournal(journal: MemoryJournal): void {
    this.journal = journal;
  }

  get tenantCount(): number {
    return this.tenants.size;
  }

  async add(input: AddMemoryInput): Promise<MemoryRecord> {
    const tenantId = input.tenant_id;
    const pending = this.pending.get(tenantId) ?? 0;
    if ((this.tenants.get(tenantId)?.records.size ?? 0) + pending >= this.maxPerTenant) {
      throw new ApiError(409, 'invalid_request_error',
        `tenant '${tenantId}' holds the maximum of ${this.maxPerTenant} memories; delete some before adding more`,
        'memory_limit_reached', 'tenant_id');
    }
    this.pending.set(tenantId, pending + 1);
    try {
      const [vector] = await this.embedder.embed([input.content]);
      // Checked before the change is logged: a logged change must always apply on replay.
      if (vector.length !== this.embedder.dimension) throw new Error(`embedder returned ${vector.length} dimensions, not ${this.embedder.dimension}`);
      const record: MemoryRecord = {
        id: newMemoryId(),
        object: 'memory',
        tenant_id: tenantId,
        content: input.content,
        metadata: { ...(input.metadata ?? {}) },
        created_at: Math.floor(Date.now() / 1000),
      };
      await this.commit({ type: 'add', record, vector });
      return record;
    } finally {
      const left = this.pending.get(tenantId)! - 1;
      if (left === 0) this.pending.delete(tenantId);
      else this.pending.set(tenantId, left);
    }
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

  async delete(tenantId: string, id: string): Promise<boolean> {
    if (!this.get(tenantId, id)) return false;
    await this.commit({ type: 'delete', tenant_id: tenantId, id });
    return true;
  }

  /**
   * Applies a change: after the journal made it durable, or when replaying stored changes
   * at start. Idempotent, since a snapshot and the log after it may repeat a change.
   */
  apply(event: MemoryEvent): void {
    if (event.type === 'add') {
      const { record, vector } = event;
      const tenant = this.tenant(record.tenant_id, true)!;
      if (tenant.records.has(record.id)) return;
      tenant.index.add(record.id, vector);
      tenant.records.set(record.id, record);
      tenant.vectors.set(record.id, vector);
    } else {
      const tenant = this.tenant(event.tenant_id, false);
      if (!tenant?.records.delete(event.id)) return;
      tenant.vectors.delete(event.id);
      tenant.index.remove(event.id);
    }
  }

  /** Every memory with its vector: what a snapshot holds. */
  *entries(): Generator<{ record: MemoryRecord; vector: Float32Array }> {
    for (const tenant of this.tenants.values()) {
      for (const [id, record] of tenant.records) yield { record, vector: tenant.vectors.get(id)! };
    }
  }

  private async commit(event: MemoryEvent): Promise<void> {
    const apply = () => this.apply(event);
    if (this.journal) await this.journal.commit(event, apply);
    else apply();
  }

  private tenant(id: string, create: boolean): Tenant | undefined {
    let tenant = this.tenants.get(id);
    if (!tenant && create) {
      tenant = { index: new TenantIndex(this.embedder.dimension), records: new Map(), vectors: new Map() };
      this.tenants.set(id, tenant);
    }
    return tenant;
  }
}
