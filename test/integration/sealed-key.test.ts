import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type TeeClient } from '../../sdk/client.js';
import { sealRequest } from '../../protocol/sealed.js';
import { expectError, request } from '../helpers/http.js';
import { issueKey } from '../helpers/processes.js';
import { startRecordingRelay, type RecordingRelay } from '../helpers/relay.js';
import { startService, type RunningService } from '../helpers/service.js';

/**
 * Hold, round two, finding 1: the sdk sent `Authorization: Bearer <key>` on the outer
 * POST /v1/sealed, so a relay in front of the proxy recorded the key, and replaying it on a
 * plain call read the tenant's sealed-only memories. A sealed call now carries its key only
 * inside the envelope, and the enclave refuses an envelope that comes with one outside.
 */
let dir: string;
let svc: RunningService;
let front: RecordingRelay;
let tee: TeeClient;
let key: string;
const TENANT = 'sealed-only-tenant';

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-sealed-key-'));
  const keys = join(dir, 'keys.json');
  key = issueKey(keys, [TENANT]);
  svc = await startService({ API_KEYS_FILE: keys });
  front = await startRecordingRelay(svc.baseUrl.replace('http://', ''));
  tee = await connect({
    insecureSkipPcrPinning: true,
    baseUrl: `http://${front.address}`,
    rootPem: readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8'),
    authorization: `Bearer ${key}`,
  });
});
afterAll(async () => {
  await front?.close();
  await svc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('a sealed call never shows the host its API key', () => {
  it('the sdk sends no Authorization outside the envelope: a recording relay sees neither the header nor the key', async () => {
    const stored = await tee.sealedCall<{ id: string }>('POST', '/v1/memory', { tenant_id: TENANT, content: 'The vault code is 4417.' });
    expect(stored.status).toBe(200);
    const found = await tee.sealedCall<{ data: { id: string }[] }>('GET', `/v1/memory?tenant_id=${TENANT}&query=vault&top_k=1`);
    expect(found.body.data[0].id).toBe(stored.body.id);

    const sent = front.upstream();
    expect(sent.includes(Buffer.from('POST /v1/sealed HTTP/1.1'))).toBe(true);
    expect(sent.includes(Buffer.from(key))).toBe(false);
    expect(/\r\nauthorization:/i.test(sent.toString('latin1'))).toBe(false);
  });

  it('the enclave refuses an envelope sent with an outer Authorization, and the call inside is not served', async () => {
    const before = await tee.sealedCall<{ data: unknown[] }>('GET', `/v1/memory?tenant_id=${TENANT}&limit=100`);
    const { envelope } = sealRequest(tee.attestation.boxPublicKey, {
      method: 'POST',
      target: '/v1/memory',
      body: new Uint8Array(Buffer.from(JSON.stringify({ tenant_id: TENANT, content: 'should not be stored' }))),
      authorization: `Bearer ${key}`,
      timestamp: Date.now(),
    });
    const refused = await request(svc.baseUrl, 'POST', '/v1/sealed', envelope, { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' });
    expectError(refused, 400, 'sealed_outer_authorization');
    expect(refused.text).not.toContain(key);
    const after = await tee.sealedCall<{ data: unknown[] }>('GET', `/v1/memory?tenant_id=${TENANT}&limit=100`);
    expect(after.body.data.length).toBe(before.body.data.length);
  });
});
