/**
 * API keys kept by the host, signed by the operator (issue 32, finding 4). The host keeps
 * the keys file in its store and can replace it at will; the enclave must take only a file
 * signed by OPERATOR_PUBKEY, newer than the one it holds, and keep serving its current keys
 * when it refuses one. Real host store, enclave and proxy; the test plays the host by
 * writing into the host store's folder, and the operator with `agent-keys sign`.
 */
import { generateKeyPairSync } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nacl from 'tweetnacl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../enclave/auth/keys-file.js';
import { hostStoreKeysProblem } from '../../enclave/auth/setup.js';
import { formatSignedKeys, SIGNED_KEYS_TYPE } from '../../enclave/auth/signed-keys.js';
import { request } from '../helpers/http.js';
import { agentKeys, issueKey } from '../helpers/processes.js';
import { startService, waitFor, type RunningService } from '../helpers/service.js';

const BLOB = 'api-keys.signed.json';
let svc: RunningService;
let dir: string;
let dataDir: string;
let keysFile: string;
let operatorPem: string;
let keyA: string;
let version1: string;
const intruderKey = 'agk_the-hosts-own-key-000000000000000000';

const works = async (key: string) => (await request(svc.baseUrl, 'GET', '/v1/memory?tenant_id=alpha&query=note', undefined, { authorization: `Bearer ${key}` })).status;
/** The operator signs on their own machine, then copies the file into the host store's folder. */
const sign = (...extra: string[]) => {
  const r = agentKeys(['sign', '--file', keysFile, '--key', operatorPem, '--out', join(dir, BLOB), ...extra]);
  if (r.status !== 0) throw new Error(`agent-keys sign: ${r.stderr}`);
  copyFileSync(join(dir, BLOB), join(dataDir, BLOB));
};
/** The host replaces the blob as its store would: a whole new file, renamed into place. */
const hostWrites = (text: string) => {
  writeFileSync(join(dataDir, `${BLOB}.new`), text);
  renameSync(join(dataDir, `${BLOB}.new`), join(dataDir, BLOB));
};
const count = (text: string) => svc.output().split(text).length - 1;
async function afterNext(message: string, action: () => void) {
  const before = count(message);
  action();
  await waitFor(async () => count(message) > before, 30_000, () => `waiting for "${message}"\n${svc.output()}`);
}
const REFUSED = 'API keys file in the host store refused';
const RELOADED = 'API keys reloaded from the host store';

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'signed-keys-'));
  dataDir = mkdtempSync(join(tmpdir(), 'signed-keys-store-'));
  keysFile = join(dir, 'keys.json');
  const pair = generateKeyPairSync('ed25519');
  operatorPem = join(dir, 'operator.pem');
  writeFileSync(operatorPem, pair.privateKey.export({ type: 'pkcs8', format: 'pem' }));
  const operatorPubkey = pair.publicKey.export({ type: 'spki', format: 'der' }).subarray(-32).toString('base64');
  keyA = issueKey(keysFile, ['alpha']);
  sign('--version', '1');
  version1 = readFileSync(join(dataDir, BLOB), 'utf8');
  svc = await startService({ DATA_DIR: dataDir, OPERATOR_PUBKEY: operatorPubkey, API_KEYS_BLOB: BLOB, API_KEYS_POLL_SECONDS: '1' });
});
afterAll(async () => {
  await svc?.stop();
  rmSync(dir, { recursive: true, force: true });
  rmSync(dataDir, { recursive: true, force: true });
});

