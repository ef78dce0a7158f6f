import { describe, expect, it } from 'vitest';
import { flag, loadConfig } from '../../common/config.js';
import { enclaveSettings } from '../../enclave/config.js';
import { proxySettings } from '../../proxy/config.js';

describe('guard settings', () => {
  it('reads on/off flags and refuses anything else', () => {
    const s = { open: flag('ALLOW_OPEN', 'x') };
    expect(loadConfig(s, {}).open).toBe(false);
    for (const v of ['1', 'true', 'YES']) expect(loadConfig(s, { ALLOW_OPEN: v }).open).toBe(true);
    for (const v of ['0', 'false', 'no', '']) expect(loadConfig(s, { ALLOW_OPEN: v }).open).toBe(false);
    expect(() => loadConfig(s, { ALLOW_OPEN: 'maybe' })).toThrow(/ALLOW_OPEN: expected 1 or 0/);
  });

  it('has the documented defaults', () => {
    expect(loadConfig(proxySettings, {})).toMatchObject({
      allowOpen: false, receiveTimeoutMs: 30_000, maxInFlight: 256, rateLimitMax: 600, rateLimitIpMax: 3000, rateLimitWindowMs: 60_000, requestTimeoutMs: 30_000,
    });
    const enclave = loadConfig(enclaveSettings, {});
    expect(enclave).toMatchObject({ allowOpen: false, maxInFlight: 64, timeoutMs: 30_000 });
    expect(enclave.apiKeysFile).toBeUndefined();
  });

  it('checks ranges', () => {
    expect(() => loadConfig(proxySettings, { MAX_IN_FLIGHT: '0' })).toThrow(/MAX_IN_FLIGHT/);
    expect(() => loadConfig(proxySettings, { RATE_LIMIT_WINDOW_MS: '10' })).toThrow(/RATE_LIMIT_WINDOW_MS/);
    expect(() => loadConfig(enclaveSettings, { ENCLAVE_MAX_IN_FLIGHT: '-1' })).toThrow(/ENCLAVE_MAX_IN_FLIGHT/);
    expect(loadConfig(proxySettings, { RATE_LIMIT_MAX: '0' }).rateLimitMax).toBe(0);
  });
});
