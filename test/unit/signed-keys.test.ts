import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nacl from 'tweetnacl';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startHostStoreKeys, type HostStoreKeys } from '../../enclave/auth/host-store-keys.js';
import { HASH_PREFIX, hashApiKey } from '../../enclave/auth/keys-file.js';
import {
  formatSignedKeys, SIGNED_KEYS_TYPE, SignedKeysError, signingBytes, verifySignedKeys, type SignedKeysPayload,
} from '../../enclave/auth/signed-keys.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';

/**
 * The API keys file the host store keeps, signed by the operator (enclave/auth/signed-keys.ts)
 * and polled by the enclave (host-store-keys.ts): the host can serve any bytes, and only a
 * file the operator signed, newer than the one loaded, changes who may act for which tenant.
 * test/integration/signed-keys.test.ts runs the same through a started service.
 */
const operator = nacl.sign.keyPair();
const sign = (message: Uint8Array) => nacl.sign.detached(message, operator.secretKey);
const hashed = (key: string) => `${HASH_PREFIX}${hashApiKey(key).toString('hex')}`;
const ALICE = 'alice-key-0123456789';
const BOB = 'bob-key-0123456789ab';
const payload = (version: number, keys: SignedKeysPayload['keys']): SignedKeysPayload => ({ type: SIGNED_KEYS_TYPE, version, keys });
const signed = (version: number, keys: SignedKeysPayload['keys'], by = sign) => formatSignedKeys(payload(version, keys), by);
/** The file's JSON with `change` applied after signing: what a host could serve. */
const edited = (text: string, change: (file: Record<string, unknown>) => void) => {
  const file = JSON.parse(text) as Record<string, unknown>;
  change(file);
  return JSON.stringify(file);
};
const refusal = (text: string) => {
  try {
    verifySignedKeys(text, operator.publicKey);
  } catch (err) {
    expect(err).toBeInstanceOf(SignedKeysError);
    expect((err as Error).name).toBe('SignedKeysError');
    return (err as Error).message;
  }
  throw new Error('accepted');
};

