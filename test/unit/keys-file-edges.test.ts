import { describe, expect, it } from 'vitest';
import { entryId, formatKeysFile, hashApiKey, isValidKey, KeysFileError, parseKeysFile } from '../../enclave/auth/keys-file.js';

/**
 * The API keys file (enclave/auth/keys-file.ts) at its edges: keys at the limits of their
 * length and alphabet, hashes in either case, and a file with several faults reported all at
 * once, each by entry and key id, never by the key. api-keys.test.ts holds the common cases.
 */
const KEY = 'key-a-0123456789abcdef';
const problems = (value: unknown) => {
  try {
    parseKeysFile(JSON.stringify(value));
  } catch (err) {
    expect(err).toBeInstanceOf(KeysFileError);
    expect((err as Error).name).toBe('KeysFileError');
    return (err as KeysFileError).problems;
  }
  throw new Error('accepted');
};

describe('keys at their limits', () => {
  it('takes 16 to 512 characters of the Bearer token alphabet, with = only at the end', () => {
    for (const key of ['a'.repeat(16), 'b'.repeat(512), 'AZaz09-._~+/0123', 'abcdefghijklmnop==']) expect(isValidKey(key), key).toBe(true);
    for (const key of ['a'.repeat(15), 'b'.repeat(513), 'abcdefgh=ijklmnop', ' abcdefghijklmnop', 'abcdefghijklmnop ', 'abcdefghijklmnop\n', 'abcdefghijklmnopé']) {
      expect(isValidKey(key), JSON.stringify(key)).toBe(false);
    }
  });

  it('reads a hash in upper or lower case as the same key, and refuses one a digit short or long', () => {
    const hex = hashApiKey(KEY).toString('hex');
    for (const name of [`sha256:${hex}`, `sha256:${hex.toUpperCase()}`]) expect(parseKeysFile(JSON.stringify({ [name]: ['t'] }))[0].hash).toEqual(hashApiKey(KEY));
    for (const name of [`sha256:${hex.slice(1)}`, `sha256:${hex}0`, `sha256: ${hex.slice(1)}`]) {
      expect(problems({ [name]: ['t'] })).toEqual(['entry 1: "sha256:" must be followed by 64 hex digits']);
    }
  });

  it('keeps a tenant named twice once', () => {
    expect(parseKeysFile(JSON.stringify({ [KEY]: ['t1', 't2', 't1'] }))[0].tenants).toEqual(['t1', 't2']);
  });
});

describe('a file with faults', () => {
  it('names every fault at once, by entry and key id', () => {
    const id = entryId(hashApiKey(KEY));
    const other = 'key-b-0123456789abcdef';
    const otherId = entryId(hashApiKey(other));
    const third = 'key-c-0123456789abcdef';
    const thirdId = entryId(hashApiKey(third));
    const fourth = 'key-d-0123456789abcdef';
    const fourthId = entryId(hashApiKey(fourth));
    const text = JSON.stringify({
      short: ['t'],
      [KEY]: null,
      [other]: { tenants: ['t'], user_id: 7 },
      [third]: ['t', 'a b'],
      [fourth]: { tenants: 't' },
      [`sha256:${hashApiKey(other).toString('hex')}`]: ['u'],
    });
    let error: KeysFileError | undefined;
    try {
      parseKeysFile(text);
    } catch (err) {
      error = err as KeysFileError;
    }
    const expected = [
      'entry 1: a key must be 16–512 characters of A-Z a-z 0-9 - . _ ~ + / (trailing =), or "sha256:<64 hex>"',
      `entry 2 (${id}): tenants must be a non-empty array of tenant ids`,
      `entry 3 (${otherId}): user_id must be 1–128 characters of A-Z a-z 0-9 . _ : @ -`,
      `entry 4 (${thirdId}): invalid tenant id "a b": 1–128 characters of A-Z a-z 0-9 . _ : @ -`,
      `entry 5 (${fourthId}): tenants must be a non-empty array of tenant ids`,
      `entry 6 (${otherId}): the same key appears twice`,
    ];
    expect(error!.problems).toEqual(expected);
    expect(error!.message).toBe(`invalid API keys file:\n  ${expected.join('\n  ')}`);
    for (const key of [KEY, other, third, fourth]) expect(error!.message).not.toContain(key);
  });

  it('refuses scope values that are not ids, and fields that are not scopes', () => {
    const id = entryId(hashApiKey(KEY));
    expect(problems({ [KEY]: { tenants: ['t'], run_id: 'r'.repeat(129) } })).toEqual([`entry 1 (${id}): run_id must be 1–128 characters of A-Z a-z 0-9 . _ : @ -`]);
    expect(problems({ [KEY]: { tenants: ['t'], agent_id: '' } })).toEqual([`entry 1 (${id}): agent_id must be 1–128 characters of A-Z a-z 0-9 . _ : @ -`]);
    expect(problems({ [KEY]: { tenants: ['t'], tenant_id: 'x' } })).toEqual([
      `entry 1 (${id}): unknown field "tenant_id": an entry holds tenants and optionally user_id, agent_id, run_id, memory_infer`,
    ]);
    expect(parseKeysFile(JSON.stringify({ [KEY]: { tenants: ['t'], agent_id: 'a'.repeat(128) } }))[0].scope).toEqual({ agent_id: 'a'.repeat(128) });
    expect(problems({ [KEY]: [7] })).toEqual([`entry 1 (${id}): invalid tenant id 7: 1–128 characters of A-Z a-z 0-9 . _ : @ -`]);
  });

  it('takes memory_infer (true or false) as the key\'s chats\' default, and nothing else for it', () => {
    const id = entryId(hashApiKey(KEY));
    expect(parseKeysFile(JSON.stringify({ [KEY]: { tenants: ['t'], memory_infer: true } }))[0]).toMatchObject({ tenants: ['t'], scope: {}, memoryInfer: true });
    expect(parseKeysFile(JSON.stringify({ [KEY]: { tenants: ['t'], user_id: 'u', memory_infer: false } }))[0]).toMatchObject({ scope: { user_id: 'u' }, memoryInfer: false });
    expect(parseKeysFile(JSON.stringify({ [KEY]: ['t'] }))[0].memoryInfer).toBe(false);
    expect(problems({ [KEY]: { tenants: ['t'], memory_infer: 'yes' } })).toEqual([`entry 1 (${id}): memory_infer must be true or false`]);
  });

  it('refuses what is not an object of entries, saying what it should be', () => {
    for (const text of ['null', '"keys"', '[]']) {
      expect(() => parseKeysFile(text), text).toThrow(new KeysFileError(['must be a JSON object mapping each key to an array of tenant ids']));
    }
    expect(() => parseKeysFile('{')).toThrow(/^invalid API keys file:\n {2}not valid JSON \(/);
  });
});

describe('the file agent-keys writes', () => {
  it('is one entry a line, two spaces in, in the order given', () => {
    const hash = `sha256:${'ab'.repeat(32)}`;
    expect(formatKeysFile({ [KEY]: ['t1'], [hash]: { tenants: ['z'], agent_id: 'bot' } })).toBe(
      `{\n  "${KEY}": ["t1"],\n  "${hash}": {"tenants":["z"],"agent_id":"bot"}\n}\n`,
    );
  });
});
