import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../common/config.js';
import { measuredConfig } from '../../enclave/attestation/create-provider.js';
import { measureConfig } from '../../enclave/attestation/pcrs.js';
import { enclaveSettings } from '../../enclave/config.js';
import type { Embedder } from '../../enclave/embedding/types.js';
import { KMS_KEY_FILE, KmsSealingKey } from '../../enclave/storage/kms-sealing-key.js';
import { createSealingKeySource } from '../../enclave/storage/open-memory-store.js';
import { MEMORY_PREFIX } from '../../enclave/storage/store.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { SimulatedSealingKey, SIMULATED_KEY_FILE } from '../../enclave/storage/sealing-key.js';
import { installFakeKmstool } from '../helpers/fake-kmstool.js';

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

const ARN = 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';
/** A key the host may use: its own, in its own account. */
const HOST_ARN = 'arn:aws:kms:eu-west-1:444455556666:key/99999999-8888-7777-6666-555555555555';

describe('KMS sealing key (kmstool_enclave_cli)', () => {
  let tool: string;
  const config = () => ({
    teeMode: 'nitro' as const, onModelChange: 'refuse' as const, snapshotLogBytes: 1, kmsKeyId: ARN, awsRegion: 'eu-west-1', kmsProxyPort: 8000,
    kmsTool: tool, awsAccessKeyId: 'AKIAEXAMPLE', awsSecretAccessKey: 'secret-access-key-value', awsSessionToken: 'token',
  });
  beforeEach(() => {
    tool = installFakeKmstool(dir);
    process.env.FAKE_KMS_LOG = join(dir, 'calls.log');
    delete process.env.FAKE_KMS_FAIL;
  });
  const calls = () => readFileSync(join(dir, 'calls.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as string[]);
  const load = () => createSealingKeySource(config(), new FsBlobStore(dir)).load();
  /** The host, with KMS credentials of its own, makes a data key under `keyId` and plants its ciphertext. */
  const plant = (keyId: string) => {
    const out = execFileSync(tool, ['genkey', '--key-id', keyId, '--key-spec', 'AES-256'], { encoding: 'utf8' });
    const [, ciphertext] = /^CIPHERTEXT: (\S+)$/m.exec(out)!;
    const [, plaintext] = /^PLAINTEXT: (\S+)$/m.exec(out)!;
    writeFileSync(join(dir, KMS_KEY_FILE), `${ciphertext}\n`);
    return Buffer.from(plaintext, 'base64');
  };

  it('generates a data key on first start, keeps only its ciphertext, and decrypts it later under the named key', async () => {
    const source = createSealingKeySource(config(), new FsBlobStore(dir));
    expect(source).toBeInstanceOf(KmsSealingKey);
    expect(source.simulated).toBe(false);
    const key = await source.load();
    expect(key).toHaveLength(32);
    const stored = readFileSync(join(dir, KMS_KEY_FILE), 'utf8').trim();
    expect(Buffer.from(stored, 'base64').includes(Buffer.from(key))).toBe(false);

    expect(await load()).toEqual(key);
    const [genkey, check, decrypt] = calls();
    expect(genkey.slice(0, 5)).toEqual(['genkey', '--region', 'eu-west-1', '--proxy-port', '8000']);
    expect(genkey).toEqual(expect.arrayContaining(['--key-id', ARN, '--key-spec', 'AES-256', '--aws-session-token', 'token']));
    for (const call of [check, decrypt]) {
      expect(call[0]).toBe('decrypt');
      expect(call[call.indexOf('--ciphertext') + 1]).toBe(stored);
      expect(call[call.indexOf('--key-id') + 1]).toBe(ARN);
      expect(call[call.indexOf('--encryption-algorithm') + 1]).toBe('SYMMETRIC_DEFAULT');
    }
    // AWS's kmstool refuses options it does not know: send none of ours.
    for (const call of calls()) {
      expect(call.filter((arg) => arg.startsWith('--'))).toEqual(expect.not.arrayContaining(['--encryption-context']));
    }
  });

  it('refuses a sealing-key.kms the host planted under a key of its own, and seals nothing under it', async () => {
    const hostKnows = plant(HOST_ARN);
    const err = await load().then(() => { throw new Error('loaded, but a refusal was expected'); }, (e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/sealing-key\.kms in the host store does not open under KMS_KEY_ID arn:aws:kms:eu-west-1:111122223333:key\/1234abcd.*IncorrectKeyException/);
    expect((err as Error).message).not.toContain('secret-access-key-value');
    expect(Buffer.from(await load().catch(() => new Uint8Array())).equals(hostKnows)).toBe(false);
    // The host's genkey, then the enclave's two decrypts: no key was generated in its place, and nothing sealed.
    expect(calls().map((c) => c[0])).toEqual(['genkey', 'decrypt', 'decrypt']);
    expect(existsSync(join(dir, 'memory'))).toBe(false);
  });

  it('fails closed with KMS\'s reason and without echoing credentials', async () => {
    process.env.FAKE_KMS_FAIL = '1';
    const err = await load().then(() => { throw new Error('loaded, but a refusal was expected'); }, (e: Error) => e);
    expect(err.message).toMatch(/genkey failed: AccessDeniedException: attestation PCR0 does not match/);
    expect(err.message).not.toContain('secret-access-key-value');
    expect(existsSync(join(dir, KMS_KEY_FILE))).toBe(false);

    const missing = await createSealingKeySource({ ...config(), kmsTool: join(dir, 'no-such-tool') }, new FsBlobStore(dir)).load().then(() => { throw new Error('loaded, but a refusal was expected'); }, (e: Error) => e);
    expect(missing.message).toMatch(/no-such-tool genkey failed: exit ENOENT/);
    expect(missing.message).not.toContain('secret-access-key-value');
  });

  it('names the missing settings, and a key of another region than AWS_REGION', () => {
    expect(() => createSealingKeySource({ ...config(), kmsKeyId: undefined, awsSecretAccessKey: undefined }, new FsBlobStore(dir)))
      .toThrow(/needs KMS_KEY_ID, AWS_SECRET_ACCESS_KEY/);
    expect(() => createSealingKeySource({ ...config(), awsRegion: 'us-east-1' }, new FsBlobStore(dir)))
      .toThrow('KMS_KEY_ID is a key in eu-west-1 but AWS_REGION is us-east-1');
  });
});

describe('KMS_KEY_ID accepts only a key ARN', () => {
  const problems = (value: string) => {
    try {
      loadConfig({ kmsKeyId: enclaveSettings.kmsKeyId }, { KMS_KEY_ID: value });
      return [];
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as ConfigError).problems;
    }
  };

  it('takes key ARNs, multi-Region ones and other partitions included', () => {
    for (const arn of [ARN, 'arn:aws:kms:us-east-1:111122223333:key/mrk-1234abcd12ab34cd56ef1234567890ab', 'arn:aws-us-gov:kms:us-gov-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab']) {
      expect(problems(arn)).toEqual([]);
    }
  });

  it('refuses an alias, an alias ARN and a bare key id, each in one line that says why', () => {
    const cases: Array<[string, RegExp]> = [
      ['alias/agent-sealing', /got an alias: "alias\/agent-sealing"/],
      ['arn:aws:kms:eu-west-1:111122223333:alias/agent-sealing', /got an alias/],
      ['1234abcd-12ab-34cd-56ef-1234567890ab', /got a bare key id/],
      [`${ARN} `, /got not a key ARN/],
    ];
    for (const [value, reason] of cases) {
      const found = problems(value);
      expect(found).toHaveLength(1);
      expect(found[0]).toMatch(/^KMS_KEY_ID: must be a key ARN \(arn:aws:kms:<region>:<account>:key\/<key id>\)/);
      expect(found[0]).toMatch(reason);
      expect(found[0]).not.toContain('\n');
    }
  });
});

describe('the measured configuration (simulated PCR1)', () => {
  const inputs = (kmsKeyId?: string) => ({
    config: { teeMode: 'simulated' as const, embeddingModel: 'static', nsmHelper: '/x', kmsKeyId, modelTlsPins: [], memoryUpstream: 'send' as const },
    embedder: { id: 'static' } as Embedder,
    operatorKey: new Uint8Array(32).fill(1),
  });

  it('holds the sealing key ARN, so pinning PCR1 pins the key', () => {
    expect(measuredConfig(inputs(ARN)).kms_key_id).toBe(ARN);
    expect(measuredConfig(inputs()).kms_key_id).toBeNull();
    expect(measureConfig(measuredConfig(inputs(ARN)))).not.toEqual(measureConfig(measuredConfig(inputs(HOST_ARN))));
  });
});