describe('a signed keys file', () => {
  it('is signed over a domain tag and the canonical JSON of its type, version and keys, whatever its layout', () => {
    const keys = { [hashed(ALICE)]: ['t1', 't2'], [hashed(BOB)]: { tenants: ['t3'], user_id: 'u1' } };
    const text = signed(3, keys);
    const signature = Buffer.from((JSON.parse(text) as { signature: string }).signature, 'base64');
    // Object keys sorted at every depth, arrays in order, no spaces.
    const members = [`"${hashed(ALICE)}":["t1","t2"]`, `"${hashed(BOB)}":{"tenants":["t3"],"user_id":"u1"}`].sort();
    const canonical = `{"keys":{${members.join(',')}},"type":"${SIGNED_KEYS_TYPE}","version":3}`;
    expect(Buffer.from(signingBytes(payload(3, keys))).toString('utf8')).toBe(`${SIGNED_KEYS_TYPE}\0${canonical}`);
    expect(nacl.sign.detached.verify(Buffer.from(`agent-service/api-keys/v1\0${canonical}`), signature, operator.publicKey)).toBe(true);
    // The same file laid out otherwise (fields and keys in another order, other spacing) is the same file.
    const relaid = JSON.stringify({ signature: signature.toString('base64'), version: 3, keys: { [hashed(BOB)]: { user_id: 'u1', tenants: ['t3'] }, [hashed(ALICE)]: ['t1', 't2'] }, type: SIGNED_KEYS_TYPE });
    for (const file of [text, relaid]) {
      const verified = verifySignedKeys(file, operator.publicKey);
      expect(verified.version).toBe(3);
      expect(verified.entries.map((e) => [e.hash.toString('hex'), e.tenants, e.scope, e.plaintext]).sort()).toEqual([
        [hashApiKey(ALICE).toString('hex'), ['t1', 't2'], {}, false],
        [hashApiKey(BOB).toString('hex'), ['t3'], { user_id: 'u1' }, false],
      ].sort());
    }
  });

  it('is refused when anything signed was changed: version, a tenant, a scope widened, a key added', () => {
    const text = signed(2, { [hashed(ALICE)]: { tenants: ['t1'], user_id: 'u1' } });
    const changes: Array<(file: Record<string, unknown>) => void> = [
      (f) => { f.version = 3; },
      (f) => { f.keys = { [hashed(ALICE)]: { tenants: ['t1', 't2'], user_id: 'u1' } }; },
      (f) => { f.keys = { [hashed(ALICE)]: ['t1'] }; },
      (f) => { f.keys = { [hashed(ALICE)]: { tenants: ['t1'], user_id: 'u1' }, [hashed(BOB)]: ['t1'] }; },
      (f) => { f.keys = { [hashed(ALICE)]: null }; },
    ];
    for (const change of changes) expect(refusal(edited(text, change))).toBe('the signature does not verify with OPERATOR_PUBKEY');
    // Fields outside type, version and keys are not signed, and not read.
    expect(verifySignedKeys(edited(text, (f) => { f.comment = 'anything'; }), operator.publicKey).version).toBe(2);
  });

  it('is refused when signed by another key, or when its signature is not one', () => {
    const other = nacl.sign.keyPair();
    const text = signed(1, { [hashed(ALICE)]: ['t1'] });
    expect(refusal(signed(1, { [hashed(ALICE)]: ['t1'] }, (m) => nacl.sign.detached(m, other.secretKey)))).toBe('the signature does not verify with OPERATOR_PUBKEY');
    const signature = Buffer.from((JSON.parse(text) as { signature: string }).signature, 'base64');
    for (const bad of [signature.subarray(0, 63), Buffer.concat([signature, Buffer.of(0)]), Buffer.alloc(0)]) {
      expect(refusal(edited(text, (f) => { f.signature = bad.toString('base64'); }))).toBe('the signature does not verify with OPERATOR_PUBKEY');
    }
    expect(refusal(edited(text, (f) => { delete f.signature; }))).toBe('no signature');
    expect(refusal(edited(text, (f) => { f.signature = 7; }))).toBe('no signature');
  });

  it('is refused, before its signature is checked, when it is not a signed keys file at all', () => {
    const text = signed(1, { [hashed(ALICE)]: ['t1'] });
    expect(refusal('{')).toBe('not JSON');
    const notOne = `not a signed keys file (type is not "${SIGNED_KEYS_TYPE}")`;
    for (const other of ['null', '[]', '"text"', '7', edited(text, (f) => { f.type = 'agent-service/api-keys/v2'; }), edited(text, (f) => { delete f.type; })]) {
      expect(refusal(other), other).toBe(notOne);
    }
    for (const version of [0, -1, 1.5, '1', null, 2 ** 53]) {
      expect(refusal(edited(text, (f) => { f.version = version; })), String(version)).toBe('version must be a positive integer');
    }
    expect(refusal(edited(text, (f) => { delete f.version; }))).toBe('version must be a positive integer');
    for (const keys of [null, [], 'k', 1]) {
      expect(refusal(edited(text, (f) => { f.keys = keys; })), JSON.stringify(keys)).toBe('keys must be an object');
    }
  });

  it('is refused, though signed, when its keys are invalid or one is held in plaintext', () => {
    expect(refusal(signed(1, { 'sha256:00': ['t1'] }))).toBe('invalid API keys file:\n  entry 1: "sha256:" must be followed by 64 hex digits');
    expect(refusal(signed(1, { [ALICE]: ['t1'] }))).toBe('holds a key in plaintext; a signed file holds only sha256: hashes (agent-keys writes them)');
    expect(verifySignedKeys(signed(1, {}), operator.publicKey)).toEqual({ version: 1, entries: [] });
  });
});

