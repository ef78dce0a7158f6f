#!/usr/bin/env node
/**
 * agent-keys: the operator's tool for the enclave's API keys file. Issues random keys
 * (printed once; the file keeps only their SHA-256), revokes them and lists them.
 * Every change rewrites the file atomically (temporary file, fsync, rename) under a lock
 * file, so the enclave never reads a half-written file and two edits cannot interleave.
 * Exit status: 0 done, 1 refused (bad file, unknown key, lock held), 2 usage error.
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, realpathSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  entryId, formatKeysFile, grantTenants, type KeyGrant, generateApiKey, hashApiKey, HASH_PREFIX, KeysFileError, parseKeysFile,
} from '../enclave/auth/keys-file.js';
import { SCOPE_FIELDS } from '../enclave/memory/types.js';
import { formatSignedKeys, SIGNED_KEYS_TYPE, verifySignedKeys } from '../enclave/auth/signed-keys.js';
import { parseOperatorSigningKey } from './lib/operator-signing-key.js';

export const USAGE = `Usage:
  agent-keys issue --tenant <id> [--tenant <id> ...] [--user-id <id>] [--agent-id <id>] [--run-id <id>] [--memory-infer] [--file <path>]
  agent-keys revoke (--key <key> | --id <sha256:hex-prefix>) [--file <path>]
  agent-keys list [--file <path>]
  agent-keys sign --key <operator key> --out <signed file> [--version <n>] [--file <path>]

--file defaults to $API_KEYS_FILE. "issue" prints the new key on stdout, once: the file
keeps only its SHA-256. --user-id, --agent-id and --run-id limit the key to those
memory scopes inside its tenants (docs/api.md, "Scopes"). --memory-infer makes the key's
chat completions keep what the conversation says worth remembering, unless a request sends
"memory_infer": false (docs/api.md, "Extract memories from a conversation"). The enclave reads the file at start; after a change, restart it
or send it SIGHUP (kill -HUP <enclave pid>).

"sign" turns the file into the signed file an enclave with OPERATOR_PUBKEY and
API_KEYS_BLOB reads from the host store (deploy/README.md, "API keys"): --key is the
operator's private key (the PEM whose public half is OPERATOR_PUBKEY); the version is
--version, or the current time in seconds, and always above the one already in --out.
Copy the result into the host store's folder; the enclave loads it within
API_KEYS_POLL_SECONDS, without a restart, and refuses any older version.`;

class Refused extends Error {}
class Usage extends Error {}

type KeysMap = Record<string, KeyGrant>;

export async function main(argv: string[], out = process.stdout, err = process.stderr): Promise<number> {
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        file: { type: 'string' },
        tenant: { type: 'string', multiple: true },
        'user-id': { type: 'string' },
        'agent-id': { type: 'string' },
        'run-id': { type: 'string' },
        'memory-infer': { type: 'boolean' },
        key: { type: 'string' },
        id: { type: 'string' },
        out: { type: 'string' },
        version: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help) {
      out.write(`${USAGE}\n`);
      return 0;
    }
    const [command, ...extra] = positionals;
    if (extra.length) throw new Usage(`unexpected argument: ${extra[0]}`);
    const file = values.file ?? process.env.API_KEYS_FILE;
    if (!file) throw new Usage('no keys file: pass --file or set API_KEYS_FILE');
    const path = resolve(file);

    switch (command) {
      case 'issue': {
        const tenants = values.tenant ?? [];
        if (tenants.length === 0) throw new Usage('issue needs at least one --tenant');
        const key = generateApiKey();
        const name = `${HASH_PREFIX}${hashApiKey(key).toString('hex')}`;
        const scope = Object.fromEntries(SCOPE_FIELDS.flatMap((f) => {
          const value = values[f.replace('_', '-') as 'user-id' | 'agent-id' | 'run-id'];
          return value === undefined ? [] : [[f, value]];
        }));
        const infer = values['memory-infer'] === true ? { memory_infer: true } : {};
        const grant: KeyGrant = Object.keys(scope).length || values['memory-infer'] ? { tenants: [...new Set(tenants)], ...scope, ...infer } : [...new Set(tenants)];
        edit(path, (map) => ({ ...map, [name]: grant }), true);
        out.write(`${key}\n`);
        err.write(`issued ${entryId(hashApiKey(key))} for ${tenants.join(', ')} in ${path}\n`
          + 'This is the only time the key is shown. Restart the enclave or send it SIGHUP to apply.\n');
        return 0;
      }
      case 'revoke': {
        if ((values.key === undefined) === (values.id === undefined)) throw new Usage('revoke needs exactly one of --key or --id');
        let revoked: string[] = [];
        edit(path, (map) => {
          const entries = Object.entries(map);
          const matches = values.key !== undefined ? matchKey(entries, values.key) : matchId(entries, values.id!);
          revoked = matches.map(([name]) => entryId(entryHash(name)));
          const names = new Set(matches.map(([name]) => name));
          return Object.fromEntries(entries.filter(([name]) => !names.has(name)));
        }, false);
        err.write(`revoked ${revoked.join(', ')} in ${path}\nRestart the enclave or send it SIGHUP to apply.\n`);
        return 0;
      }
      case 'list': {
        if (!existsSync(path)) throw new Refused(`${path} does not exist`);
        const map = readMap(path);
        for (const [name, grant] of Object.entries(map)) {
          const plain = name.startsWith(HASH_PREFIX) ? '' : '  (key stored in plaintext)';
          const scopes = Array.isArray(grant) ? '' : SCOPE_FIELDS.filter((f) => grant[f] !== undefined).map((f) => `  ${f}=${grant[f]}`).join('') + (grant.memory_infer ? '  memory_infer' : '');
          out.write(`${entryId(entryHash(name))}  ${grantTenants(grant).join(',')}${scopes}${plain}\n`);
        }
        return 0;
      }
      case 'sign': {
        if (!values.key || !values.out) throw new Usage('sign needs --key <operator key> and --out <signed file>');
        if (!existsSync(path)) throw new Refused(`${path} does not exist`);
        const operator = parseOperatorSigningKey(readFileSync(values.key, 'utf8'), values.key);
        const version = signedVersion(values.out, values.version, operator.publicKey);
        const text = formatSignedKeys({ type: SIGNED_KEYS_TYPE, version, keys: readMap(path) }, operator.sign);
        verifySignedKeys(text, operator.publicKey); // what the enclave will check, before anything is written
        writeAtomically(resolve(values.out), text);
        err.write(`signed ${path} as version ${version} into ${values.out} (operator key ${Buffer.from(operator.publicKey).toString('base64')})\n`
          + 'Copy it into the host store\'s folder as API_KEYS_BLOB; the enclave loads it within API_KEYS_POLL_SECONDS.\n');
        return 0;
      }
      default:
        throw new Usage(command ? `unknown command: ${command}` : 'missing command');
    }
  } catch (e) {
    if (e instanceof Usage || (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      err.write(`agent-keys: ${(e as Error).message}\n\n${USAGE}\n`);
      return 2;
    }
    err.write(`agent-keys: ${(e as Error).message}\n`);
    return 1;
  }
}

function entryHash(name: string): Buffer {
  return name.startsWith(HASH_PREFIX) ? Buffer.from(name.slice(HASH_PREFIX.length), 'hex') : hashApiKey(name);
}

function matchKey(entries: [string, KeyGrant][], key: string): [string, KeyGrant][] {
  const hash = hashApiKey(key);
  const found = entries.filter(([name]) => entryHash(name).equals(hash));
  if (!found.length) throw new Refused('no such key in the file');
  return found;
}

function matchId(entries: [string, KeyGrant][], id: string): [string, KeyGrant][] {
  const prefix = id.toLowerCase().replace(/^sha256:/, '');
  if (!/^[0-9a-f]{8,64}$/.test(prefix)) throw new Usage('--id must be at least 8 hex digits of the key\'s SHA-256 (as shown by list)');
  const found = entries.filter(([name]) => entryHash(name).toString('hex').startsWith(prefix));
  if (found.length === 0) throw new Refused(`no key with id sha256:${prefix}`);
  if (found.length > 1) throw new Refused(`sha256:${prefix} matches ${found.length} keys; give more digits`);
  return found;
}

/**
 * The next version: --version or the time in seconds, refused unless above the version of
 * the file already at `out`. That file counts only if this operator key signed it: `out` may
 * be in the host's folder, and a version the host wrote must not steer ours.
 */
