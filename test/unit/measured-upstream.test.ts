import { describe, expect, it } from 'vitest';
import { measuredConfig } from '../../enclave/attestation/create-provider.js';
import { measureConfig } from '../../enclave/attestation/pcrs.js';
import { enclaveSettings } from '../../enclave/config.js';
import type { Embedder } from '../../enclave/embedding/types.js';

/** Where memories may go is trust-relevant: a client pinning PCR1 pins it (issue 34 item 4). */
describe('the measured configuration names where memories may go', () => {
  const PIN_A = Buffer.alloc(32, 0xaa).toString('base64');
  const PIN_B = Buffer.alloc(32, 0xbb).toString('base64');
  const pcr1 = (change: { modelTlsPins?: string[]; memoryUpstream?: 'send' | 'never' } = {}) => measureConfig(measuredConfig({
    config: {
      teeMode: 'simulated', embeddingModel: 'static', nsmHelper: '/x', modelBaseUrl: 'https://model.example',
      modelTlsPins: change.modelTlsPins ?? [PIN_A], memoryUpstream: change.memoryUpstream ?? 'send',
    },
    embedder: { id: 'static' } as Embedder,
    operatorKey: new Uint8Array(32).fill(1),
  }));

  it('changing MODEL_TLS_PINS changes PCR1', () => {
    expect(pcr1()).toEqual(pcr1());
    expect(pcr1({ modelTlsPins: [PIN_B] })).not.toEqual(pcr1());
    expect(pcr1({ modelTlsPins: [] })).not.toEqual(pcr1());
    expect(pcr1({ modelTlsPins: [PIN_A, PIN_B] })).not.toEqual(pcr1());
  });

  it('changing MEMORY_UPSTREAM changes PCR1', () => {
    expect(pcr1({ memoryUpstream: 'never' })).not.toEqual(pcr1({ memoryUpstream: 'send' }));
  });

  it('MODEL_TLS_PINS takes base64 or hex and measures one spelling', () => {
    const hex = Buffer.alloc(32, 0xaa).toString('hex');
    expect(enclaveSettings.modelTlsPins.parse(`${hex}, ${PIN_A}`)).toEqual([PIN_A]);
    expect(() => enclaveSettings.modelTlsPins.parse('abc')).toThrow(/MODEL_TLS_PINS/);
  });
});
