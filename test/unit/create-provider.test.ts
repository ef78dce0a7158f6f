import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import nacl from 'tweetnacl';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createAttestationProvider, measuredConfig, type ProviderInputs } from '../../enclave/attestation/create-provider.js';
import { measureCode, measureConfig, measureModel } from '../../enclave/attestation/pcrs.js';
import type { Embedder } from '../../enclave/embedding/types.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { verifyAttestation } from '../../protocol/attestation/verify.js';

/**
 * Which provider TEE_MODE gives, and what the simulated one attests. The running enclave's
 * measurement is held by test/integration/measured-config.test.ts; this holds the choice
 * itself, where a swapped branch would give a Nitro service simulated documents (signed by a
 * CA the host keeps) or a local one no documents at all.
 */
describe('createAttestationProvider', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'create-provider-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const inputs = (teeMode: 'simulated' | 'nitro', nsmHelper = '/nonexistent/nsm-attest'): ProviderInputs => ({
    config: {
      teeMode, embeddingModel: 'static', nsmHelper, modelBaseUrl: 'https://model.example/v1',
      modelTlsPins: [], memoryUpstream: 'send',
    },
    blobs: new FsBlobStore(join(dir, 'store')),
    embedder: { id: 'static', sha256: 'ab'.repeat(32) } as Embedder,
    operatorKey: new Uint8Array(32).fill(7),
    // The sources run here are TypeScript, which PCR0 does not measure: a stand-in build.
    codeDirs: [join(dir, 'code')],
  });

  it('simulated: the CA exists in the host store as soon as the provider does, and documents carry the measured configuration and model', async () => {
    await mkdir(join(dir, 'code'));
    await writeFile(join(dir, 'code', 'main.js'), 'export {};\n');
    const given = inputs('simulated');
    const provider = await createAttestationProvider(given);
    expect(provider.teeName).toBe('simulated');
    // Before any document: a client pins this file before it asks for one.
    const rootOnDisk = await readFile(join(dir, 'store', 'simulated-root.pem'), 'utf8');
    expect(rootOnDisk).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(await provider.rootCertificatePem!()).toBe(rootOnDisk);

    const publicKey = nacl.sign.keyPair().publicKey;
    const result = await verifyAttestation(await provider.attest({ publicKey }), {
      rootPem: rootOnDisk,
      publicKey,
      pcrs: { 0: await measureCode([join(dir, 'code')]), 1: measureConfig(measuredConfig(given)), 2: measureModel(given.embedder) },
    });
    expect(result.checks.filter((check) => !check.ok)).toEqual([]);
    expect(result.ok).toBe(true);
  });

  it('nitro: documents come from the NSM helper named by NSM_HELPER, and no simulated CA is made', async () => {
    const helper = join(dir, 'nsm-attest');
    const argsFile = join(dir, 'args');
    await writeFile(helper, `#!/bin/sh\necho "$@" > '${argsFile}'\nprintf 'from-the-nsm'\n`);
    await chmod(helper, 0o755);
    const provider = await createAttestationProvider(inputs('nitro', helper));
    expect(provider.teeName).toBe('aws-nitro-enclaves');
    expect(provider.rootCertificatePem).toBeUndefined();

    const document = await provider.attest({ publicKey: new Uint8Array(32).fill(1) });
    expect(Buffer.from(document).toString()).toBe('from-the-nsm');
    expect(await readFile(argsFile, 'utf8')).toMatch(/^--public-key [0-9a-f]+\n$/);
    await expect(readFile(join(dir, 'store', 'simulated-root.pem'))).rejects.toThrow(/ENOENT/);
  });

  it('simulated PCR0 measures the enclave\'s own folders: enclave/, common/ and protocol/ beside it', async () => {
    // The sources run here hold no JavaScript, so the measurement names the folders it looked in.
    const { codeDirs: _standIn, ...own } = inputs('simulated');
    const root = resolve(import.meta.dirname, '../..');
    const folders = ['enclave', 'common', 'protocol'].map((name) => join(root, name)).join(', ');
    await expect(createAttestationProvider(own)).rejects.toThrow(`no JavaScript files under ${folders}`);
  });

  it('PCR1 holds MODEL_TLS_PINS comma-joined, as docs/trust-model.md tells a verifier to recompute it', () => {
    const given = inputs('simulated');
    const config = measuredConfig({ ...given, config: { ...given.config, modelTlsPins: ['QUFB', 'QkJC'] } });
    expect(config.model_tls_pins).toBe('QUFB,QkJC');
  });
});