function signedVersion(out: string, given: string | undefined, operatorKey: Uint8Array): number {
  let previous = 0;
  if (existsSync(out)) {
    try {
      previous = verifySignedKeys(readFileSync(out, 'utf8'), operatorKey).version;
    } catch {
      previous = 0; // not ours: the enclave will refuse it too
    }
  }
  if (given === undefined) return Math.max(Math.floor(Date.now() / 1000), previous + 1);
  if (!/^[1-9]\d{0,15}$/.test(given)) throw new Usage('--version must be a positive integer');
  const version = Number(given);
  if (version <= previous) throw new Refused(`--version ${version} is not above version ${previous} of ${out}: the enclave would refuse it`);
  return version;
}

/** Reads and checks the file exactly as the enclave will; an invalid file is not edited. */
function readMap(path: string): KeysMap {
  const text = readFileSync(path, 'utf8');
  try {
    parseKeysFile(text);
  } catch (e) {
    if (e instanceof KeysFileError) throw new Refused(`${path}: ${e.message}`);
    throw e;
  }
  return JSON.parse(text) as KeysMap;
}

/** Applies `change` to the file under a lock, then replaces it atomically. */
function edit(path: string, change: (map: KeysMap) => KeysMap, create: boolean): void {
  const lock = `${path}.lock`;
  let lockFd: number;
  try {
    lockFd = openSync(lock, 'wx', 0o600);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') throw new Refused(`${lock} exists: another agent-keys is editing the file (remove the lock if it is stale)`);
    throw e;
  }
  try {
    if (!existsSync(path) && !create) throw new Refused(`${path} does not exist`);
    const next = change(existsSync(path) ? readMap(path) : {});
    const text = formatKeysFile(next);
    parseKeysFile(text); // never write a file the enclave would refuse
    writeAtomically(path, text);
  } finally {
    closeSync(lockFd);
    unlinkSync(lock);
  }
}

/** Temporary file, fsync, rename, fsync of the folder: a reader sees the old file or the new one. */
function writeAtomically(path: string, text: string): void {
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    renameSync(tmp, path);
  } catch (e) {
    unlinkSync(tmp);
    throw e;
  }
  // Make the rename itself durable.
  const dirFd = openSync(dirname(path), 'r');
  try {
    fsyncSync(dirFd);
  } finally {
    closeSync(dirFd);
  }
}

/** True when run as a script (also through an npm bin symlink), false when imported. */
function invokedDirectly(): boolean {
  try {
    return process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url);
  } catch {
    return false;
  }
}

if (invokedDirectly()) process.exitCode = await main(process.argv.slice(2));
