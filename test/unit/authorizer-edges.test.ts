/**
 * What the authorizer tells a refused caller, and the key id shares are counted by (killed
 * mutants of npm run test:mutation).
 */
import { describe, expect, it } from 'vitest';
import { KeyRing, keyAuthorizer } from '../../enclave/auth/authorizer.js';
import { hashApiKey } from '../../enclave/auth/keys-file.js';
import { refusal } from '../helpers/refusal.js';

const one = 'key-one-0123456789abcdef';
const two = 'key-two-0123456789abcdef';
const ring = new KeyRing([{ hash: hashApiKey(one), tenants: ['t1'], plaintext: true }, { hash: hashApiKey(two), tenants: ['t2', 't3'], plaintext: false }]);
const auth = keyAuthorizer(() => ring);

describe('key authorizer', () => {
  it('is required, and authenticates known keys only', () => {
    expect(auth.required).toBe(true);
    expect(() => auth.authenticate(`Bearer ${one}`)).not.toThrow();
    expect(refusal(() => auth.authenticate('Bearer nope-nope-nope')).code).toBe('invalid_api_key');
  });

  it('a blank header is a missing key, with the challenge a client needs', () => {
    const missing = refusal(() => auth.authenticate('   '));
    expect(missing.code).toBe('missing_api_key');
    expect(missing.message).toBe('missing API key: send "Authorization: Bearer <key>"');
    expect(missing.headers).toEqual({ 'www-authenticate': 'Bearer' });
    const invalid = refusal(() => auth.authenticate('Bearer nope-nope-nope'));
    expect(invalid.message).toBe('invalid API key');
    expect(invalid.headers).toEqual({ 'www-authenticate': 'Bearer error="invalid_token"' });
  });

  it('echoes a refused tenant only when it is a well-formed id', () => {
    expect(refusal(() => auth.authorize(`Bearer ${one}`, 't2')).message).toBe('this API key may not act for tenant \'t2\'');
    expect(refusal(() => auth.authorize(`Bearer ${one}`, '<script>')).message).toBe('this API key may not act for this tenant');
  });

  it('chat: an empty organization header is no header; a foreign or missing one is refused with a reason', () => {
    expect(auth.chatTenant(`Bearer ${one}`, '')).toBe('t1');
    expect(auth.chatTenant(`Bearer ${one}`, undefined)).toBe('t1');
    expect(refusal(() => auth.chatTenant(`Bearer ${one}`, 't2')).message).toBe('this API key may not act for the organization in organization_id');
    const several = refusal(() => auth.chatTenant(`Bearer ${two}`, ''));
    expect(several.message).toBe('this API key holds several tenants: name one in the organization_id header');
  });

  it('names a key by the first 16 bytes of its stored hash, the same for every spelling, and no id for an unknown key', () => {
    const id = hashApiKey(one).subarray(0, 16).toString('hex');
    expect(ring.idOf(one)).toBe(id);
    expect(ring.idOf(two)).toBe(hashApiKey(two).subarray(0, 16).toString('hex'));
    expect(ring.idOf('unknown-key-000000000')).toBeUndefined();
    expect(auth.keyOf(`Bearer ${one}`)).toBe(id);
    expect(auth.keyOf(`bearer   ${one}`)).toBe(id);
    expect(auth.keyOf('Bearer unknown-key-000000000')).toBeUndefined();
    expect(ring.tenantsOf('unknown-key-000000000')).toBeUndefined();
  });
});
