/**
 * What the authorizer tells a refused caller, and the key id shares are counted by (killed
 * mutants of npm run test:mutation).
 */
import { describe, expect, it } from 'vitest';
import { KeyRing, keyAuthorizer } from '../../enclave/auth/authorizer.js';
import { authenticate, authorize, chatTenant, requireWholeTenant, scopeFor, type Caller } from '../../enclave/auth/caller.js';
import { hashApiKey } from '../../enclave/auth/keys-file.js';
import { refusal } from '../helpers/refusal.js';

const one = 'key-one-0123456789abcdef';
const two = 'key-two-0123456789abcdef';
const ring = new KeyRing([{ hash: hashApiKey(one), tenants: ['t1'], plaintext: true, scope: {} }, { hash: hashApiKey(two), tenants: ['t2', 't3'], plaintext: false, scope: {} }]);
const auth = keyAuthorizer(() => ring);

describe('key authorizer', () => {
  it('is required, and authenticates known keys only', () => {
    expect(auth.required).toBe(true);
    expect(() => authenticate(auth.identify(`Bearer ${one}`))).not.toThrow();
    expect(refusal(() => authenticate(auth.identify('Bearer nope-nope-nope'))).code).toBe('invalid_api_key');
  });

  it('a blank header is a missing key, with the challenge a client needs', () => {
    const missing = refusal(() => authenticate(auth.identify('   ')));
    expect(missing.code).toBe('missing_api_key');
    expect(missing.message).toBe('missing API key: send "Authorization: Bearer <key>"');
    expect(missing.headers).toEqual({ 'www-authenticate': 'Bearer' });
    const invalid = refusal(() => authenticate(auth.identify('Bearer nope-nope-nope')));
    expect(invalid.message).toBe('invalid API key');
    expect(invalid.headers).toEqual({ 'www-authenticate': 'Bearer error="invalid_token"' });
  });

  it('a key sent without "Bearer " is told so, and the refusal never echoes the header (it is the key)', () => {
    const bare = refusal(() => authenticate(auth.identify(one)));
    expect(bare.code).toBe('invalid_api_key');
    expect(bare.message).toBe('the Authorization header must be "Bearer <key>": this one has no Bearer scheme (was the key sent alone?)');
    expect(bare.headers).toEqual({ 'www-authenticate': 'Bearer error="invalid_request"' });
    expect(bare.message).not.toContain(one);
    expect(refusal(() => authenticate(auth.identify(`Token ${one}`))).message).not.toContain(one);
  });

  it('echoes a refused tenant only when it is a well-formed id', () => {
    expect(refusal(() => authorize(auth.identify(`Bearer ${one}`), 't2')).message).toBe('this API key may not act for tenant \'t2\'');
    expect(refusal(() => authorize(auth.identify(`Bearer ${one}`), '<script>')).message).toBe('this API key may not act for this tenant');
  });

  it('chat: an empty organization header is no header; a foreign or missing one is refused with a reason', () => {
    expect(chatTenant(auth.identify(`Bearer ${one}`), '')).toBe('t1');
    expect(chatTenant(auth.identify(`Bearer ${one}`), undefined)).toBe('t1');
    expect(refusal(() => chatTenant(auth.identify(`Bearer ${one}`), 't2')).message).toBe('this API key may not act for the organization named in the OpenAI-Organization (or organization_id) header');
    const several = refusal(() => chatTenant(auth.identify(`Bearer ${two}`), ''));
    expect(several.message).toMatch(/holds several tenants: name one in the OpenAI-Organization header \(the openai SDK's `organization` option\)/);
  });

  it('names a key by the first 16 bytes of its stored hash, the same for every spelling, and no id for an unknown key', () => {
    const id = hashApiKey(one).subarray(0, 16).toString('hex');
    expect(ring.lookup(one)?.id).toBe(id);
    expect(ring.lookup(two)?.id).toBe(hashApiKey(two).subarray(0, 16).toString('hex'));
    expect(ring.lookup('unknown-key-000000000')).toBeUndefined();
    expect(auth.identify(`Bearer ${one}`).keyId).toBe(id);
    expect(auth.identify(`bearer   ${one}`).keyId).toBe(id);
    expect(auth.identify('Bearer unknown-key-000000000').keyId).toBeUndefined();
  });

  it('tells whether any Authorization header came, keys or not', () => {
    expect(auth.identify('').sentHeader).toBe(false);
    expect(auth.identify('   ').sentHeader).toBe(true);
    expect(auth.identify(`Bearer ${one}`).sentHeader).toBe(true);
  });
});

describe('a key limited to scopes', () => {
  const limited: Caller = { keyId: 'k', tenants: new Set(['t1']), scope: { user_id: 'alice', run_id: 'r1' }, sentHeader: true };
  const wide: Caller = { keyId: 'k', tenants: new Set(['t1']), scope: {}, sentHeader: true };

  it('acts in its scopes whether the request names them or not, and is refused another value of one', () => {
    expect(scopeFor(limited, {})).toEqual({ user_id: 'alice', run_id: 'r1' });
    expect(scopeFor(limited, { user_id: 'alice', agent_id: 'bot' })).toEqual({ user_id: 'alice', agent_id: 'bot', run_id: 'r1' });
    const refused = refusal(() => scopeFor(limited, { run_id: 'r2' }));
    expect(refused.status).toBe(403);
    expect(refused.message).toBe('this API key may act only for run_id \'r1\'');
    expect(scopeFor(wide, { agent_id: 'bot' })).toEqual({ agent_id: 'bot' });
    expect(scopeFor({ ...wide, scope: undefined }, {})).toEqual({});
  });

  it('may not export or import the whole tenant; a tenant-wide key may', () => {
    const refused = refusal(() => requireWholeTenant(limited));
    expect(refused.status).toBe(403);
    expect(refused.message).toBe('this API key is limited to user_id \'alice\', run_id \'r1\'; export and import act on the whole tenant');
    expect(() => requireWholeTenant(wide)).not.toThrow();
    expect(() => requireWholeTenant({ ...wide, scope: undefined })).not.toThrow();
  });
});
