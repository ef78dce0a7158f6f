import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KmsSealingKey } from '../../enclave/storage/kms-sealing-key.js';
import { createSealingKeySource } from '../../enclave/storage/open-memory-store.js';
import { MEMORY_PREFIX } from '../../enclave/storage/store.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { SimulatedSealingKey, SIMULATED_KEY_FILE } from '../../enclave/storage/sealing-key.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'sealing-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('simulated sealing key', () => {
  it('is created once in the host store (0600, labelled simulated) and then reused', async () => {
    const source = new SimulatedSealingKey(new FsBlobStore(dir), MEMORY_PREFIX);
    expect(source.simulated).toBe(true);
    const key = await source.load();
    expect(key).toHaveLength(32);
    const file = join(dir, SIMULATED_KEY_FILE);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8')).toMatch(/SIMULATED SEALING KEY/);
    expect(await new SimulatedSealingKey(new FsBlobStore(dir), MEMORY_PREFIX).load()).toEqual(key);
  });

  it('is not silently replaced when sealed files exist without it', async () => {
    mkdirSync(join(dir, 'memory'));
    writeFileSync(join(dir, 'memory', 'log-000000000001.sealed'), 'x');
    await expect(new SimulatedSealingKey(new FsBlobStore(dir), MEMORY_PREFIX).load()).rejects.toThrow(/holds sealed blobs \(memory\/\) but not their key/);
  });

  it('refuses a damaged key file', async () => {
    writeFileSync(join(dir, SIMULATED_KEY_FILE), JSON.stringify({ key: 'c2hvcnQ=' }));
    await expect(new SimulatedSealingKey(new FsBlobStore(dir), MEMORY_PREFIX).load()).rejects.toThrow(/does not hold a 32-byte key/);
  });
});

/**
 * Stands in for AWS KMS behind kmstool_enclave_cli (outside this system): "encrypts" a data
 * key by XOR with a constant, prints what the real tool prints, and logs its arguments.
 */
const FAKE_KMSTOOL = `#!/usr/bin/env node
const fs = require('node:fs');
const args = process.argv.slice(2);
fs.appendFileSync(process.env.FAKE_KMS_LOG, JSON.stringify(args) + '\\n');
const arg = (name) => args[args.indexOf(name) + 1];
const wrap = (b) => Buffer.from(b.map((x) => x ^ 0x5a));
if (process.env.FAKE_KMS_FAIL) { process.stderr.write('AccessDeniedException: attestation PCR0 does not match\\n'); process.exit(1); }
if (args[0] === 'genkey') {
  const key = require('node:crypto').randomBytes(32);
  process.stdout.write('CIPHERTEXT: ' + wrap(key).toString('base64') + '\\nPLAINTEXT: ' + key.toString('base64') + '\\n');
} else if (args[0] === 'decrypt') {
  process.stdout.write('PLAINTEXT: ' + wrap(Buffer.from(arg('--ciphertext'), 'base64')).toString('base64') + '\\n');
}
`;

describe('KMS sealing key (kmstool_enclave_cli)', () => {
  const config = () => ({
    teeMode: 'nitro' as const, snapshotLogBytes: 1, kmsKeyId: 'alias/agent-sealing', awsRegion: 'eu-west-1', kmsProxyPort: 8000,
    kmsTool: join(dir, 'kmstool'), awsAccessKeyId: 'AKIAEXAMPLE', awsSecretAccessKey: 'secret-access-key-value', awsSessionToken: 'token',
  });
  beforeEach(() => {
    writeFileSync(join(dir, 'kmstool'), FAKE_KMSTOOL);
    chmodSync(join(dir, 'kmstool'), 0o755);
    process.env.FAKE_KMS_LOG = join(dir, 'calls.log');
    delete process.env.FAKE_KMS_FAIL;
  });
  const calls = () => readFileSync(join(dir, 'calls.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as string[]);

  it('generates a data key on first start, keeps only its ciphertext, and decrypts it later', async () => {
    const source = createSealingKeySource(config(), new FsBlobStore(dir));
    expect(source).toBeInstanceOf(KmsSealingKey);
    expect(source.simulated).toBe(false);
    const key = await source.load();
    expect(key).toHaveLength(32);
    const stored = readFileSync(join(dir, 'sealing-key.kms'), 'utf8').trim();
    expect(Buffer.from(stored, 'base64')).not.toEqual(Buffer.from(key));

    expect(await createSealingKeySource(config(), new FsBlobStore(dir)).load()).toEqual(key);
    const [genkey, decrypt] = calls();
    expect(genkey.slice(0, 5)).toEqual(['genkey', '--region', 'eu-west-1', '--proxy-port', '8000']);
    expect(genkey).toEqual(expect.arrayContaining(['--key-id', 'alias/agent-sealing', '--key-spec', 'AES-256', '--aws-session-token', 'token']));
    expect(decrypt[0]).toBe('decrypt');
    expect(decrypt[decrypt.indexOf('--ciphertext') + 1]).toBe(stored);
  });

  it('fails closed with KMS\'s reason and without echoing credentials', async () => {
    process.env.FAKE_KMS_FAIL = '1';
    const err = await createSealingKeySource(config(), new FsBlobStore(dir)).load().catch((e: Error) => e);
    expect(err.message).toMatch(/genkey failed: AccessDeniedException: attestation PCR0 does not match/);
    expect(err.message).not.toContain('secret-access-key-value');
    expect(existsSync(join(dir, 'sealing-key.kms'))).toBe(false);

    const missing = await createSealingKeySource({ ...config(), kmsTool: join(dir, 'no-such-tool') }, new FsBlobStore(dir)).load().catch((e: Error) => e);
    expect(missing.message).toMatch(/no-such-tool genkey failed: exit ENOENT/);
    expect(missing.message).not.toContain('secret-access-key-value');
  });

  it('names the missing settings', () => {
    expect(() => createSealingKeySource({ ...config(), kmsKeyId: undefined, awsSecretAccessKey: undefined }, new FsBlobStore(dir)))
      .toThrow(/needs KMS_KEY_ID, AWS_SECRET_ACCESS_KEY/);
  });
});
