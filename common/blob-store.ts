/**
 * The seam between the enclave and the disk it does not have: named opaque blobs kept by
 * the host (host-store/), reached over gRPC (enclave/storage/grpc-blob-store.ts). The
 * host is untrusted: everything the enclave hands it is sealed, and everything it hands
 * back is authenticated and checked by the enclave (enclave/storage/store.ts).
 *
 * Every write is durable when its promise resolves (fsync on the host), and `put` replaces
 * a blob atomically: a crash leaves the old blob or the new one, never half of one.
 */
export interface BlobInfo {
  name: string;
  size: number;
}

export interface BlobStore {
  /** Blobs whose names start with `prefix` (all when empty), sorted by name. */
  list(prefix?: string): Promise<BlobInfo[]>;
  /** The blob's bytes in chunks, or undefined if there is no such blob. */
  read(name: string): Promise<AsyncIterable<Buffer> | undefined>;
  /** Creates or atomically replaces a blob with the given bytes. */
  put(name: string, data: Uint8Array | AsyncIterable<Uint8Array>): Promise<void>;
  /**
   * Writes `data` at `offset` of an existing blob, first cutting anything after `offset`
   * (a torn tail the enclave has decided to drop), and makes it durable. Fails if the
   * blob is shorter than `offset`.
   */
  append(name: string, offset: number, data: Uint8Array): Promise<void>;
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

/** Reads a whole blob into memory: for small blobs only (keys, certificates). */
export async function readWhole(store: BlobStore, name: string): Promise<Buffer | undefined> {
  const chunks = await store.read(name);
  if (!chunks) return undefined;
  const parts: Buffer[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return Buffer.concat(parts);
}
