/**
 * The seam between the enclave and the disk it does not have: named opaque blobs kept by
 * the host (host-store/), reached over gRPC (enclave/storage/grpc-blob-store.ts). The
 * host is untrusted: everything the enclave hands it is sealed, and everything it hands
 * back is authenticated and checked by the enclave (enclave/storage/store.ts).
 *
 * Every write is durable when its promise resolves (fsync on the host), and `put` replaces
 * a blob atomically: a crash leaves the old blob or the new one, never half of one. Writes
 * are conditional (an append names the end it expects, a put may require the blob absent or
 * at a version), so two writers of one store cannot both succeed: the second one fails.
 */
export interface BlobInfo {
  name: string;
  size: number;
  /**
   * Changes with every write of the blob (put, append, truncate); what `ifVersion` compares.
   * Opaque: the file backend's tokens last as long as its process.
   */
  version: string;
}

/** Conditions on a put: it fails (BlobConflictError) unless they hold when it would replace the blob. */
export interface PutConditions {
  /** Only if there is no such blob. */
  ifAbsent?: boolean;
  /** Only if the blob exists with this version (from list() or an earlier put). */
  ifVersion?: string;
}

/**
 * A conditional write found the blob other than its writer expected: an append at an
 * offset that is not the blob's end, a truncate of a blob of another size, a put whose
 * condition failed. Nothing was written. To the enclave it means another writer has been
 * here (an old owner woke up, or a new one took over): it stops serving the store
 * (503 shard_not_owned, enclave/storage/store.ts).
 */
export class BlobConflictError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BlobConflictError';
  }
}

export interface BlobStore {
  /** Blobs whose names start with `prefix` (all when empty), sorted by name. */
  list(prefix?: string): Promise<BlobInfo[]>;
  /**
   * The blob's bytes from byte `from` (default 0) to its end, in chunks, or undefined if there
   * is no such blob; none at all when `from` is at or past its end. The enclave treats what
   * comes back as the host's word, offset included: whatever it reads must prove itself.
   */
  read(name: string, from?: number): Promise<AsyncIterable<Buffer> | undefined>;
  /** Creates or atomically replaces a blob with the given bytes, if `conditions` hold; resolves with its new version. */
  put(name: string, data: Uint8Array | AsyncIterable<Uint8Array>, conditions?: PutConditions): Promise<{ version: string }>;
  /**
   * Writes `data` at the end of an existing blob and makes it durable, only if the blob's
   * end is `offset` (BlobConflictError otherwise, and nothing is written). All or nothing:
   * an append that fails leaves the blob as it was (unless the host itself crashes).
   */
  append(name: string, offset: number, data: Uint8Array): Promise<void>;
  /**
   * Cuts the blob to `length` bytes (a torn tail its writer decided to drop), durably, only
   * if its size is `ifSize` (BlobConflictError otherwise). Appends never cut anything.
   */
  truncate(name: string, length: number, ifSize: number): Promise<void>;
  /** Deletes the blob (no error if absent), durably. */
  delete(name: string): Promise<void>;
  /** No more appends to this blob for now: the store may let go of what it keeps for them (an open file). */
  release(name: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Blob names: one optional folder and a file name, of lower-case letters, digits, dot,
 * dash and underscore, not starting with a dot. Nothing else can leave the store's folder.
 */
const BLOB_NAME = /^(?:[a-z0-9][a-z0-9._-]{0,63}\/)?[a-z0-9][a-z0-9._-]{0,127}$/;

export const isValidBlobName = (name: string): boolean => BLOB_NAME.test(name) && !name.endsWith('.tmp');

/** A read's starting byte, checked: a whole number of bytes, 0 when absent. */
export function readOffset(from: number | undefined): number {
  if (from === undefined) return 0;
  if (!Number.isSafeInteger(from) || from < 0) throw new RangeError(`a blob is read from a byte offset of 0 or more, not ${from}`);
  return from;
}

/** Reads a whole blob into memory: for small blobs only (keys, certificates). */
export async function readWhole(store: BlobStore, name: string): Promise<Buffer | undefined> {
  const chunks = await store.read(name);
  if (!chunks) return undefined;
  const parts: Buffer[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return Buffer.concat(parts);
}
