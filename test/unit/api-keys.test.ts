import { describe, expect, it } from 'vitest';
import { isLoopbackHost } from '../../common/loopback.js';
import { bearerToken } from '../../common/bearer.js';
import { KeyRing, keyAuthorizer, openAuthorizer } from '../../enclave/auth/authorizer.js';
import { authorize, chatTenant } from '../../enclave/auth/caller.js';
import {
  entryId, formatKeysFile, generateApiKey, hashApiKey, KeysFileError, parseKeysFile,
} from '../../enclave/auth/keys-file.js';
import { openModeProblem } from '../../enclave/auth/setup.js';
import { refusal } from '../helpers/refusal.js';

const keyA = 'key-a-0123456789abcdef';
const keyB = generateApiKey();
const file = JSON.stringify({ [keyA]: ['t1'], [`sha256:${hashApiKey(keyB).toString('hex')}`]: ['t2', 't3'] });

describe('keys file', () => {
  it('reads plaintext and hashed entries, keeping only hashes', () => {
    const entries = parseKeysFile(file);
    expect(entries).toHaveLength(2);
    expect(entries[0]).toMatchObject({ tenants: ['t1'], plaintext: true });
    expect(entries[0].hash.equals(hashApiKey(keyA))).toBe(true);
    expect(entries[1]).toMatchObject({ tenants: ['t2', 't3'], plaintext: false });
    expect(JSON.stringify(entries)).not.toContain(keyA);
  });

  it.each([
    ['not JSON', '{', /not valid JSON/],
    ['an array', '[]', /JSON object/],
    ['a short key', JSON.stringify({ short: ['t'] }), /16–512 characters/],
    ['a key with a space', JSON.stringify({ 'has a space in it 0123': ['t'] }), /characters of/],
    ['a bad hash', JSON.stringify({ 'sha256:abc': ['t'] }), /64 hex digits/],
    ['no tenants', JSON.stringify({ [keyA]: [] }), /non-empty array/],
    ['tenants not an array', JSON.stringify({ [keyA]: 't1' }), /non-empty array/],
    ['a bad tenant id', JSON.stringify({ [keyA]: ['a/b'] }), /invalid tenant id/],
    ['a scoped entry without tenants', JSON.stringify({ [keyA]: { user_id: 'alice' } }), /non-empty array/],
    ['a scoped entry with an unknown field', JSON.stringify({ [keyA]: { tenants: ['t'], org_id: 'x' } }), /unknown field "org_id"/],
    ['a bad scope id', JSON.stringify({ [keyA]: { tenants: ['t'], user_id: 'a b' } }), /user_id must be/],
    ['the same key twice', JSON.stringify({ [keyA]: ['t'], [`sha256:${hashApiKey(keyA).toString('hex')}`]: ['u'] }), /appears twice/],
  ])('refuses %s, never quoting a key', (_name, text, message) => {
    let error: unknown;
    try {
      parseKeysFile(text);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(KeysFileError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain(keyA);
  });

  it('reads an entry limited to scopes beside a tenant-wide one', () => {
    const entries = parseKeysFile(JSON.stringify({ [keyA]: { tenants: ['t1'], user_id: 'alice', run_id: 'r1' }, [keyB]: ['t2'] }));
    expect(entries[0]).toMatchObject({ tenants: ['t1'], scope: { user_id: 'alice', run_id: 'r1' } });
    expect(entries[1]).toMatchObject({ tenants: ['t2'], scope: {} });
    const ring = new KeyRing(entries);
    expect(ring.lookup(keyA)!.scope).toEqual({ user_id: 'alice', run_id: 'r1' });
  });

  it('formats a file that parses back to the same entries', () => {
    const map = { [keyA]: ['t1'], [`sha256:${'ab'.repeat(32)}`]: ['x', 'y'], [`sha256:${'cd'.repeat(32)}`]: { tenants: ['z'], agent_id: 'bot' } };
    expect(JSON.parse(formatKeysFile(map))).toEqual(map);
    expect(formatKeysFile({})).toBe('{}\n');
  });

  it('generates distinct, well-formed keys and names them by a hash prefix', () => {
    const keys = new Set(Array.from({ length: 100 }, generateApiKey));
    expect(keys.size).toBe(100);
    for (const k of keys) expect(k).toMatch(/^agk_[A-Za-z0-9_-]{43}$/);
    expect(entryId(hashApiKey(keyA))).toBe(`sha256:${hashApiKey(keyA).toString('hex').slice(0, 16)}`);
  });
});

describe('authorizer with keys', () => {
  const ring = new KeyRing(parseKeysFile(file));
  const auth = keyAuthorizer(() => ring);

  it('finds a key\'s tenants, and nothing for an unknown key', () => {
    expect([...ring.lookup(keyA)!.tenants]).toEqual(['t1']);
    expect([...ring.lookup(keyB)!.tenants]).toEqual(['t2', 't3']);
    expect(ring.lookup(`${keyA}x`)).toBeUndefined();
    expect(ring.lookup('')).toBeUndefined();
  });

  it('parses Bearer tokens strictly', () => {
    expect(bearerToken(`Bearer ${keyA}`)).toBe(keyA);
    expect(bearerToken(`bearer  ${keyA} `)).toBe(keyA);
    expect(bearerToken(keyA)).toBeUndefined();
    expect(bearerToken(`Basic ${keyA}`)).toBeUndefined();
    expect(bearerToken('Bearer a b')).toBeUndefined();
    expect(bearerToken(`Bearer ${'a'.repeat(2000)}`)).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });

  it('answers 401 for a missing, malformed or unknown key', () => {
    const missing = refusal(() => authorize(auth.identify(''), 't1'));
    expect([missing.status, missing.code, missing.headers['www-authenticate']]).toEqual([401, 'missing_api_key', 'Bearer']);
    for (const header of [keyA, `Basic ${keyA}`, 'Bearer nope-nope-nope-nope', `Bearer ${keyA}\u0000`]) {
      const e = refusal(() => authorize(auth.identify(header), 't1'));
      expect([e.status, e.type, e.code]).toEqual([401, 'authentication_error', 'invalid_api_key']);
    }
  });

  it('answers 403 for a tenant the key does not hold, and lets it act for its own', () => {
    expect(() => authorize(auth.identify(`Bearer ${keyA}`), 't1')).not.toThrow();
    expect(() => authorize(auth.identify(`Bearer ${keyB}`), 't3')).not.toThrow();
    const e = refusal(() => authorize(auth.identify(`Bearer ${keyA}`), 't2'));
    expect([e.status, e.type, e.code]).toEqual([403, 'permission_error', 'tenant_not_allowed']);
    expect(refusal(() => authorize(auth.identify(`Bearer ${keyA}`), 'T1')).status).toBe(403);
  });

  it('picks the chat tenant: the organization if held, else a single-tenant key\'s tenant', () => {
    expect(chatTenant(auth.identify(`Bearer ${keyB}`), 't3')).toBe('t3');
    expect(chatTenant(auth.identify(`Bearer ${keyA}`), undefined)).toBe('t1');
    expect(refusal(() => chatTenant(auth.identify(`Bearer ${keyA}`), 't2')).status).toBe(403);
    const several = refusal(() => chatTenant(auth.identify(`Bearer ${keyB}`), undefined));
    expect([several.status, several.param]).toEqual([400, 'organization_id']);
    expect(refusal(() => chatTenant(auth.identify(''), 't1')).status).toBe(401);
  });

  it('reads the current key ring on every call (reload)', () => {
    let current = ring;
    const live = keyAuthorizer(() => current);
    expect(() => authorize(live.identify(`Bearer ${keyA}`), 't1')).not.toThrow();
    current = new KeyRing([]);
    expect(refusal(() => authorize(live.identify(`Bearer ${keyA}`), 't1')).status).toBe(401);
  });
});

describe('open mode', () => {
  it('lets everyone through and passes the organization on', () => {
    expect(openAuthorizer.required).toBe(false);
    expect(() => authorize(openAuthorizer.identify(''), 'anyone')).not.toThrow();
    expect(chatTenant(openAuthorizer.identify(''), 'org')).toBe('org');
    expect(chatTenant(openAuthorizer.identify(''), undefined)).toBeUndefined();
  });

  it('is allowed only for a simulated enclave on loopback, or with ALLOW_OPEN', () => {
    const base = { allowOpen: false, teeMode: 'simulated', address: '127.0.0.1:50051' };
    expect(openModeProblem(base)).toBeUndefined();
    expect(openModeProblem({ ...base, address: 'localhost:1' })).toBeUndefined();
    expect(openModeProblem({ ...base, address: '[::1]:1' })).toBeUndefined();
    expect(openModeProblem({ ...base, address: '0.0.0.0:50051' })).toMatch(/not loopback/);
    expect(openModeProblem({ ...base, address: '10.0.0.5:50051' })).toMatch(/ALLOW_OPEN=1/);
    expect(openModeProblem({ ...base, teeMode: 'nitro' })).toMatch(/TEE_MODE=nitro/);
    expect(openModeProblem({ ...base, teeMode: 'nitro', allowOpen: true })).toBeUndefined();
    expect(openModeProblem({ ...base, address: '0.0.0.0:1', allowOpen: true })).toBeUndefined();
  });

  it('knows loopback addresses from exposed ones', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', 'localhost', 'LOCALHOST', '::1', '[::1]', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1']) {
      expect(isLoopbackHost(h), h).toBe(true);
    }
    for (const h of ['0.0.0.0', '::', '10.0.0.1', '192.168.1.1', 'example.com', '', '127.0.0.1.nip.io', '::ffff:10.0.0.1']) {
      expect(isLoopbackHost(h), h).toBe(false);
    }
  });
});
