import { describe, expect, it } from 'vitest';
import { ConfigError, helpText, loadConfig, parseHostPort } from '../../common/config.js';
import { enclaveSettings } from '../../enclave/config.js';
import { placementSettings } from '../../placement/config.js';
import { proxySettings } from '../../proxy/config.js';

describe('configuration', () => {
  it('has defaults that serve a local two-process run on loopback', () => {
    const proxy = loadConfig(proxySettings, {});
    expect(proxy).toMatchObject({ host: '127.0.0.1', port: 8080, enclaveAddr: '127.0.0.1:50051', logLevel: 'info' });
    const enclave = loadConfig(enclaveSettings, {});
    expect(enclave).toMatchObject({ address: '127.0.0.1:50051', teeMode: 'simulated', embeddingModel: 'static', hostStoreAddr: '127.0.0.1:50052' });
    expect(enclave.modelBaseUrl).toBeUndefined();
  });

  it('reports every problem at once', () => {
    try {
      loadConfig(proxySettings, { PORT: 'eighty', ENCLAVE_ADDR: 'nowhere', LOG_LEVEL: 'loud' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      expect(problems).toContain('PORT: expected an integer, got "eighty"');
      expect(problems).toContain('ENCLAVE_ADDR: expected host:port, got "nowhere"');
      expect(problems).toContain('LOG_LEVEL: must be one of');
    }
  });

  it('checks ranges', () => {
    expect(() => loadConfig(proxySettings, { PORT: '70000' })).toThrow(/PORT: must be between 0 and 65535/);
    expect(() => loadConfig(enclaveSettings, { TEE_MODE: 'sgx' })).toThrow(/TEE_MODE: must be one of simulated, nitro/);
  });

  it('takes OWNER_GENERATION as a non-negative integer, and leaves it unset (the start time) when empty', () => {
    expect(loadConfig(enclaveSettings, {}).ownerGeneration).toBeUndefined();
    expect(loadConfig(enclaveSettings, { OWNER_GENERATION: '0' }).ownerGeneration).toBe(0);
    expect(loadConfig(enclaveSettings, { OWNER_GENERATION: '1764258000000' }).ownerGeneration).toBe(1764258000000);
    for (const bad of ['-1', '1.5', 'x', '1000000000000000']) {
      expect(() => loadConfig(enclaveSettings, { OWNER_GENERATION: bad })).toThrow(/OWNER_GENERATION: must be a non-negative integer below 10\^15/);
    }
  });

  it('parses host:port including IPv6', () => {
    expect(parseHostPort('127.0.0.1:50051')).toEqual({ host: '127.0.0.1', port: 50051 });
    expect(parseHostPort('[::1]:8080')).toEqual({ host: '::1', port: 8080 });
    expect(parseHostPort('localhost')).toBeUndefined();
    expect(parseHostPort('a:0')).toBeUndefined();
  });

  it('prints help from the same table it parses', () => {
    const help = helpText('title', proxySettings);
    for (const s of Object.values(proxySettings)) expect(help).toContain(s.name);
    expect(help).toContain('[default: 8080]');
  });

  it('describes ETCD_ENDPOINTS in each process\'s help for what that process does with it', () => {
    // Placement once printed the proxy's text ("unset = the one enclave at ENCLAVE_ADDR"), which is false for it.
    expect(placementSettings.etcdEndpoints.description).toMatch(/^etcd endpoints .*Required: .*membership/);
    expect(placementSettings.etcdEndpoints.description).not.toMatch(/proxy|route|unset/i);
    expect(proxySettings.etcdEndpoints.description).toMatch(/route each request by the shard map/);
  });
});
