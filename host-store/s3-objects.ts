import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';

/** A conditional write found the object other than it expected (S3: 412, 409, or 404 for If-Match). */
export class ObjectConflictError extends Error {
  constructor(readonly key: string, readonly status: number) {
    super(`the conditional write of ${key} failed (HTTP ${status})`);
    this.name = 'ObjectConflictError';
  }
}

/** What the S3 blob store needs of an object store: whole objects, written at most conditionally. */
export interface Objects {
  /** The object's bytes and ETag, or undefined when there is none. */
  get(key: string): Promise<{ bytes: Buffer; etag: string } | undefined>;
  /** The object's bytes from byte `from` (default 0; below its size) in pieces, or undefined when there is none. */
  stream(key: string, from?: number): Promise<AsyncIterable<Uint8Array> | undefined>;
  /** Writes the object if the condition holds (ObjectConflictError otherwise); resolves with its ETag. */
  put(key: string, bytes: Uint8Array, condition?: { ifAbsent: true } | { ifMatch: string }): Promise<{ etag: string }>;
  /** Writes an object of unknown length (in parts when large); resolves with its size. Nothing is left if `chunks` throws. */
  upload(key: string, chunks: AsyncIterable<Uint8Array>): Promise<number>;
  delete(key: string): Promise<void>;
  /** Keys under `prefix`, every page. */
  list(prefix: string): Promise<string[]>;
}

/** S3 multipart parts are 5 MiB at least (but the last); one part at most is held in memory. */
const PART_BYTES = 8 * 1024 * 1024;

const statusOf = (err: unknown): number | undefined => (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;

/**
 * Objects in an S3 bucket (AWS, or any server of its API at `endpoint`), through the AWS SDK.
 * Credentials and region come from the SDK's usual places (AWS_* variables, the instance's
 * role); a conditional put is S3's If-None-Match: * or If-Match: <etag>.
 */
export class S3Objects implements Objects {
  private readonly client: S3Client;
  /** Whether this server compares If-Match with unquoted ETags (putIfMatch); unknown until a conditional put tells. */
  private unquotedIfMatch: boolean | undefined;

  constructor(private readonly bucket: string, options: { endpoint?: string; region?: string; credentials?: { accessKeyId: string; secretAccessKey: string } } = {}) {
    this.client = new S3Client({
      region: options.region ?? process.env.AWS_REGION ?? 'us-east-1',
      ...(options.credentials ? { credentials: options.credentials } : {}),
      ...(options.endpoint ? { endpoint: options.endpoint, forcePathStyle: true } : {}),
      // Checksums only where S3 requires them: the blobs are sealed, and the enclave checks every byte.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  async get(key: string): Promise<{ bytes: Buffer; etag: string } | undefined> {
    try {
      const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      return { bytes: Buffer.from(await res.Body!.transformToByteArray()), etag: res.ETag! };
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  async stream(key: string, from = 0): Promise<AsyncIterable<Uint8Array> | undefined> {
    try {
      // A Range GET: only the bytes asked for cross the network.
      const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, ...(from > 0 ? { Range: `bytes=${from}-` } : {}) }));
      return res.Body as AsyncIterable<Uint8Array>;
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  async put(key: string, bytes: Uint8Array, condition?: { ifAbsent: true } | { ifMatch: string }): Promise<{ etag: string }> {
    if (condition && 'ifMatch' in condition) return this.putIfMatch(key, bytes, condition.ifMatch);
    return this.conditionalPut(key, bytes, condition && { IfNoneMatch: '*' });
  }

  /**
   * A put If-Match `etag`, as S3 returned it (quoted, as RFC 7232 has it). Some servers of S3's
   * API (Ceph's RADOS Gateway, which DigitalOcean Spaces runs) compare If-Match on a PUT with the
   * ETag without its quotes, and answer 412 to the quoted one. So a 412 while the object still has
   * `etag` is read as that, and the put is sent once more with the ETag unquoted: still
   * conditional, so a write in between is refused all the same. What the server wants is kept.
   */
  private async putIfMatch(key: string, bytes: Uint8Array, etag: string): Promise<{ etag: string }> {
    const bare = etag.replace(/^"(.*)"$/, '$1');
    if (this.unquotedIfMatch === true) return this.conditionalPut(key, bytes, { IfMatch: bare });
    try {
      const put = await this.conditionalPut(key, bytes, { IfMatch: etag });
      this.unquotedIfMatch = false;
      return put;
    } catch (err) {
      if (this.unquotedIfMatch === false || bare === etag || !(err instanceof ObjectConflictError) || err.status !== 412) throw err;
      if ((await this.get(key))?.etag !== etag) throw err;
      const put = await this.conditionalPut(key, bytes, { IfMatch: bare });
      this.unquotedIfMatch = true;
      return put;
    }
  }

  private async conditionalPut(key: string, bytes: Uint8Array, condition?: { IfNoneMatch: '*' } | { IfMatch: string }): Promise<{ etag: string }> {
    try {
      const res = await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: bytes, ...condition }));
      return { etag: res.ETag! };
    } catch (err) {
      const status = statusOf(err);
      // 412: the condition failed; 409: a conditional write of the same key raced it; 404: If-Match of no object.
      if (condition && (status === 412 || status === 409 || status === 404)) throw new ObjectConflictError(key, status);
      throw err;
    }
  }

  async upload(key: string, chunks: AsyncIterable<Uint8Array>): Promise<number> {
    let pending: Uint8Array[] = [];
    let pendingBytes = 0;
    let size = 0;
    let uploadId: string | undefined;
    const parts: { ETag: string; PartNumber: number }[] = [];
    const sendPart = async () => {
      uploadId ??= (await this.client.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: key }))).UploadId!;
      const PartNumber = parts.length + 1;
      const res = await this.client.send(new UploadPartCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId, PartNumber, Body: Buffer.concat(pending) }));
      parts.push({ ETag: res.ETag!, PartNumber });
      pending = [];
      pendingBytes = 0;
    };
    try {
      for await (const chunk of chunks) {
        pending.push(chunk);
        pendingBytes += chunk.length;
        size += chunk.length;
        if (pendingBytes >= PART_BYTES) await sendPart();
      }
      if (uploadId === undefined) {
        await this.put(key, Buffer.concat(pending));
        return size;
      }
      if (pendingBytes > 0) await sendPart();
      await this.client.send(new CompleteMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts: parts } }));
      return size;
    } catch (err) {
      if (uploadId !== undefined) await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId })).catch(() => undefined);
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  async list(prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const res = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }));
      for (const item of res.Contents ?? []) if (item.Key !== undefined) keys.push(item.Key);
      token = res.IsTruncated ? res.NextContinuationToken : undefined;
    } while (token);
    return keys;
  }

  close(): void {
    this.client.destroy();
  }
}
