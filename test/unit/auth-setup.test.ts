import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HASH_PREFIX, hashApiKey } from '../../enclave/auth/keys-file.js';
import { hostStoreKeysProblem, setUpAuth, type AuthConfig } from '../../enclave/auth/setup.js';

/**
 * How the enclave starts its access control from API_KEYS_FILE (enclave/auth/setup.ts): the
 * keys it takes, what it warns the operator about, and a reload (SIGHUP) that keeps the
 * current keys when the new file is bad. api-keys.test.ts holds when open mode is allowed.
 */
const ALICE = 'alice-key-0123456789';
const BOB = 'bob-key-0123456789ab';
const lines: Array<{ level: number; msg: string; file?: string; keys?: number; plaintext?: number; problem?: string }> = [];
const log = pino({ level: 'info' }, { write: (line: string) => { lines.push(JSON.parse(line) as (typeof lines)[number]); } });
const logged = () => lines.map(({ level, msg, keys, plaintext, problem }) => ({ level, msg, ...(keys === undefined ? {} : { keys }), ...(plaintext === undefined ? {} : { plaintext }), ...(problem === undefined ? {} : { problem }) }));
const WARN = 40;
const INFO = 30;
const ERROR = 50;

let dir: string;
let file: string;
const open: AuthConfig = { allowOpen: false, teeMode: 'simulated', address: '127.0.0.1:50051' };
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'auth-setup-'));
  file = join(dir, 'keys.json');
});
afterAll(() => rm(dir, { recursive: true, force: true }));
beforeEach(() => { lines.length = 0; });

describe('without API_KEYS_FILE', () => {
  it('runs open where that is allowed, warning, and ignores a reload', () => {
    const auth = setUpAuth(open, log);
    expect(auth.authorizer.required).toBe(false);
    expect(auth.authorizer.identify('').tenants).toBeUndefined();
    auth.reload();
    expect(logged()).toEqual([
      { level: WARN, msg: 'API keys are OFF (no API_KEYS_FILE): any caller can read and write every tenant\'s memories; run like this only on a trusted machine' },
      { level: WARN, msg: 'SIGHUP ignored: no API_KEYS_FILE to reload' },
    ]);
  });

  it('refuses to start where open mode is not allowed, saying why', () => {
    expect(() => setUpAuth({ ...open, teeMode: 'nitro' }, log)).toThrow('TEE_MODE=nitro without API_KEYS_FILE: set API_KEYS_FILE, or ALLOW_OPEN=1 to run without keys');
    expect(lines).toEqual([]);
  });
});

describe('with API_KEYS_FILE', () => {
  it('takes the file\'s keys, and warns about keys held in plaintext', async () => {
    await writeFile(file, JSON.stringify({ [ALICE]: ['t1'], [`${HASH_PREFIX}${hashApiKey(BOB).toString('hex')}`]: ['t2'] }));
    const auth = setUpAuth({ ...open, apiKeysFile: file }, log);
    expect(auth.authorizer.required).toBe(true);
    expect([...auth.authorizer.identify(`Bearer ${ALICE}`).tenants!]).toEqual(['t1']);
    expect([...auth.authorizer.identify(`Bearer ${BOB}`).tenants!]).toEqual(['t2']);
    expect(logged()).toEqual([
      { level: WARN, msg: 'the API keys file holds keys in plaintext; `agent-keys` stores only their SHA-256', plaintext: 1 },
      { level: INFO, msg: 'API keys loaded: every memory and chat request needs a key for its tenant', keys: 2 },
    ]);
    expect(lines.every((l) => l.file === file)).toBe(true);
  });

  it('warns that a file without keys refuses every request', async () => {
    await writeFile(file, '{}');
    const auth = setUpAuth({ ...open, apiKeysFile: file }, log);
    expect(auth.authorizer.identify(`Bearer ${ALICE}`).refused).toBe('invalid');
    expect(logged()).toEqual([
      { level: WARN, msg: 'the API keys file holds no keys: every request that needs a key will be refused' },
      { level: INFO, msg: 'API keys loaded: every memory and chat request needs a key for its tenant', keys: 0 },
    ]);
    expect(lines.every((l) => l.file === file)).toBe(true);
  });

  it('reloads the file, and keeps the current keys when the new file is refused', async () => {
    const hashed = (key: string) => `${HASH_PREFIX}${hashApiKey(key).toString('hex')}`;
    await writeFile(file, JSON.stringify({ [hashed(ALICE)]: ['t1'] }));
    const auth = setUpAuth({ ...open, apiKeysFile: file }, log);
    await writeFile(file, JSON.stringify({ [hashed(BOB)]: ['t2'], [hashed('carol-key-0123456789')]: ['t3'] }));
    auth.reload();
    expect(auth.authorizer.identify(`Bearer ${ALICE}`).refused).toBe('invalid');
    expect([...auth.authorizer.identify(`Bearer ${BOB}`).tenants!]).toEqual(['t2']);
    await writeFile(file, '{ not json');
    auth.reload();
    expect([...auth.authorizer.identify(`Bearer ${BOB}`).tenants!]).toEqual(['t2']);
    expect(logged().slice(1)).toEqual([
      { level: INFO, msg: 'API keys reloaded', keys: 2 },
      { level: ERROR, msg: 'API keys file refused on reload; keeping the keys already loaded', problem: expect.stringMatching(/^invalid API keys file:\n {2}not valid JSON/) },
    ]);
  });

  it('refuses to start on a file it cannot read as keys', async () => {
    await writeFile(file, '[]');
    expect(() => setUpAuth({ ...open, apiKeysFile: file }, log)).toThrow('must be a JSON object mapping each key to an array of tenant ids');
  });
});

describe('API_KEYS_BLOB', () => {
  it('needs OPERATOR_PUBKEY, and is the only source of keys', () => {
    expect(hostStoreKeysProblem({})).toBeUndefined();
    expect(hostStoreKeysProblem({ apiKeysFile: file })).toBeUndefined();
    expect(hostStoreKeysProblem({ apiKeysBlob: 'api-keys.json', operatorPubkey: 'k' })).toBeUndefined();
    expect(hostStoreKeysProblem({ apiKeysBlob: 'api-keys.json', apiKeysFile: file, operatorPubkey: 'k' })).toBe('API_KEYS_BLOB and API_KEYS_FILE are two sources of keys: set one');
    for (const operatorPubkey of [undefined, '']) {
      expect(hostStoreKeysProblem({ apiKeysBlob: 'api-keys.json', ...(operatorPubkey === undefined ? {} : { operatorPubkey }) })).toBe(
        'API_KEYS_BLOB needs OPERATOR_PUBKEY: the signed keys file is checked against it (without it the operator key pair would be kept by the host, which could then sign keys)',
      );
    }
  });
});
