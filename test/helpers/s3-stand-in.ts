import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A loopback stand-in for the part of Amazon S3's API the host store's S3 backend uses (path-style
 * GET, with a Range, PUT, DELETE of objects, ListObjectsV2, multipart uploads), with S3's conditional writes as
 * its documentation states them: If-None-Match: * fails with 412 when the key exists, If-Match
 * with 412 on another ETag and 404 when there is no object. It is what lies outside the system
 * in these tests, as the scripted model server is for chat; `npm test` runs the contract against
 * it, and against a real S3 endpoint when S3_TEST_ENDPOINT is set (test/unit/blob-store.test.ts).
 * One request is handled at a time, so each condition is checked and acted on atomically.
 * `unquotedIfMatch` plays a server that compares a PUT's If-Match with the ETag without its
 * quotes, as Ceph's RADOS Gateway 16 does (it answers 412 to the quoted ETag S3 clients send).
 */
export interface S3StandIn {
  endpoint: string;
  bucket: string;
  /** Keys held now, and an object's bytes (for tests that check what is left behind). */
  keys(): string[];
  bytes(key: string): Buffer | undefined;
  close(): Promise<void>;
}

interface StoredObject {
  bytes: Buffer;
  etag: string;
}

const md5 = (bytes: Buffer) => createHash('md5').update(bytes).digest('hex');
const xml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

export async function startS3StandIn(bucket = 'agent-test', pageSize = 1000, options: { unquotedIfMatch?: boolean } = {}): Promise<S3StandIn> {
  const objects = new Map<string, StoredObject>();
  const uploads = new Map<string, { key: string; parts: Map<number, Buffer> }>();
  let queue = Promise.resolve();

  const error = (res: ServerResponse, status: number, code: string, message: string) => {
    res.writeHead(status, { 'content-type': 'application/xml' });
    res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${xml(message)}</Message></Error>`);
  };
  const ok = (res: ServerResponse, body = '', headers: Record<string, string> = {}) => {
    res.writeHead(200, { 'content-type': 'application/xml', ...headers });
    res.end(body);
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const [, bucketName, ...rest] = url.pathname.split('/');
    if (bucketName !== bucket) return error(res, 404, 'NoSuchBucket', `no bucket ${bucketName}`);
    const key = decodeURIComponent(rest.join('/'));
    const q = url.searchParams;
    const method = req.method ?? 'GET';

    if (method === 'GET' && key === '' && q.get('list-type') === '2') {
      const prefix = q.get('prefix') ?? '';
      const all = [...objects.keys()].filter((k) => k.startsWith(prefix)).sort();
      const from = Number(q.get('continuation-token') ?? 0);
      const page = all.slice(from, from + pageSize);
      const truncated = from + pageSize < all.length;
      return ok(res, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>${bucket}</Name><Prefix>${xml(prefix)}</Prefix><KeyCount>${page.length}</KeyCount><MaxKeys>${pageSize}</MaxKeys><IsTruncated>${truncated}</IsTruncated>`
        + page.map((k) => `<Contents><Key>${xml(k)}</Key><Size>${objects.get(k)!.bytes.length}</Size><ETag>${xml(objects.get(k)!.etag)}</ETag><StorageClass>STANDARD</StorageClass></Contents>`).join('')
        + (truncated ? `<NextContinuationToken>${from + pageSize}</NextContinuationToken>` : '') + '</ListBucketResult>');
    }
    if (key === '') return error(res, 400, 'InvalidRequest', 'no key');

    if (method === 'GET') {
      const found = objects.get(key);
      if (!found) return error(res, 404, 'NoSuchKey', 'The specified key does not exist.');
      // A Range GET (bytes=first- or bytes=first-last): 206 with the part asked for, 416 when it starts past the end.
      const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
      if (range) {
        const size = found.bytes.length;
        const first = Number(range[1]);
        const last = Math.min(range[2] === '' ? size - 1 : Number(range[2]), size - 1);
        if (first >= size || last < first) return error(res, 416, 'InvalidRange', 'The requested range is not satisfiable');
        const part = found.bytes.subarray(first, last + 1);
        res.writeHead(206, { 'content-type': 'application/octet-stream', 'content-length': String(part.length), 'content-range': `bytes ${first}-${last}/${size}`, etag: found.etag });
        return void res.end(part);
      }
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(found.bytes.length), etag: found.etag });
      return void res.end(found.bytes);
    }
    if (method === 'DELETE') {
      if (q.has('uploadId')) uploads.delete(q.get('uploadId')!);
      else objects.delete(key);
      res.writeHead(204);
      return void res.end();
    }
    if (method === 'POST' && q.has('uploads')) {
      const id = randomBytes(8).toString('hex');
      uploads.set(id, { key, parts: new Map() });
      return ok(res, `<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult><Bucket>${bucket}</Bucket><Key>${xml(key)}</Key><UploadId>${id}</UploadId></InitiateMultipartUploadResult>`);
    }
    if (method === 'PUT' && q.has('uploadId')) {
      const upload = uploads.get(q.get('uploadId')!);
      if (!upload) return error(res, 404, 'NoSuchUpload', 'no such upload');
      upload.parts.set(Number(q.get('partNumber')), body);
      return ok(res, '', { etag: `"${md5(body)}"` });
    }
    // A write of a whole object: PUT, or the completion of a multipart upload.
    let bytes = body;
    let etag = `"${md5(body)}"`;
    if (method === 'POST' && q.has('uploadId')) {
      const upload = uploads.get(q.get('uploadId')!);
      if (!upload) return error(res, 404, 'NoSuchUpload', 'no such upload');
      const numbers = [...body.toString('utf8').matchAll(/<PartNumber>(\d+)<\/PartNumber>/g)].map((m) => Number(m[1]));
      const parts = numbers.map((n) => upload.parts.get(n));
      if (parts.some((p) => p === undefined)) return error(res, 400, 'InvalidPart', 'a part was not uploaded');
      bytes = Buffer.concat(parts as Buffer[]);
      etag = `"${md5(Buffer.concat(parts.map((p) => Buffer.from(md5(p!), 'hex'))))}-${parts.length}"`;
      uploads.delete(q.get('uploadId')!);
    } else if (method !== 'PUT') {
      return error(res, 405, 'MethodNotAllowed', `${method} is not served here`);
    }
    const existing = objects.get(key);
    const ifNoneMatch = req.headers['if-none-match'];
    const ifMatch = req.headers['if-match'];
    if (ifNoneMatch === '*' && existing) return error(res, 412, 'PreconditionFailed', 'At least one of the pre-conditions you specified did not hold');
    if (ifMatch !== undefined) {
      if (!existing) return error(res, 404, 'NoSuchKey', 'The specified key does not exist.');
      if (ifMatch !== (options.unquotedIfMatch ? existing.etag.slice(1, -1) : existing.etag)) return error(res, 412, 'PreconditionFailed', 'At least one of the pre-conditions you specified did not hold');
    }
    objects.set(key, { bytes, etag });
    if (method === 'POST') return ok(res, `<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult><Bucket>${bucket}</Bucket><Key>${xml(key)}</Key><ETag>${xml(etag)}</ETag></CompleteMultipartUploadResult>`);
    return ok(res, '', { etag });
  }

  const server: Server = createServer((req, res) => {
    queue = queue.then(() => handle(req, res)).catch((err: unknown) => {
      if (!res.headersSent) error(res, 500, 'InternalError', String(err));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    bucket,
    keys: () => [...objects.keys()].sort(),
    bytes: (key) => objects.get(key)?.bytes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
