import type { FastifyRequest } from 'fastify';

/**
 * Where a request must go when the service is several enclaves (proxy/cluster-router.ts):
 * - its tenant's shard's owner, the tenant read where the enclave reads it: the query's
 *   `tenant_id`, the body's `tenant_id` (a batch: its first memory's), or for chat the
 *   organization header;
 * - shard 0's owner, for what acts for no tenant (models, embeddings, attestation): the
 *   enclave signs those answers with shard 0's state head, which only its owner has fresh;
 * - any enclave, for a sealed call: only the enclave can read its tenant, and it answers
 *   `x-tee-shard-miss` when another holds it.
 * With one enclave this is never read.
 */
export type Destination = { tenant: string } | { shard: 0 } | { anyEnclave: true };

export function destinationOf(req: FastifyRequest, sealed: boolean): Destination {
  if (sealed) return { anyEnclave: true };
  const tenant = queryTenant(req.url) ?? bodyTenant(req.body) ?? organization(req);
  return tenant === undefined ? { shard: 0 } : { tenant };
}

function queryTenant(url: string): string | undefined {
  const q = url.indexOf('?');
  if (q < 0) return undefined;
  return new URLSearchParams(url.slice(q + 1)).get('tenant_id') || undefined;
}

function bodyTenant(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const { tenant_id: tenant, memories } = body as { tenant_id?: unknown; memories?: unknown };
  if (typeof tenant === 'string' && tenant !== '') return tenant;
  const first: unknown = Array.isArray(memories) ? memories[0] : undefined;
  return typeof first === 'object' && first !== null ? bodyTenant(first) : undefined;
}

function organization(req: FastifyRequest): string | undefined {
  for (const name of ['organization_id', 'openai-organization']) {
    const value = req.headers[name];
    if (typeof value === 'string' && value !== '') return value;
  }
  return undefined;
}
