import { createHash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { ApiError, badRequest, unavailable } from '../../common/errors.js';
import type { TenantLocks } from '../memory/journal.js';
import type { EmbeddingModelId, MemoryEvent } from '../memory/types.js';
import { CorruptStoreError } from './errors.js';
import { decodePayload, encodeEvent, TENANT_SEALED } from './payloads.js';
import { SECRETBOX, secretbox, secretboxOpen } from './secretbox.js';

/** Domain of the HKDF that turns a tenant key into the key its entries are sealed under. */
const TENANT_KEY_INFO = 'agent-service/tenant-key/v1\0';

/**
 * The key a tenant's entries are sealed under: HKDF-SHA256 of the secret the client holds,
 * salted with the store's id and bound to the tenant, so the same secret opens nothing of
 * another tenant or another store, and the sealing key alone opens nothing at all.
 */
export function deriveTenantKey(secret: Uint8Array, storeId: string, tenantId: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, Buffer.from(storeId, 'utf8'), Buffer.from(TENANT_KEY_INFO + tenantId, 'utf8'), SECRETBOX.keyLength));
}

/**
 * 8 bytes naming an embedding model. A locked tenant's entries keep the vectors of the model
 * they were written under, even when a model change rewrites the store around them: opening
 * them under another model would mix two models' vectors in one index.
 */
export const modelTag = (model: EmbeddingModelId): Buffer =>
  createHash('sha256').update(`${model.id}\0${model.dimension}\0${model.sha256}`).digest().subarray(0, MODEL_TAG_BYTES);
const MODEL_TAG_BYTES = 8;

/** Entry 0x0b (payloads.ts): the tenant and model in the clear (replay must route it), the change sealed under the tenant's key. */
export function sealForTenant(tenantId: string, model: Buffer, key: Uint8Array, inner: Uint8Array): Buffer {
  const id = Buffer.from(tenantId, 'utf8');
  const nonce = randomBytes(SECRETBOX.nonceLength);
  return Buffer.concat([Buffer.of(TENANT_SEALED, id.length), id, model, nonce, secretbox(inner, nonce, key)]);
}

/** The model tag of a 0x0b entry. */
const modelOf = (payload: Buffer) => payload.subarray(2 + payload[1], 2 + payload[1] + MODEL_TAG_BYTES);

/** The change inside a 0x0b entry, or undefined when it does not open under `key`. */
export function openForTenant(payload: Buffer, key: Uint8Array): Buffer | undefined {
  const at = 2 + payload[1] + MODEL_TAG_BYTES;
  return secretboxOpen(payload.subarray(at + SECRETBOX.nonceLength), payload.subarray(at, at + SECRETBOX.nonceLength), key);
}

const tenantOf = (event: MemoryEvent) => (event.type === 'delete' || event.type === 'tombstone' ? event.tenant_id : event.record.tenant_id);

const locked = (tenantId: string) => new ApiError('tenant_locked',
  `tenant '${tenantId}' keeps its memories sealed under a tenant key: send its calls sealed, with the key (the gateway's --tenant-key-file, the sdk's tenantKeyFile)`);
// The same answer whatever was wrong with it: nothing about the tenant's content is told.
const wrongKey = (tenantId: string) => new ApiError('wrong_tenant_key', `this is not the tenant key of tenant '${tenantId}'`);

/**
 * Tenants whose memories are sealed under a key derived from a secret the client sends with
 * each sealed request (docs/api.md, Tenant keys). The secret is never kept: only the derived
 * key, in memory, from the tenant's first call that carries it until the enclave stops.
 * Until then (after a restart) the tenant is locked: its entries, read from the snapshot and
 * logs, are held here as they are, unopened, in log order, and written as they are into
 * every snapshot; nothing of it is in the indexes, and every call for it is refused.
 */
export class TenantKeys implements TenantLocks {
  /** The model of the vectors written now (modelTag). */
  private readonly model: Buffer;

  constructor(model: EmbeddingModelId) {
    this.model = modelTag(model);
  }

  /** The store's id (DurableStore.storeId), which every tenant key is derived with; set once the store is open. */
  storeId = '';
  private readonly keys = new Map<string, Buffer>();
  private readonly held = new Map<string, Buffer[]>();

  /** At recovery: a locked tenant's entry, kept unopened. */
  hold(tenantId: string, payload: Buffer): void {
    let entries = this.held.get(tenantId);
    if (!entries) this.held.set(tenantId, entries = []);
    entries.push(payload);
  }

  /** The entry to log or snapshot for `event`: sealed under its tenant's key when it has one. */
  encode(event: MemoryEvent): Buffer {
    const tenantId = tenantOf(event);
    // A locked tenant's change must never be written in the clear (every route refuses it earlier).
    if (this.held.has(tenantId)) throw locked(tenantId);
    const key = this.keys.get(tenantId);
    return key ? sealForTenant(tenantId, this.model, key, encodeEvent(event)) : encodeEvent(event);
  }

  /** The locked tenants' entries now (a snapshot carries them over unopened). */
  lockedEntries(): ReadonlyMap<string, readonly Buffer[]> {
    return new Map(this.held);
  }

  isLocked(tenantId: string): boolean {
    return this.held.has(tenantId);
  }

  /** Whether the tenant's entries are sealed under a key its client holds (open or locked). */
  isKeyed(tenantId: string): boolean {
    return this.keys.has(tenantId) || this.held.has(tenantId);
  }

  admit(tenantId: string, secret: Uint8Array | undefined, holdsMemories: boolean, apply: (event: MemoryEvent) => void): void {
    const key = this.keys.get(tenantId);
    const held = this.held.get(tenantId);
    if (!key && !held) {
      if (!secret) return;
      // Turning it on for a tenant whose memories were logged in the clear would protect nothing of them.
      if (holdsMemories) {
        throw new ApiError('tenant_key_not_enabled', `tenant '${tenantId}' holds memories stored without a tenant key: a tenant key can be turned on only for a tenant with no memories (export them, delete them, and import them with the key)`);
      }
      if (!this.storeId) throw badRequest('tenant keys need the durable store', null, 'invalid_tenant_key');
      this.keys.set(tenantId, deriveTenantKey(secret, this.storeId, tenantId));
      return;
    }
    if (!secret) throw locked(tenantId);
    const derived = deriveTenantKey(secret, this.storeId, tenantId);
    if (key) {
      if (!timingSafeEqual(key, derived)) throw wrongKey(tenantId);
      return;
    }
    // Every entry is opened before any is applied: a wrong key leaves the tenant locked as it was.
    const events = held!.map((payload, i) => {
      if (!modelOf(payload).equals(this.model)) {
        // Not yet done: re-embedding a tenant as it opens. Its entries stay as they are, for an enclave of their model.
        throw unavailable(`tenant '${tenantId}' was sealed with vectors of another embedding model than this enclave's; it cannot be opened until re-embedding at opening is supported`, 'storage_unavailable');
      }
      const inner = openForTenant(payload, derived);
      if (!inner) {
        if (i === 0) throw wrongKey(tenantId);
        // The first opened, so the key is right: this entry was damaged (the frame's seal would have caught the host).
        // Named by place, never by tenant: this goes to the host's log.
        throw new CorruptStoreError(`entry ${i} of a locked tenant does not open under its tenant key`);
      }
      const p = decodePayload(inner, `entry ${i} of a locked tenant`);
      if (p.type !== 'event') throw new CorruptStoreError(`entry ${i} of a locked tenant is not a change`);
      return p.event;
    });
    this.held.delete(tenantId);
    this.keys.set(tenantId, derived);
    for (const event of events) apply(event);
  }
}
