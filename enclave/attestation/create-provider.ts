import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BlobStore } from '../../common/blob-store.js';
import type { Embedder } from '../embedding/types.js';
import { NitroProvider } from './nitro-provider.js';
import { measureEnclave } from './pcrs.js';
import type { AttestationProvider } from './provider.js';
import { SimulatedNitroProvider } from './simulated-nsm.js';

export interface ProviderInputs {
  config: { teeMode: 'simulated' | 'nitro'; modelBaseUrl?: string; embeddingModel: string; nsmHelper: string };
  /** The host store: the simulated CA is kept there. */
  blobs: BlobStore;
  embedder: Embedder;
  operatorKey: Uint8Array;
}

// The enclave's own compiled code: dist/enclave and the dist/common and dist/sdk it imports.
const enclaveDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const codeDirs = [enclaveDir, resolve(enclaveDir, '../common'), resolve(enclaveDir, '../sdk')];

/**
 * The attestation provider for TEE_MODE. Simulated PCRs measure the code, the
 * trust-relevant configuration and the embedding model at start-up (enclave/attestation/pcrs.ts);
 * on Nitro the hardware measures the enclave image, which contains all three.
 */
export async function createAttestationProvider(inputs: ProviderInputs): Promise<AttestationProvider> {
  const { config } = inputs;
  if (config.teeMode === 'nitro') return new NitroProvider({ helperPath: config.nsmHelper });
  const pcrs = await measureEnclave({
    codeDirs,
    config: {
      tee_mode: config.teeMode,
      model_base_url: config.modelBaseUrl ?? null,
      embedding_model: inputs.embedder.id,
      operator_pubkey: Buffer.from(inputs.operatorKey).toString('base64'),
    },
    model: inputs.embedder,
  });
  const provider = new SimulatedNitroProvider({ blobs: inputs.blobs, pcrs });
  // Create (or load) the CA now, so the host store's $DATA_DIR/simulated-root.pem exists as
  // soon as the enclave is up: a client pins it before asking for its first document.
  await provider.rootCertificatePem();
  return provider;
}
