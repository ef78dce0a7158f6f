import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { destinationOf } from '../../proxy/destination.js';

const req = (url: string, body?: unknown, headers: Record<string, string> = {}) => ({ url, body, headers }) as unknown as FastifyRequest;

describe('where the proxy sends a request in a cluster', () => {
  it('to the tenant named where the enclave reads it: the query, the body, a batch\'s first memory, the chat\'s organization', () => {
    expect(destinationOf(req('/v1/memory?query=dogs&tenant_id=t1&top_k=3'), false)).toEqual({ tenant: 't1' });
    expect(destinationOf(req('/v1/memory/mem_1?tenant_id=a%20b'), false)).toEqual({ tenant: 'a b' });
    expect(destinationOf(req('/v1/memory', { tenant_id: 't2', content: 'x' }), false)).toEqual({ tenant: 't2' });
    expect(destinationOf(req('/v1/memory', { memories: [{ tenant_id: 't3', content: 'x' }, { tenant_id: 't4', content: 'y' }] }), false)).toEqual({ tenant: 't3' });
    expect(destinationOf(req('/v1/memory/import', { tenant_id: 't5', memories: [{}] }), false)).toEqual({ tenant: 't5' });
    expect(destinationOf(req('/v1/chat/completions', { messages: [] }, { organization_id: 'org1' }), false)).toEqual({ tenant: 'org1' });
    expect(destinationOf(req('/v1/responses', { input: 'x' }, { 'openai-organization': 'org2' }), false)).toEqual({ tenant: 'org2' });
  });

  it('to shard 0\'s owner when it acts for no tenant, and to any enclave when sealed', () => {
    expect(destinationOf(req('/v1/models'), false)).toEqual({ shard: 0 });
    expect(destinationOf(req('/v1/embeddings', { input: 'x' }), false)).toEqual({ shard: 0 });
    expect(destinationOf(req('/v1/chat/completions', { messages: [] }), false)).toEqual({ shard: 0 });
    expect(destinationOf(req('/v1/memory?tenant_id='), false)).toEqual({ shard: 0 });
    expect(destinationOf(req('/v1/sealed', { nonce: 'n', ciphertext: 'c', tenant_id: 'not read' }), true)).toEqual({ anyEnclave: true });
  });
});
