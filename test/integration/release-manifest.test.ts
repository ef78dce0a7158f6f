/**
 * The release flow end to end on the simulated TEE (issue 13): start the service, make the
 * signed manifest with the operator's command, verify the service against it with
 * `agent-verify --manifest`; then the attacks: a manifest changed after signing, one signed
 * by someone else, and a validly signed manifest for another build.
 */
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import nacl from 'tweetnacl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SignedManifest } from '../../sdk/attestation/manifest.js';
import { signedManifest } from '../helpers/manifests.js';
import { startService, type RunningService } from '../helpers/service.js';

const dist = join(import.meta.dirname, '../../dist');
const run = (script: string, args: string[]) =>
  promisify(execFile)(process.execPath, [join(dist, script), ...args]).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
  );
const verify = (args: string[]) => run('sdk/bin/agent-verify.js', args);

let svc: RunningService;
let root: string;
let manifestFile: string;
let operatorKey: string;
let operatorSecret: Uint8Array;

beforeAll(async () => {
  svc = await startService();
  root = join(svc.dataDir, 'simulated-root.pem');
  manifestFile = join(svc.dataDir, 'release-manifest.json');
  // Without OPERATOR_PUBKEY a local enclave keeps its operator key pair in the host store.
  const record = JSON.parse(await readFile(join(svc.dataDir, 'operator-key.json'), 'utf8')) as { public_key: string; secret_key: string };
  operatorKey = record.public_key;
  operatorSecret = new Uint8Array(Buffer.from(record.secret_key, 'base64'));
});
afterAll(async () => {
  await svc?.stop();
});

describe('release manifest, simulated TEE', () => {
  it('release-manifest --from-service signs the PCRs the service attests', async () => {
    const made = await run('scripts/release-manifest.js', [
      '--key', join(svc.dataDir, 'operator-key.json'), '--release', 'local-test', '--from-service', svc.baseUrl, '--root', root, '--out', manifestFile,
    ]);
    expect(made.stderr).toContain(`wrote ${manifestFile} (PCR0, PCR1, PCR2; operator key ${operatorKey})`);
    expect(made.code).toBe(0);
    const { manifest } = JSON.parse(await readFile(manifestFile, 'utf8')) as SignedManifest;
    expect(manifest.tee_name).toBe('simulated');
    expect(Object.keys(manifest.pcrs)).toEqual(['0', '1', '2']);
  });

  it('agent-verify --manifest pins its PCRs after checking the operator signature (exit 0)', async () => {
    const ok = await verify([svc.baseUrl, '--root', root, '--manifest', manifestFile, '--operator-key', operatorKey]);
    expect(ok.stdout).toContain('✓ manifest: release local-test (simulated) signed by the operator key; pins PCR0, PCR1, PCR2');
    for (const pcr of ['PCR0', 'PCR1', 'PCR2']) expect(ok.stdout).toContain(`✓ ${pcr}: matches`);
    expect(ok.stdout).toContain('✓ operator key');
    expect(ok.stdout).not.toContain('nothing pins which code');
    expect(ok.code).toBe(0);
  });

  it('fails a manifest changed after signing (exit 1), before contacting the service', async () => {
    const signed = JSON.parse(await readFile(manifestFile, 'utf8')) as SignedManifest;
    signed.manifest.pcrs['0'] = 'ee'.repeat(48);
    const tampered = join(svc.dataDir, 'tampered.json');
    await writeFile(tampered, JSON.stringify(signed));
    const result = await verify([svc.baseUrl, '--root', root, '--manifest', tampered, '--operator-key', operatorKey]);
    expect(result.stdout).toContain('✗ manifest:');
    expect(result.stdout).toContain('the signature does not verify with the operator key');
    expect(result.code).toBe(1);
  });

  it('fails a manifest signed by another key, even one claiming to be the operator’s (exit 1)', async () => {
    const signed = JSON.parse(await readFile(manifestFile, 'utf8')) as SignedManifest;
    const forged = signedManifest({ signer: nacl.sign.keyPair(), pcrs: signed.manifest.pcrs, overrides: { operator_pubkey: operatorKey } });
    const file = join(svc.dataDir, 'forged.json');
    await writeFile(file, JSON.stringify(forged));
    const result = await verify([svc.baseUrl, '--root', root, '--manifest', file, '--operator-key', operatorKey]);
    expect(result.stdout).toContain('the signature does not verify');
    expect(result.code).toBe(1);
  });

  it('fails when the service runs another build than the (validly signed) manifest names (exit 1)', async () => {
    const signed = JSON.parse(await readFile(manifestFile, 'utf8')) as SignedManifest;
    const other = signedManifest({
      signer: nacl.sign.keyPair.fromSecretKey(operatorSecret),
      pcrs: { ...signed.manifest.pcrs, 0: '0f'.repeat(48) },
    });
    const file = join(svc.dataDir, 'other-build.json');
    await writeFile(file, JSON.stringify(other));
    const result = await verify([svc.baseUrl, '--root', root, '--manifest', file, '--operator-key', operatorKey]);
    expect(result.stdout).toContain('✓ manifest:');
    expect(result.stdout).toContain(`✗ PCR0: PCR0 mismatch: expected ${'0f'.repeat(48)}`);
    expect(result.code).toBe(1);
  });
});
