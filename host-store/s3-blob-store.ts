import { randomBytes } from 'node:crypto';
import { BlobConflictError, isValidBlobName, readOffset, type BlobInfo, type BlobStore, type PutConditions } from '../common/blob-store.js';
import { BlobNameError } from './fs-blob-store.js';
import { ObjectConflictError, type Objects } from './s3-objects.js';

/**
 * A blob as kept in an object store: its manifest, the object named after the blob, lists the
 * immutable part objects whose bytes, in order, are the blob. `w` is new at every write, so no
 * two manifests are alike and an ETag is never seen twice (a put of the same bytes twice
 * would otherwise bring back a version a conditional writer still holds).
 */
interface Manifest {
  w: string;
  size: number;
  parts: Array<{ k: string; n: number }>;
}

interface Known {
  etag: string;
  manifest: Manifest;
  /**
   * The object is not a manifest but the blob's bytes themselves: one put there by hand (the
   * operator's signed API keys, `aws s3 cp`). Read as it is and replaced by a put; never
   * appended to or cut, since its bytes are not a part this store may keep or delete.
   */
  plain?: Buffer;
}

/** Parts smaller than this at the blob's end are merged into one once there are more than TAIL_PARTS of them. */
const CHUNK_BYTES = 4 * 1024 * 1024;
const TAIL_PARTS = 64;

/**
 * Blobs in an S3 bucket (BLOB_STORE_S3), with the contract the file backend has
 * (common/blob-store.ts), for a host store that is not one machine's disk.
 *
 * S3 has no append, and a truncate that deletes parts cannot be atomic with an append racing
 * it; so every write is one conditional write of the blob's manifest (If-Match on its ETag,
 * If-None-Match: * for a put if absent): new bytes go first into a part object of their own,
 * under a key no one else uses, and count only once the manifest naming them is written. Of
 * two writers, the one whose manifest write comes second fails (BlobConflictError) and its
 * parts are deleted: an old owner's append after a new owner's write, or two appends at one
 * end. Small parts at the end are merged once there are more than 64, so a manifest names at
 * most (blob size / 4 MiB) + 64 parts.
 *
 * A blob's version is its manifest's ETag. Parts a write replaced are deleted after it (a
 * reader in another process that is part-way through the old parts then fails and reads again);
 * parts of a write that failed part-way are deleted with the blob. `prefix` keeps the
 * service's objects apart from others in the bucket; parts live under `<prefix>.parts/`, which
 * no blob name can reach (blob names never start with a dot).
 *
 * An object at a blob's key that is not a manifest is the blob's bytes as they are: what an
 * operator puts in the bucket with `aws s3 cp` (the signed API keys, API_KEYS_BLOB). Such a
 * blob is read and replaced, never appended to or cut.
 */
export class S3BlobStore implements BlobStore {
  /** Each blob's manifest as this process last wrote or read it: appends need no read first. */
  private readonly known = new Map<string, Known>();
  /** Operations on one blob run one at a time in this process. */
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(private readonly objects: Objects & { close?(): void }, private readonly prefix = '') {}

