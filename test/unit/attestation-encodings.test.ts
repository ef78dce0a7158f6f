/**
 * The small encodings attestation and the storage chain rest on, at their edges (killed
 * mutants of npm run test:mutation): user_data, the Ed25519 SubjectPublicKeyInfo, the state head.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createAttestationProvider, measuredConfig } from '../../enclave/attestation/create-provider.js';
import { NitroProvider } from '../../enclave/attestation/nitro-provider.js';
import { advanceHead, describeHead, genesisHead, sameHead } from '../../enclave/storage/state-head.js';
import { ed25519KeyFromSpki, ed25519SpkiDer, publicKeyMatches } from '../../protocol/public-key.js';
import { encodeUserData, parseUserData } from '../../protocol/user-data.js';

const key = (fill: number) => new Uint8Array(32).fill(fill);

describe('user_data', () => {
  it('is refused when absent or empty, naming that', () => {
    expect(() => parseUserData(null)).toThrow('the document has no user_data');
    expect(() => parseUserData(new Uint8Array())).toThrow('the document has no user_data');
  });

  it('may be 512 bytes (Nitro\'s cap), not 513', () => {
    const padded = (length: number) => {
      const base = { v: 1, operator_pubkey: Buffer.from(key(1)).toString('base64'), tee_box_public_key: Buffer.from(key(2)).toString('base64'), pad: '' };
      base.pad = 'x'.repeat(length - Buffer.byteLength(JSON.stringify(base)));
      return new Uint8Array(Buffer.from(JSON.stringify(base)));
    };
    expect(padded(512)).toHaveLength(512);
    expect(parseUserData(padded(512)).operatorKey).toEqual(key(1));
    expect(() => parseUserData(padded(513))).toThrow('user_data is 513 bytes, more than 512');
  });

  it('must be valid UTF-8, not decoded leniently', () => {
    const json = Buffer.from(`{"v":1,"operator_pubkey":"${Buffer.from(key(1)).toString('base64')}","tee_box_public_key":"${Buffer.from(key(2)).toString('base64')}","x":"\u00ff"}`, 'latin1');
    expect(() => parseUserData(new Uint8Array(json))).toThrow('user_data is not UTF-8 JSON');
  });

  it('binds 32-byte keys only', () => {
    const short = Buffer.from(JSON.stringify({ v: 1, operator_pubkey: Buffer.alloc(16, 1).toString('base64'), tee_box_public_key: Buffer.from(key(2)).toString('base64') }));
    expect(() => parseUserData(new Uint8Array(short))).toThrow('user_data operator_pubkey is not 32 bytes of base64');
    expect(parseUserData(encodeUserData({ operatorKey: key(1), boxPublicKey: key(2) })).boxPublicKey).toEqual(key(2));
  });
});

describe('Ed25519 SubjectPublicKeyInfo', () => {
  it('is exactly the prefix and 32 bytes: a longer one holds no key', () => {
    const der = ed25519SpkiDer(key(5));
    expect(ed25519KeyFromSpki(der)).toEqual(key(5));
    const longer = new Uint8Array([...der, 0]);
    expect(ed25519KeyFromSpki(longer)).toBeUndefined();
    expect(publicKeyMatches(key(5), longer)).toBe(false);
  });
});

describe('state head', () => {
  it('starts from a hash bound to the store id under its own domain string', () => {
    const expected = createHash('sha256').update('private-agent-service/state-head/v1\0').update('store-1').digest('hex');
    expect(genesisHead('store-1')).toEqual({ seq: 0, hash: expected });
  });

  it('no head is the same as none, or as another', () => {
    const a = advanceHead(genesisHead('s'), new Uint8Array([1]));
    expect(sameHead(a, { ...a })).toBe(true);
    expect(sameHead(undefined, a)).toBe(false);
    expect(sameHead(a, undefined)).toBe(false);
    expect(sameHead(undefined, undefined)).toBe(false);
    expect(sameHead(a, { seq: a.seq, hash: genesisHead('s').hash })).toBe(false);
    expect(sameHead(a, { seq: a.seq + 1, hash: a.hash })).toBe(false);
  });

  it('is described by its seq and the first 16 hex digits of its hash', () => {
    expect(describeHead({ seq: 3, hash: '0123456789abcdef'.repeat(4) })).toBe('3:0123456789abcdef');
    expect(describeHead(undefined)).toBe('none');
  });
});

describe('the attestation provider', () => {
  it('on Nitro asks the security module through the configured helper, measuring nothing itself', async () => {
    const provider = await createAttestationProvider({
      config: { teeMode: 'nitro', embeddingModel: 'static', nsmHelper: '/nonexistent/nsm-helper-for-test', modelTlsPins: [], memoryUpstream: 'send' },
      blobs: undefined as never,
      embedder: undefined as never,
      operatorKey: key(1),
    });
    expect(provider).toBeInstanceOf(NitroProvider);
    await expect(provider.attest({ publicKey: key(1), userData: new Uint8Array(), nonce: undefined })).rejects.toThrow('/nonexistent/nsm-helper-for-test');
  });

  it('simulated PCR1 measures these seven settings (the running enclave: test/integration/measured-config.test.ts)', () => {
    const inputs = {
      config: {
        teeMode: 'simulated' as const, modelBaseUrl: 'http://model.example/v1', embeddingModel: 'static', nsmHelper: '/unused', kmsKeyId: undefined,
        modelTlsPins: [] as string[], memoryUpstream: 'send' as const,
      },
      embedder: { id: 'static-test', dimension: 3, sha256: 'ab'.repeat(32) } as never,
      operatorKey: key(1),
    };
    expect(measuredConfig(inputs)).toEqual({
      tee_mode: 'simulated', model_base_url: 'http://model.example/v1', embedding_model: 'static-test',
      operator_pubkey: Buffer.from(key(1)).toString('base64'), kms_key_id: null, model_tls_pins: '', memory_upstream: 'send',
    });
    expect(measuredConfig({ ...inputs, config: { ...inputs.config, modelBaseUrl: undefined, kmsKeyId: 'arn:k' } })).toMatchObject({ model_base_url: null, kms_key_id: 'arn:k' });
  });
});
