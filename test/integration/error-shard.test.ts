/**
 * Which shard an error answer names (enclave/api/signing.ts errorTenant), with four shards and
 * API keys: an error about a tenant the caller's key holds is signed for that tenant, with its
 * shard's head (in a cluster the enclave serving it may not hold shard 0, whose head the client
 * would find older than one it saw: docs/cluster.md); a caller without a key for the tenant it
 * names gets shard 0's, as before, and learns nothing of how busy that tenant's shard is.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardOf } from '../../protocol/shards.js';
import { request } from '../helpers/http.js';
import { issueKey } from '../helpers/processes.js';
import { startService, type RunningService } from '../helpers/service.js';

let svc: RunningService;
let dir: string;
let key: string;
const inShard = (shard: number, prefix: string) => {
  for (let i = 0; ; i++) if (shardOf(`${prefix}-${i}`, 4) === shard) return `${prefix}-${i}`;
};
const mine = inShard(2, 'mine');
const theirs = inShard(3, 'theirs');
const missing = (tenant: string, headers: Record<string, string> = {}) =>
  request(svc.baseUrl, 'GET', `/v1/memory/mem_00000000000000000000000000000000?tenant_id=${tenant}`, undefined, headers);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'error-shard-'));
  key = issueKey(join(dir, 'keys.json'), [mine]);
  svc = await startService({ API_KEYS_FILE: join(dir, 'keys.json'), SHARDS: '4' });
});
afterAll(async () => {
  await svc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('an error answer', () => {
  it('about a tenant the key holds names that tenant and its shard', async () => {
    const res = await missing(mine, { authorization: `Bearer ${key}` });
    expect(res.status, res.text).toBe(404);
    expect(res.headers.get('x-tee-tenant')).toBe(mine);
    expect(res.headers.get('x-tee-shard')).toBe('2/4');
  });

  it('about a tenant the key does not hold, or without a key, names shard 0 and no tenant, as before', async () => {
    const refused = await missing(theirs, { authorization: `Bearer ${key}` });
    expect(refused.status, refused.text).toBe(403);
    expect(refused.headers.get('x-tee-shard')).toBe('0/4');
    expect(refused.headers.get('x-tee-tenant') ?? '').toBe('');
    const keyless = await missing(mine);
    expect(keyless.status).toBe(401);
    expect(keyless.headers.get('x-tee-shard')).toBe('0/4');
  });
});
