import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyAttestation } from '../../sdk/attestation/verify.js';
import { expectError, request } from '../helpers/http.js';
import { startService, type RunningService } from '../helpers/service.js';

let svc: RunningService;

beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.stop();
});

describe('GET /v1/attestation', () => {
  it('returns the four fields, with a document that binds the enclave key and verifies against the simulated root', async () => {
    const nonce = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
    const res = await request(svc.baseUrl, 'GET', `/v1/attestation?nonce=${nonce}`);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['code_attestation', 'operator_pubkey', 'tee_name', 'tee_public_key']);
    expect(res.body.tee_name).toBe('simulated');
    const teeKey = Buffer.from(res.body.tee_public_key, 'base64');
    expect(teeKey).toHaveLength(32);
    expect(Buffer.from(res.body.operator_pubkey, 'base64')).toHaveLength(32);

    const root = readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8');
    const doc = Buffer.from(res.body.code_attestation, 'base64');
    const result = await verifyAttestation(doc, { rootPem: root, nonce: Buffer.from(nonce, 'hex'), publicKey: teeKey });
    expect(result.checks.filter((c) => !c.ok)).toEqual([]);
    expect(result.ok).toBe(true);
    // PCR0 (code), PCR1 (config) and PCR2 (model) are real measurements, not zeros.
    for (const i of [0, 1, 2]) expect(result.document!.pcrs[i]).toMatch(/^(?!0+$)[0-9a-f]{96}$/);
    // user_data binds the operator key.
    expect(JSON.parse(Buffer.from(result.document!.userData!).toString())).toMatchObject({ operator_pubkey: res.body.operator_pubkey });

    const wrongNonce = await verifyAttestation(doc, { rootPem: root, nonce: Buffer.from('00', 'hex') });
    expect(wrongNonce.ok).toBe(false);
    const awsRoot = await verifyAttestation(doc, { nonce: Buffer.from(nonce, 'hex') });
    expect(awsRoot.ok).toBe(false);
    expect(awsRoot.checks.find((c) => c.name === 'certificate chain')?.ok).toBe(false);
  });

  it('keeps the operator key stable across requests', async () => {
    const a = await request(svc.baseUrl, 'GET', '/v1/attestation');
    const b = await request(svc.baseUrl, 'GET', '/v1/attestation');
    expect(a.body.operator_pubkey).toBe(b.body.operator_pubkey);
    expect(a.body.tee_public_key).toBe(b.body.tee_public_key);
  });

  it('refuses a malformed nonce', async () => {
    expect(expectError(await request(svc.baseUrl, 'GET', '/v1/attestation?nonce=xyz'), 400).param).toBe('nonce');
    expectError(await request(svc.baseUrl, 'GET', `/v1/attestation?nonce=${'ab'.repeat(65)}`), 400);
  });
});
