import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { startS3StandIn, type S3StandIn } from '../helpers/s3-stand-in.js';
import { freePort, startService, type RunningService } from '../helpers/service.js';
import { repoRoot } from '../../common/paths.js';

/**
 * The whole service with its host store on S3 (BLOB_STORE_S3, against the loopback stand-in of
 * S3's API): memories stored and found, every blob in the bucket and none in DATA_DIR, and all
 * of it back after the host store and the enclave are killed with SIGKILL and started again.
 */
let standIn: S3StandIn;
let svc: RunningService;
const api = (method: string, path: string, body?: unknown) => request(svc.baseUrl, method, path, body);

beforeAll(async () => {
  standIn = await startS3StandIn('agent-bucket');
  svc = await startService({
    BLOB_STORE_S3: 's3://agent-bucket/service-a', S3_ENDPOINT: standIn.endpoint,
    AWS_ACCESS_KEY_ID: 'stand-in', AWS_SECRET_ACCESS_KEY: 'stand-in', AWS_REGION: 'eu-west-1',
  });
});
afterAll(async () => {
  await svc?.stop();
  await standIn?.close();
});

describe('the host store on S3', () => {
  it('keeps every blob in the bucket, under the prefix, and none in DATA_DIR', async () => {
    const added = await api('POST', '/v1/memory', { tenant_id: 's3', content: 'The spare key is under the blue flowerpot' });
    expect(added.status, added.text).toBe(200);
    const keys = standIn.keys();
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.every((k) => k.startsWith('service-a/'))).toBe(true);
    // The sealed log and the wrapped sealing key are among them; the contents are the enclave's, sealed.
    expect(keys.some((k) => /service-a\/.*log/.test(k))).toBe(true);
    for (const key of keys) expect(standIn.bytes(key)!.toString('latin1')).not.toContain('flowerpot');
    expect(readdirSync(svc.dataDir).filter((name) => !name.endsWith('.log'))).toEqual([]);
  });

  it('has it all back after SIGKILL of the host store and the enclave', async () => {
    await svc.killEnclave('SIGKILL');
    await svc.killHostStore('SIGKILL');
    await svc.startHostStore();
    await svc.startEnclave();
    const found = await api('GET', `/v1/memory?tenant_id=s3&query=${encodeURIComponent('where is the spare key?')}&top_k=1`);
    expect(found.status, found.text).toBe(200);
    expect(found.body.data[0].content).toBe('The spare key is under the blue flowerpot');
  });

  it('a host store given something else than s3://<bucket>/<prefix> stops at start, naming the setting', async () => {
    let out = '';
    let status = 0;
    try {
      execFileSync(process.execPath, [join(repoRoot, 'dist', 'host-store', 'main.js')], { env: { ...process.env, BLOB_STORE_S3: 'https://bucket/x', HOST_STORE_ADDR: `127.0.0.1:${await freePort()}` }, encoding: 'utf8', stdio: 'pipe' });
    } catch (error) {
      const e = error as { status: number; stderr: string; stdout: string };
      status = e.status;
      out = e.stderr + e.stdout;
    }
    expect(status).toBe(2);
    expect(out).toContain('BLOB_STORE_S3 "https://bucket/x" is not s3://<bucket>/<prefix>');
  });
});
