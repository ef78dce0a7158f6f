import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BlobStore } from '../../common/blob-store.js';
import type { Embedder } from '../embedding/types.js';
import { NitroProvider } from './nitro-provider.js';
import { measureEnclave, type ConfigValue } from './pcrs.js';
import type { AttestationProvider } from './provider.js';
import { SimulatedNitroProvider } from './simulated-nsm.js';

export interface ProviderInputs {
  config: {
    teeMode: 'simulated' | 'nitro'; modelBaseUrl?: string; embeddingModel: string; nsmHelper: string; kmsKeyId?: string;
    modelTlsPins: readonly string[]; memoryUpstream: 'send' | 'never';
    /** WITNESSES (default 0). */
    witnesses?: number;
  };
  /** The host store: the simulated CA is kept there. */
  blobs: BlobStore;
  embedder: Embedder;
  operatorKey: Uint8Array;
  /** The folders simulated PCR0 measures; default the enclave's own compiled code (tests measure a stand-in). */
  codeDirs?: readonly string[];
}

// The enclave's own compiled code: dist/enclave and the dist/common and dist/protocol it
// imports (lint keeps the enclave from importing any other folder: eslint.config.js).
const enclaveDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ownCodeDirs = [enclaveDir, resolve(enclaveDir, '../common'), resolve(enclaveDir, '../protocol')];

/** The trust-relevant configuration that simulated PCR1 measures (docs/trust-model.md lists its keys). */
export function measuredConfig(inputs: Pick<ProviderInputs, 'config' | 'embedder' | 'operatorKey'>): Record<string, ConfigValue> {
  const { config } = inputs;
  return {
    tee_mode: config.teeMode,
    model_base_url: config.modelBaseUrl ?? null,
    // Which server may see prompts and memories (its certificate keys), and whether memories
    // may leave at all: a client pinning PCR1 pins both. On Nitro they are ENVs of the image.
    model_tls_pins: config.modelTlsPins.join(','),
    memory_upstream: config.memoryUpstream,
    embedding_model: inputs.embedder.id,
    operator_pubkey: Buffer.from(inputs.operatorKey).toString('base64'),
    // The key that seals data at rest is trust-relevant: pinning PCR1 pins it. On Nitro
    // it is an ENV of the image, so PCR0 covers it.
    kms_key_id: config.kmsKeyId ?? null,
    // How many enclaves must witness a write (freshness across enclaves): a host that could
    // lower it could have writes acknowledged that no other enclave knows of. Absent at 0 (one
    // enclave), so PCR1 of such an enclave is what it was before the setting existed.
    ...((config.witnesses ?? 0) > 0 ? { witnesses: config.witnesses } : {}),
  };
}

/**
 * The attestation provider for TEE_MODE. Simulated PCRs measure the code, the
 * trust-relevant configuration and the embedding model at start-up (enclave/attestation/pcrs.ts);
 * on Nitro the hardware measures the enclave image, which contains all three (the
 * configuration, KMS_KEY_ID included, is the image's ENV).
 */
export async function createAttestationProvider(inputs: ProviderInputs): Promise<AttestationProvider> {
  const { config } = inputs;
  if (config.teeMode === 'nitro') return new NitroProvider({ helperPath: config.nsmHelper });
  const pcrs = await measureEnclave({ codeDirs: [...(inputs.codeDirs ?? ownCodeDirs)], config: measuredConfig(inputs), model: inputs.embedder });
  const provider = new SimulatedNitroProvider({ blobs: inputs.blobs, pcrs });
  // Create (or load) the CA now, so the host store's $DATA_DIR/simulated-root.pem exists as
  // soon as the enclave is up: a client pins it before asking for its first document.
  await provider.rootCertificatePem();
  return provider;
}