describe('keys kept in the host store', () => {
  let dir: string;
  let blobs: FsBlobStore;
  const lines: Array<{ level: number; msg: string; problem?: string; version?: number }> = [];
  const log = pino({ level: 'info' }, { write: (line: string) => { lines.push(JSON.parse(line) as (typeof lines)[number]); } });
  const NAME = 'api-keys.json';
  const put = (text: string) => blobs.put(NAME, Buffer.from(text));
  const start = () => startHostStoreKeys({ blobs, name: NAME, operatorKey: operator.publicKey, pollMs: 3_600_000, log });
  /** Which of ALICE and BOB the authorizer takes, with their tenants. */
  const who = (keys: HostStoreKeys) => Object.fromEntries([['alice', ALICE], ['bob', BOB]].map(([name, key]) => {
    const caller = keys.authorizer.identify(`Bearer ${key}`);
    return [name, caller.refused ?? [...caller.tenants!]];
  }));
  const errors = () => lines.filter((l) => l.level === 50).map((l) => {
    expect(l.msg).toBe('API keys file in the host store refused; keeping the keys already loaded');
    return l.problem;
  });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'signed-keys-'));
    blobs = new FsBlobStore(dir);
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('are required at start: a missing or refused file stops the enclave, saying which and why', async () => {
    await blobs.delete(NAME);
    await expect(start()).rejects.toThrow(`no ${NAME} in the host store: sign one with \`agent-keys sign\` and put it there (deploy/README.md, "API keys")`);
    await put(JSON.stringify({ [hashed(ALICE)]: ['t1'] }));
    await expect(start()).rejects.toThrow(`${NAME} in the host store refused: not a signed keys file (type is not "${SIGNED_KEYS_TYPE}")`);
  });

  it('change only for a newer file the operator signed; anything else the host serves is refused once and the keys stay', async () => {
    await put(signed(2, { [hashed(ALICE)]: ['t1'] }));
    const keys = await start();
    try {
      expect(keys.authorizer.required).toBe(true);
      expect(who(keys)).toEqual({ alice: ['t1'], bob: 'invalid' });
      expect(lines.at(-1)).toMatchObject({ msg: expect.stringMatching(/^API keys loaded from the host store/), version: 2 });

      // Newer and signed: alice revoked, bob added, without a restart (reload, as a poll would).
      await put(signed(3, { [hashed(BOB)]: ['t2'] }));
      keys.reload();
      await keys.check();
      expect(who(keys)).toEqual({ alice: 'invalid', bob: ['t2'] });
      expect(lines.at(-1)).toMatchObject({ msg: 'API keys reloaded from the host store', version: 3 });

      // The host puts back the older signed file, to bring alice back: refused, reported once however often it is polled.
      lines.length = 0;
      await put(signed(2, { [hashed(ALICE)]: ['t1'] }));
      await keys.check();
      await keys.check();
      expect(who(keys)).toEqual({ alice: 'invalid', bob: ['t2'] });
      expect(errors()).toEqual(['version 2 is older than the loaded version 3']);

      // The same version signed again with other keys is not newer: the loaded keys stay, and that is no error.
      await put(signed(3, { [hashed(ALICE)]: ['t1'] }));
      await keys.check();
      expect(who(keys)).toEqual({ alice: 'invalid', bob: ['t2'] });
      expect(errors()).toHaveLength(1);

      // Unsigned, or gone: refused, once each, and the keys stay.
      await put(JSON.stringify({ [hashed(ALICE)]: ['t1'] }));
      await keys.check();
      await blobs.delete(NAME);
      await keys.check();
      await keys.check();
      expect(who(keys)).toEqual({ alice: 'invalid', bob: ['t2'] });
      expect(errors()).toEqual([
        'version 2 is older than the loaded version 3',
        `not a signed keys file (type is not "${SIGNED_KEYS_TYPE}")`,
        `no ${NAME} in the host store: sign one with \`agent-keys sign\` and put it there (deploy/README.md, "API keys")`,
      ]);

      // Back, then gone again: a problem is reported again once something else happened in between.
      await put(signed(4, { [hashed(ALICE)]: ['t9'] }));
      await keys.check();
      expect(who(keys)).toEqual({ alice: ['t9'], bob: 'invalid' });
      await blobs.delete(NAME);
      await keys.check();
      expect(errors()).toHaveLength(4);
    } finally {
      keys.stop();
    }
  });

  it('are read again every pollMs until stopped', async () => {
    await put(signed(5, { [hashed(ALICE)]: ['t1'] }));
    let reads = 0;
    const counted = Object.assign(Object.create(blobs) as FsBlobStore, { read: (name: string) => { reads++; return blobs.read(name); } });
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const keys = await startHostStoreKeys({ blobs: counted, name: NAME, operatorKey: operator.publicKey, pollMs: 1000, log });
      expect(reads).toBe(1);
      vi.advanceTimersByTime(999);
      expect(reads).toBe(1);
      vi.advanceTimersByTime(1);
      expect(reads).toBe(2);
      await keys.check();
      vi.advanceTimersByTime(1000);
      expect(reads).toBe(3);
      await keys.check();
      keys.reload();
      expect(reads).toBe(4);
      await keys.check();
      keys.stop();
      vi.advanceTimersByTime(5000);
      expect(reads).toBe(4);
    } finally {
      vi.useRealTimers();
    }
  });
});