  async list(prefix = ''): Promise<BlobInfo[]> {
    const names = (await this.objects.list(this.prefix + prefix)).map((key) => key.slice(this.prefix.length)).filter(isValidBlobName);
    const infos = await Promise.all(names.map(async (name) => {
      const found = await this.fetch(name);
      return found && { name, size: found.manifest.size, version: found.etag };
    }));
    return infos.filter((info): info is BlobInfo => info !== undefined).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async read(name: string, from?: number): Promise<AsyncIterable<Buffer> | undefined> {
    const start = readOffset(from);
    const found = await this.fetch(this.checked(name));
    if (!found) return undefined;
    if (found.plain) return once(found.plain.subarray(Math.min(start, found.plain.length)));
    const { objects } = this;
    return (async function* () {
      // Parts wholly before `start` are skipped; the one it falls in is read from there (a Range GET).
      let at = 0;
      for (const part of found.manifest.parts) {
        const skip = start - at;
        at += part.n;
        if (skip >= part.n) continue;
        const body = await objects.stream(part.k, Math.max(0, skip));
        if (!body) throw new Error(`a part of ${name} is gone: the blob was replaced while it was read; read it again`);
        for await (const chunk of body) yield Buffer.from(chunk);
      }
    })();
  }

  async put(name: string, data: Uint8Array | AsyncIterable<Uint8Array>, conditions: PutConditions = {}): Promise<{ version: string }> {
    const key = this.key(name);
    return this.one(name, async () => {
      // The manifest it replaces: for its parts (deleted after), and to refuse early a version already gone.
      const before = conditions.ifAbsent ? undefined : await this.fetch(name);
      if (conditions.ifVersion !== undefined && before?.etag !== conditions.ifVersion) {
        throw new BlobConflictError(`${name} is ${before ? `at version ${before.etag}` : 'absent'}; a put if at version ${conditions.ifVersion} is refused`);
      }
      const part = this.partKey(name);
      const size = await this.objects.upload(part, data instanceof Uint8Array ? once(data) : data);
      const manifest: Manifest = { w: nonce(), size, parts: size > 0 ? [{ k: part, n: size }] : [] };
      if (size === 0) await this.objects.delete(part);
      const condition = conditions.ifAbsent ? { ifAbsent: true as const } : conditions.ifVersion !== undefined ? { ifMatch: conditions.ifVersion } : undefined;
      const etag = await this.writeManifest(name, key, manifest, condition, size > 0 ? [part] : []);
      if (!before?.plain) await this.deleteParts(before?.manifest.parts ?? []);
      return { version: etag };
    });
  }

  async append(name: string, offset: number, data: Uint8Array): Promise<void> {
    const key = this.key(name);
    return this.one(name, async () => {
      let current = this.known.get(name);
      // What this process knew may be old (another process wrote since): read the manifest once more, at most.
      for (let fresh = false; ; fresh = true) {
        if (!current || current.manifest.size !== offset) {
          if (fresh) throw new BlobConflictError(`${name} ${current ? `ends at ${current.manifest.size}` : 'does not exist'}; an append at ${offset} is refused`);
          current = await this.fetch(name);
          continue;
        }
        if (current.plain) throw new PlainObjectError(name, 'an append');
        if (data.length === 0) return;
        const part = this.partKey(name);
        await this.objects.put(part, data);
        const { parts, merged, added } = await this.withTail(name, current.manifest.parts, { k: part, n: data.length });
        try {
          await this.writeManifest(name, key, { w: nonce(), size: offset + data.length, parts }, { ifMatch: current.etag }, [part, ...added]);
        } catch (err) {
          if (!(err instanceof BlobConflictError) || fresh) throw err;
          current = await this.fetch(name);
          continue;
        }
        await this.deleteParts(merged);
        return;
      }
    });
  }

  async truncate(name: string, length: number, ifSize: number): Promise<void> {
    const key = this.key(name);
    return this.one(name, async () => {
      const current = await this.fetch(name);
      if (!current || current.manifest.size !== ifSize || length > ifSize) {
        throw new BlobConflictError(`${name} has ${current?.manifest.size ?? 'no'} bytes; a cut to ${length} of ${ifSize} bytes is refused`);
      }
      if (current.plain) throw new PlainObjectError(name, 'a cut');
      const kept: Manifest['parts'] = [];
      let at = 0;
      let cut: string | undefined;
      for (const part of current.manifest.parts) {
        if (at + part.n <= length) kept.push(part);
        else if (at < length) {
          // The part the cut falls in is copied up to the cut: parts never change.
          const bytes = (await this.objects.get(part.k))?.bytes;
          if (!bytes) throw new Error(`a part of ${name} is gone; cut it again`);
          cut = this.partKey(name);
          await this.objects.put(cut, bytes.subarray(0, length - at));
          kept.push({ k: cut, n: length - at });
        }
        at += part.n;
      }
      await this.writeManifest(name, key, { w: nonce(), size: length, parts: kept }, { ifMatch: current.etag }, cut ? [cut] : []);
      const keptKeys = new Set(kept.map((p) => p.k));
      await this.deleteParts(current.manifest.parts.filter((p) => !keptKeys.has(p.k)));
    });
  }

  async delete(name: string): Promise<void> {
    const key = this.key(name);
    return this.one(name, async () => {
      await this.objects.delete(key);
      this.known.delete(name);
      // Every part of the blob, those of writes that failed part-way included.
      await this.deleteParts((await this.objects.list(`${this.prefix}.parts/${name}/`)).map((k) => ({ k, n: 0 })));
    });
  }

  async release(name: string): Promise<void> {
    this.known.delete(name);
  }

  async close(): Promise<void> {
    this.objects.close?.();
  }

  /**
   * The parts after appending `added`: when more than TAIL_PARTS small parts end the blob,
   * they become one (a new object); `merged` are the parts it replaces (to delete once the
   * manifest no longer names them), `added` the objects it wrote.
   */
  private async withTail(name: string, parts: Manifest['parts'], added: Manifest['parts'][number]): Promise<{ parts: Manifest['parts']; merged: Manifest['parts']; added: string[] }> {
    const all = [...parts, added];
    let first = all.length;
    while (first > 0 && all[first - 1].n < CHUNK_BYTES) first--;
    if (all.length - first <= TAIL_PARTS) return { parts: all, merged: [], added: [] };
    const tail = all.slice(first);
    const bytes = await Promise.all(tail.map(async (part) => {
      const found = await this.objects.get(part.k);
      if (!found) throw new Error(`a part of ${name} is gone`);
      return found.bytes;
    }));
    const k = this.partKey(name);
    const joined = Buffer.concat(bytes);
    await this.objects.put(k, joined);
    return { parts: [...all.slice(0, first), { k, n: joined.length }], merged: tail, added: [k] };
  }

  /** Writes the manifest if `condition` holds; otherwise deletes `orphans` and throws BlobConflictError. */
  private async writeManifest(name: string, key: string, manifest: Manifest, condition: { ifAbsent: true } | { ifMatch: string } | undefined, orphans: string[]): Promise<string> {
    try {
      const { etag } = await this.objects.put(key, Buffer.from(JSON.stringify(manifest)), condition);
      this.known.set(name, { etag, manifest });
      return etag;
    } catch (err) {
      this.known.delete(name);
      await this.deleteParts(orphans.map((k) => ({ k, n: 0 })));
      if (err instanceof ObjectConflictError) {
        throw new BlobConflictError(condition && 'ifAbsent' in condition ? `${name} exists; a put if absent is refused` : `${name} was changed by another writer; this write is refused`);
      }
      throw err;
    }
  }

  private async fetch(name: string): Promise<Known | undefined> {
    const found = await this.objects.get(this.key(name));
    if (!found) {
      this.known.delete(name);
      return undefined;
    }
    const manifest = parseManifest(found.bytes);
    const known: Known = manifest
      ? { etag: found.etag, manifest }
      : { etag: found.etag, manifest: { w: '', size: found.bytes.length, parts: [] }, plain: found.bytes };
    this.known.set(name, known);
    return known;
  }

  /** Best effort: a part left behind costs storage, never correctness (only manifests make parts count). */
  private async deleteParts(parts: ReadonlyArray<{ k: string }>): Promise<void> {
    await Promise.all(parts.map((p) => this.objects.delete(p.k).catch(() => undefined)));
  }

  private key(name: string): string {
    return this.prefix + this.checked(name);
  }

  private checked(name: string): string {
    if (!isValidBlobName(name)) throw new BlobNameError(name);
    return name;
  }

  private partKey(name: string): string {
    return `${this.prefix}.parts/${name}/${Date.now().toString(36)}-${randomBytes(8).toString('hex')}`;
  }

  private one<T>(name: string, run: () => Promise<T>): Promise<T> {
    const before = this.queues.get(name) ?? Promise.resolve();
    const next = before.then(run, run);
    const settled = next.catch(() => undefined);
    this.queues.set(name, settled);
    void settled.then(() => {
      if (this.queues.get(name) === settled) this.queues.delete(name);
    });
    return next;
  }
}

const nonce = () => randomBytes(8).toString('hex');

async function* once<T extends Uint8Array>(bytes: T): AsyncIterable<T> {
  yield bytes;
}

/** The manifest the object holds, or undefined when it holds something else (a blob's bytes put there by hand). */
function parseManifest(bytes: Buffer): Manifest | undefined {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    value = undefined;
  }
  const m = value as Partial<Manifest> | undefined;
  const ok = m && typeof m.w === 'string' && Number.isSafeInteger(m.size) && Array.isArray(m.parts)
    && m.parts.every((p) => typeof p?.k === 'string' && Number.isSafeInteger(p.n) && p.n > 0)
    && m.parts.reduce((sum, p) => sum + p.n, 0) === m.size;
  return ok ? m as Manifest : undefined;
}

/**
 * A write that would keep an object put there by hand as part of a blob: refused like a
 * conditional write that found the blob other than expected (nothing is written), so an
 * enclave never takes such an object for its own log.
 */
class PlainObjectError extends BlobConflictError {
  constructor(name: string, what: string) {
    super(`${name} is an object put in the bucket by hand, not a blob this service wrote: ${what} is refused (a put replaces it)`);
  }
}
