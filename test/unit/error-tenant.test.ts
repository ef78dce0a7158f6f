/**
 * Which tenant an error answer is signed for (enclave/api/signing.ts errorTenant): the one the
 * client's sdk says it asked for, so that the refusal names that tenant's shard and head, which
 * the client follows, rather than shard 0's, which an enclave of a cluster may not hold.
 */
import { describe, expect, it } from 'vitest';
import type { ApiRequest } from '../../common/proto.js';
import { errorTenant, type SignedState } from '../../enclave/api/signing.js';
import { shardOf } from '../../protocol/shards.js';

const request = (over: Partial<ApiRequest>): ApiRequest =>
  ({ request_id: '', target: '/v1/memory', body: Buffer.alloc(0), authorization: '', organization: '', method: 'GET', known_state: '', ...over });

/** Four shards, of which this enclave serves `served`. */
const state = (served: number[]): SignedState => ({
  count: 4,
  shardOf: (tenant) => shardOf(tenant, 4),
  head: () => ({ seq: 0, hash: '0'.repeat(64) }),
  storeId: () => '0'.repeat(32),
  ancestry: () => 'unknown',
  holds: (shard) => served.includes(shard),
});
const all = state([0, 1, 2, 3]);
/** errorTenant for a caller that may act for every tenant, unless `may` says otherwise. */
const asked = (st: SignedState, req: ApiRequest, may: (tenant: string) => boolean = () => true) => errorTenant(st, req, may);

describe('the tenant an error answer is signed for', () => {
  it('is the one the client asked for: the organization, else the target\'s tenant_id, else the body\'s', () => {
    expect(asked(all, request({ organization: 'org-a', target: '/v1/memory?tenant_id=q-a', body: Buffer.from('{"tenant_id":"b-a"}') }))).toBe('org-a');
    expect(asked(all, request({ target: '/v1/memory/mem_1?tenant_id=q-a', body: Buffer.from('{"tenant_id":"b-a"}') }))).toBe('q-a');
    expect(asked(all, request({ method: 'POST', body: Buffer.from('{"tenant_id":"b-a","content":"x"}') }))).toBe('b-a');
  });

  it('is none (shard 0, as before) when there is none, the body is not JSON, or the id is not a tenant id', () => {
    expect(asked(all, request({}))).toBeUndefined();
    expect(asked(all, request({ method: 'POST', body: Buffer.from('{"tenant_id": ') }))).toBeUndefined();
    expect(asked(all, request({ method: 'POST', body: Buffer.from('{"tenant_id":7}') }))).toBeUndefined();
    expect(asked(all, request({ target: '/v1/memory?tenant_id=a%0Ab' }))).toBeUndefined();
    expect(asked(all, request({ target: `/v1/memory?tenant_id=${'a'.repeat(129)}` }))).toBeUndefined();
    // A sealed envelope: its tenant is inside, and stays there.
    expect(asked(all, request({ method: 'POST', target: '/v1/sealed', body: Buffer.from('{"client_public_key":"x","nonce":"y","ciphertext":"z"}') }))).toBeUndefined();
  });

  it('is none for a caller that may not act for it: one without a key for the tenant learns only shard 0\'s head, as before', () => {
    expect(asked(all, request({ target: '/v1/memory?tenant_id=theirs' }), (tenant) => tenant !== 'theirs')).toBeUndefined();
    expect(asked(all, request({ target: '/v1/memory?tenant_id=mine' }), (tenant) => tenant !== 'theirs')).toBe('mine');
  });

  it('is none when its shard is not served here: the refusal is for the host to re-route, not an answer about the tenant', () => {
    const tenant = (shard: number) => {
      for (let i = 0; ; i++) if (shardOf(`t-${i}`, 4) === shard) return `t-${i}`;
    };
    const onlyOne = state([1]);
    expect(asked(onlyOne, request({ target: `/v1/memory?tenant_id=${tenant(1)}` }))).toBe(tenant(1));
    expect(asked(onlyOne, request({ target: `/v1/memory?tenant_id=${tenant(2)}` }))).toBeUndefined();
  });
});
