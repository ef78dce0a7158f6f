import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../../sdk/index.js';
import { request } from '../helpers/http.js';
import { agentKeys, issueKey } from '../helpers/processes.js';
import { testBucket, type TestBucket } from '../helpers/s3-bucket.js';
import { freePort, startService, type RunningService } from '../helpers/service.js';
import { repoRoot } from '../../common/paths.js';

/**
 * The whole service with its host store on S3 (BLOB_STORE_S3, against the loopback stand-in of
 * S3's API, or a real S3 server: test/helpers/s3-bucket.ts): memories stored and found, every blob in the bucket and in DATA_DIR only a copy of
 * the simulated root the host's tools pin, all of it back after the host store and the enclave
 * are killed with SIGKILL and started again, and the operator's signed API keys put in the
 * bucket by hand.
 */
let bucket: TestBucket;
/** Where this run's service keeps its blobs: s3://<bucket>/<A>. */
let A: string;
let svc: RunningService;
const api = (method: string, path: string, body?: unknown) => request(svc.baseUrl, method, path, body);

beforeAll(async () => {
  bucket = await testBucket('agent-bucket');
  A = `${bucket.prefix}service-a/`;
  svc = await startService({ BLOB_STORE_S3: `s3://${bucket.name}/${A}`, ...bucket.env });
});
afterAll(async () => {
  await svc?.stop();
  await bucket?.close();
});

describe('the host store on S3', () => {
  it('keeps every blob in the bucket, under the prefix, and in DATA_DIR only the simulated root the host\'s tools pin', async () => {
    const added = await api('POST', '/v1/memory', { tenant_id: 's3', content: 'The spare key is under the blue flowerpot' });
    expect(added.status, added.text).toBe(200);
    const keys = await bucket.keys(bucket.prefix);
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.every((k) => k.startsWith(A))).toBe(true);
    // The sealed log and the wrapped sealing key are among them; the contents are the enclave's, sealed.
    expect(keys.some((k) => k.startsWith(A) && k.includes('log'))).toBe(true);
    for (const key of keys) expect((await bucket.bytes(key))!.toString('latin1')).not.toContain('flowerpot');
    expect(readdirSync(svc.dataDir).filter((name) => !name.endsWith('.log'))).toEqual(['simulated-root.pem']);
    const root = readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8');
    // A copy of the blob the enclave keeps in the bucket (as a one-part blob), which verifies its attestation.
    const copied = keys.find((k) => k.startsWith(`${A}.parts/simulated-root.pem/`));
    expect((await bucket.bytes(copied!))!.toString()).toBe(root);
    const tee = await connect({ baseUrl: svc.baseUrl, rootPem: root, insecureSkipPcrPinning: true });
    const found = await tee.sealedCall<{ data: Array<{ content: string }> }>('GET', '/v1/memory?tenant_id=s3&query=spare%20key&top_k=1');
    expect(found.body.data[0].content).toContain('flowerpot');
  });

  it('a new host store on the bucket (an empty DATA_DIR) copies the root at start', async () => {
    await svc.killHostStore('SIGKILL');
    rmSync(join(svc.dataDir, 'simulated-root.pem'));
    await svc.startHostStore();
    expect(readdirSync(svc.dataDir)).toContain('simulated-root.pem');
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

  it('takes the operator\'s signed API keys put in the bucket by hand (aws s3 cp)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 's3-keys-'));
    const pair = generateKeyPairSync('ed25519');
    writeFileSync(join(dir, 'operator.pem'), pair.privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const key = issueKey(join(dir, 'keys.json'), ['alpha']);
    const signed = agentKeys(['sign', '--file', join(dir, 'keys.json'), '--key', join(dir, 'operator.pem'), '--out', join(dir, 'api-keys.signed.json')]);
    expect(signed.status, signed.stderr).toBe(0);
    const objects = bucket.objects();
    await objects.put(`${bucket.prefix}service-k/api-keys.signed.json`, readFileSync(join(dir, 'api-keys.signed.json')));
    objects.close();
    const keyed = await startService({
      BLOB_STORE_S3: `s3://${bucket.name}/${bucket.prefix}service-k/`, ...bucket.env,
      API_KEYS_BLOB: 'api-keys.signed.json', OPERATOR_PUBKEY: pair.publicKey.export({ type: 'spki', format: 'der' }).subarray(-32).toString('base64'),
    });
    try {
      const as = (bearer: string) => request(keyed.baseUrl, 'POST', '/v1/memory', { tenant_id: 'alpha', content: 'kept with a key' }, { authorization: `Bearer ${bearer}` });
      expect((await as(key)).status).toBe(200);
      expect((await as('agk_not-a-key-of-the-operator-0000000000000')).status).toBe(401);
    } finally {
      await keyed.stop();
      rmSync(dir, { recursive: true, force: true });
    }
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
