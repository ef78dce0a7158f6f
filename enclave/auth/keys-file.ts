/**
 * The API keys file: JSON `{"<key>": ["<tenant>", …]}`, or for a key limited to scopes inside
 * its tenants, or whose chats keep memories by default, `{"<key>": {"tenants": ["<tenant>", …],
 * "user_id": "<id>", "agent_id": …, "run_id": …, "memory_infer": true}}` (each optional but
 * tenants; both forms may be mixed). An entry's name is either the key
 * itself or `sha256:<64 hex>`, the SHA-256 of the key; `agent-keys` writes the hashed
 * form, so a file it manages never holds a usable key. Pure parsing and formatting,
 * shared by the enclave (which loads the file) and the operator's CLI (which edits it).
 */
import { createHash, randomBytes } from 'node:crypto';
import { limits } from '../../common/limits.js';
import { SCOPE_FIELDS, type MemoryScope } from '../memory/types.js';

export const HASH_PREFIX = 'sha256:';

/** Keys travel in `Authorization: Bearer <key>`: RFC 6750's token characters only. */
const keyPattern = /^[A-Za-z0-9\-._~+/]+=*$/;
export const MIN_KEY_CHARS = 16;
export const MAX_KEY_CHARS = 512;
const tenantPattern = new RegExp(limits.tenantIdPattern);

export interface KeyEntry {
  /** SHA-256 of the key. */
  hash: Buffer;
  tenants: string[];
  /** True when the file holds the key itself rather than its hash. */
  plaintext: boolean;
  /** The scopes the key is limited to inside its tenants (none: tenant-wide). */
  scope: MemoryScope;
  /** Its chat completions go through memory extraction unless a request says `memory_infer: false` (absent: they don't). */
  memoryInfer?: boolean;
}

/** What an entry grants: its tenants, alone or with the scopes the key is limited to and its chats' default. */
export type KeyGrant = string[] | ({ tenants: string[]; memory_infer?: boolean } & MemoryScope);

export const grantTenants = (grant: KeyGrant): string[] => (Array.isArray(grant) ? grant : grant.tenants);

export class KeysFileError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid API keys file:\n  ${problems.join('\n  ')}`);
    this.name = 'KeysFileError';
  }
}

export const hashApiKey = (key: string): Buffer => createHash('sha256').update(key, 'utf8').digest();

/** A new random key: 32 bytes from the CSPRNG, base64url, with a prefix secret scanners can spot. */
export const generateApiKey = (): string => `agk_${randomBytes(32).toString('base64url')}`;

/** How an entry is named in logs and by `agent-keys list`: never the key, a short hash prefix. */
export const entryId = (hash: Buffer): string => `${HASH_PREFIX}${hash.toString('hex').slice(0, 16)}`;

export function isValidKey(key: string): boolean {
  return key.length >= MIN_KEY_CHARS && key.length <= MAX_KEY_CHARS && keyPattern.test(key);
}

/** Parses the file's text, reporting every problem at once; the keys themselves never appear in messages. */
export function parseKeysFile(text: string): KeyEntry[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new KeysFileError([`not valid JSON (${(err as Error).message})`]);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new KeysFileError(['must be a JSON object mapping each key to an array of tenant ids']);
  }
  const problems: string[] = [];
  const entries: KeyEntry[] = [];
  const seen = new Set<string>();
  Object.entries(raw).forEach(([name, grant], i) => {
    const where = `entry ${i + 1}`;
    let hash: Buffer;
    let plaintext = false;
    if (name.startsWith(HASH_PREFIX)) {
      const hex = name.slice(HASH_PREFIX.length);
      if (!/^[0-9a-f]{64}$/i.test(hex)) {
        problems.push(`${where}: "${HASH_PREFIX}" must be followed by 64 hex digits`);
        return;
      }
      hash = Buffer.from(hex, 'hex');
    } else {
      if (!isValidKey(name)) {
        problems.push(`${where}: a key must be ${MIN_KEY_CHARS}–${MAX_KEY_CHARS} characters of A-Z a-z 0-9 - . _ ~ + / (trailing =), or "${HASH_PREFIX}<64 hex>"`);
        return;
      }
      hash = hashApiKey(name);
      plaintext = true;
    }
    const id = hash.toString('hex');
    if (seen.has(id)) problems.push(`${where} (${entryId(hash)}): the same key appears twice`);
    seen.add(id);
    const scoped = typeof grant === 'object' && grant !== null && !Array.isArray(grant) ? grant as Record<string, unknown> : undefined;
    const tenants = scoped ? scoped.tenants : grant;
    if (!Array.isArray(tenants) || tenants.length === 0) {
      problems.push(`${where} (${entryId(hash)}): tenants must be a non-empty array of tenant ids`);
      return;
    }
    const scope: MemoryScope = {};
    let memoryInfer = false;
    for (const [field, value] of Object.entries(scoped ?? {})) {
      if (field === 'tenants') continue;
      if (field === 'memory_infer') {
        if (typeof value !== 'boolean') {
          problems.push(`${where} (${entryId(hash)}): memory_infer must be true or false`);
          return;
        }
        memoryInfer = value;
        continue;
      }
      if (!(SCOPE_FIELDS as readonly string[]).includes(field)) {
        problems.push(`${where} (${entryId(hash)}): unknown field "${field}": an entry holds tenants and optionally ${SCOPE_FIELDS.join(', ')}, memory_infer`);
        return;
      }
      if (typeof value !== 'string' || !tenantPattern.test(value)) {
        problems.push(`${where} (${entryId(hash)}): ${field} must be 1–${limits.maxTenantIdChars} characters of A-Z a-z 0-9 . _ : @ -`);
        return;
      }
      scope[field as keyof MemoryScope] = value;
    }
    const bad = tenants.filter((t) => typeof t !== 'string' || !tenantPattern.test(t));
    if (bad.length) {
      problems.push(`${where} (${entryId(hash)}): invalid tenant id ${JSON.stringify(bad[0])}: 1–${limits.maxTenantIdChars} characters of A-Z a-z 0-9 . _ : @ -`);
      return;
    }
    entries.push({ hash, tenants: [...new Set(tenants as string[])], plaintext, scope, memoryInfer });
  });
  if (problems.length) throw new KeysFileError(problems);
  return entries;
}

/** The file's text for a map of entry names to what they grant: stable, one entry per line. */
export function formatKeysFile(map: Record<string, KeyGrant>): string {
  const names = Object.keys(map);
  if (names.length === 0) return '{}\n';
  const lines = names.map((name) => `  ${JSON.stringify(name)}: ${JSON.stringify(map[name])}`);
  return `{\n${lines.join(',\n')}\n}\n`;
}