describe('API keys from the host store, signed by the operator', () => {
  it('serves the keys of the signed file, which holds only hashes', async () => {
    expect(await works(keyA)).toBe(200);
    expect(await works(intruderKey)).toBe(401);
    expect(version1).not.toContain(keyA);
  });

  it('refuses a file the host wrote without a signature, and keeps the current keys', async () => {
    await afterNext(REFUSED, () => hostWrites(JSON.stringify({ [`sha256:${hashApiKey(intruderKey).toString('hex')}`]: ['alpha'] })));
    expect(svc.output()).toContain('not a signed keys file');
    expect(await works(intruderKey)).toBe(401);
    expect(await works(keyA)).toBe(200);
  });

  it('refuses a file signed by another key, even one that names a higher version', async () => {
    const other = nacl.sign.keyPair();
    const forged = formatSignedKeys({ type: SIGNED_KEYS_TYPE, version: 1_000_000, keys: { [`sha256:${hashApiKey(intruderKey).toString('hex')}`]: ['alpha'] } },
      (message) => nacl.sign.detached(message, other.secretKey));
    await afterNext(REFUSED, () => hostWrites(forged));
    expect(svc.output()).toContain('the signature does not verify with OPERATOR_PUBKEY');
    expect(await works(intruderKey)).toBe(401);
    expect(await works(keyA)).toBe(200);
  });

  it('loads a newer signed file without a restart, and refuses the older one the host puts back (a revoked key stays revoked)', async () => {
    const pid = svc.enclave.pid;
    const keyC = issueKey(keysFile, ['alpha']);
    expect(agentKeys(['revoke', '--key', keyA, '--file', keysFile]).status).toBe(0);
    await afterNext(RELOADED, () => sign('--version', '2'));
    expect(await works(keyC)).toBe(200);
    expect(await works(keyA)).toBe(401);

    await afterNext(REFUSED, () => hostWrites(version1));
    expect(svc.output()).toContain('version 1 is older than the loaded version 2');
    expect(await works(keyA)).toBe(401);
    expect(await works(keyC)).toBe(200);
    expect(svc.enclave.pid).toBe(pid);
  });

  it('agent-keys sign refuses a version that is not above the one already signed', () => {
    const r = agentKeys(['sign', '--file', keysFile, '--key', operatorPem, '--out', join(dir, BLOB), '--version', '2']);
    expect(r.stderr).toContain('--version 2 is not above version 2');
    expect(r.status).toBe(1);
  });

  it('carries a key\'s scopes, which the host cannot widen without breaking the signature', async () => {
    const tenantWide = issueKey(keysFile, ['alpha']);
    const issued = agentKeys(['issue', '--file', keysFile, '--tenant', 'alpha', '--user-id', 'alice']);
    expect(issued.status, issued.stderr).toBe(0);
    const aliceKey = issued.stdout.trim();
    await afterNext(RELOADED, () => sign('--version', '3'));
    const call = (key: string, method: string, path: string, body?: unknown) => request(svc.baseUrl, method, path, body, { authorization: `Bearer ${key}` });
    for (const user_id of ['alice', 'bob']) expect((await call(tenantWide, 'POST', '/v1/memory', { tenant_id: 'alpha', content: `a note of ${user_id}`, user_id })).status).toBe(200);
    const seen = async () => (await call(aliceKey, 'GET', '/v1/memory?tenant_id=alpha')).body.data.map((m: { user_id?: string }) => m.user_id);
    expect(await seen()).toEqual(['alice']);

    // The host drops the key's user_id from the signed file: refused, and the key stays limited.
    const signed = JSON.parse(readFileSync(join(dataDir, BLOB), 'utf8'));
    for (const grant of Object.values(signed.keys) as Array<string[] | { user_id?: string }>) if (!Array.isArray(grant)) delete grant.user_id;
    await afterNext(REFUSED, () => hostWrites(JSON.stringify({ ...signed, version: 4 })));
    expect(await seen()).toEqual(['alice']);
  });
});

describe('hostStoreKeysProblem', () => {
  it('refuses API_KEYS_BLOB without OPERATOR_PUBKEY (the local key pair is kept by the host) or beside API_KEYS_FILE', () => {
    expect(hostStoreKeysProblem({ apiKeysBlob: BLOB })).toContain('API_KEYS_BLOB needs OPERATOR_PUBKEY');
    expect(hostStoreKeysProblem({ apiKeysBlob: BLOB, apiKeysFile: 'k.json', operatorPubkey: 'x' })).toContain('set one');
    expect(hostStoreKeysProblem({ apiKeysFile: 'k.json' })).toBeUndefined();
  });
});
