import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyAttestation } from '../../protocol/attestation/verify.js';
import { expectError, request } from '../helpers/http.js';
import { startService, type RunningService } from '../helpers/service.js';

let svc: RunningService;
let rootBeforeFirstRequest: string | undefined;

beforeAll(async () => {
  svc = await startService();
  rootBeforeFirstRequest = existsSync(join(svc.dataDir, 'simulated-root.pem')) ? readFileSync(join(svc.dataDir, 'simulated-root.pem'), 'utf8') : undefined;
});
afterAll(async () => {
  await svc?.stop();
});

describe('GET /v1/attestation', () => {
  it('the simulated root is written when the enclave starts, before any document is asked for', () => {
    expect(rootBeforeFirstRequest).toContain('-----BEGIN CERTIFICATE-----');
  });

  it('returns the four fields, with a document that binds the enclave key and verifies against the simulated root', async () => {
    const nonce = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
    const res = await request(svc.baseUrl, 'GET', `/v1/attestation?nonce=${nonce}`);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['code_attestation', 'operator_pubkey', 'tee_box_public_key', 'tee_name', 'tee_public_key']);
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
    // user_data binds the operator key and the X25519 key for sealed requests.
    expect(JSON.parse(Buffer.from(result.document!.userData!).toString())).toEqual({
      v: 1, operator_pubkey: res.body.operator_pubkey, tee_box_public_key: res.body.tee_box_public_key,
    });

    const wrongNonce = await verifyAttestation(doc, { rootPem: root, nonce: Buffer.from('00', 'hex') });
    expect(wrongNonce.ok).toBe(false);
    const awsRoot = await verifyAttestation(doc, { nonce: Buffer.from(nonce, 'hex') });
    expect(awsRoot.ok).toBe(false);
    expect(awsRoot.checks.find((c) => c.name === 'certificate chain')?.ok).toBe(false);
  });

  it('verifies with `agent-verify <base-url> --root $DATA_DIR/simulated-root.pem --nonce <hex>`, and fails against the AWS root', async () => {
    const cli = join(import.meta.dirname, '../../dist/sdk/bin/agent-verify.js');
    const run = (args: string[]) => promisify(execFile)(process.execPath, [cli, ...args]).then(
      ({ stdout }) => ({ code: 0, stdout }),
      (error: { code: number; stdout: string }) => ({ code: error.code, stdout: error.stdout }),
    );
    const root = join(svc.dataDir, 'simulated-root.pem');
    const ok = await run([svc.baseUrl, '--root', root, '--nonce', '0badc0ffee']);
    expect(ok.stdout).toContain('✓ nonce: matches 0badc0ffee');
    expect(ok.stdout).toContain('✓ operator key');
    expect(ok.stdout).toContain('✓ box key');
    expect(ok.stdout).toMatch(/OK: all 11 checks passed/);
    expect(ok.code).toBe(0);
    // A newcomer reading "OK" learns what it does not prove: the simulated root is the host's own,
    // and nothing pins the code until a manifest does.
    expect(ok.stdout).toMatch(/simulated TEE: its root \(--root\) was made by the service itself, so this proves nothing/);
    expect(ok.stdout).toMatch(/nothing pins which code it attests;\n.*--manifest <file\|url>/);
    const aws = await run([svc.baseUrl, '--nonce', '0badc0ffee']);
    expect(aws.code).toBe(1);
    expect(aws.stdout).toContain('✗ certificate chain: chain does not end at the pinned root');
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
