import { writeFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { readWhole, type BlobStore, type BlobInfo, type PutConditions } from '../common/blob-store.js';

/**
 * Blobs the host's own tools read as files: the simulated attestation root that `agent-verify`,
 * `agent-gateway`, the console and the sdk are told to pin (`$DATA_DIR/simulated-root.pem`).
 * Public by design (a certificate), so copying it out of the store tells the host nothing new.
 */
export const HOST_READABLE = ['simulated-root.pem'] as const;

/**
 * A blob store whose host-readable blobs are also copied into a folder, for stores that keep
 * nothing there themselves (S3). The copy is a convenience for the host's tools, never read
 * back by the service: the enclave reads the blob from the store and checks it as always.
 */
export class HostCopies implements BlobStore {
  constructor(private readonly inner: BlobStore, private readonly dir: string, private readonly names: readonly string[] = HOST_READABLE) {}

  /** Copies what the store already holds (another host store on the same bucket may have written it). */
  async refresh(): Promise<void> {
    for (const name of this.names) {
      const bytes = await readWhole(this.inner, name);
      if (bytes !== undefined) this.copy(name, bytes);
    }
  }

  private copy(name: string, bytes: Uint8Array): void {
    const path = join(this.dir, name);
    writeFileSync(`${path}.tmp`, bytes, { mode: 0o644 });
    renameSync(`${path}.tmp`, path);
  }

  list(prefix?: string): Promise<BlobInfo[]> {
    return this.inner.list(prefix);
  }

  read(name: string, from?: number): Promise<AsyncIterable<Buffer> | undefined> {
    return this.inner.read(name, from);
  }

  async put(name: string, data: Uint8Array | AsyncIterable<Uint8Array>, conditions?: PutConditions): Promise<{ version: string }> {
    const result = await this.inner.put(name, data, conditions);
    // Read back rather than buffer a stream we were handed: these blobs are a few KiB.
    if (this.names.includes(name)) {
      const bytes = await readWhole(this.inner, name);
      if (bytes !== undefined) this.copy(name, bytes);
    }
    return result;
  }

  append(name: string, offset: number, data: Uint8Array): Promise<void> {
    return this.inner.append(name, offset, data);
  }

  truncate(name: string, length: number, ifSize: number): Promise<void> {
    return this.inner.truncate(name, length, ifSize);
  }

  delete(name: string): Promise<void> {
    return this.inner.delete(name);
  }

  release(name: string): Promise<void> {
    return this.inner.release(name);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
