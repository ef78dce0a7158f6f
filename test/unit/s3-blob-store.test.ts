import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobConflictError, readWhole } from '../../common/blob-store.js';
import { S3BlobStore } from '../../host-store/s3-blob-store.js';
import { S3Objects } from '../../host-store/s3-objects.js';
import { startS3StandIn, type S3StandIn } from '../helpers/s3-stand-in.js';

/**
 * What the S3 backend adds to the contract blob-store.test.ts runs on every backend: two host
 * stores on one bucket (an old owner's and a new one's), a log of many small appends, a cut
 * inside a part, a blob larger than one multipart part, and nothing left behind by writes that
 * lost. Against the loopback stand-in of S3's API (test/helpers/s3-stand-in.ts) and, when
 * S3_TEST_ENDPOINT (with S3_TEST_BUCKET and AWS credentials) names one, a real S3 server
 * (`npm run test:s3-ceph` starts Ceph's RADOS Gateway for it). What is left in the bucket is
 * read through S3's API, the same way on both.
 */
let standIn: S3StandIn;
beforeAll(async () => {
  standIn = await startS3StandIn();
});
afterAll(async () => {
  await standIn?.close();
});

interface Bucket {
  objects(): S3Objects;
  prefix: string;
}
const standInBucket: Bucket = {
  objects: () => new S3Objects(standIn.bucket, { endpoint: standIn.endpoint, credentials: { accessKeyId: 'stand-in', secretAccessKey: 'stand-in' } }),
  prefix: 'svc/',
};
const buckets: Array<[string, Bucket]> = [['a loopback stand-in of S3\'s API', standInBucket]];
const realS3 = process.env.S3_TEST_ENDPOINT;
if (realS3) {
  const prefix = `backend-${Date.now()}/`;
  buckets.push([`S3 at ${realS3}`, { objects: () => new S3Objects(process.env.S3_TEST_BUCKET ?? 'agent-service-test', { endpoint: realS3 }), prefix }]);
}

describe.each(buckets)('S3BlobStore on %s', (_name, bucket) => {
  const PREFIX = bucket.prefix;
  const store = () => new S3BlobStore(bucket.objects(), PREFIX);
  const keys = () => bucket.objects().list(PREFIX);
  const bytes = async (key: string) => (await bucket.objects().get(key))?.bytes;
  const manifest = async (name: string) => JSON.parse((await bytes(PREFIX + name))!.toString()) as { size: number; parts: { k: string; n: number }[] };
  /** Part objects of `name` that its manifest does not name: what a lost or replaced write left. */
  const orphans = async (name: string) => {
    const named = new Set((await manifest(name)).parts.map((p) => p.k));
    return (await keys()).filter((k) => k.startsWith(`${PREFIX}.parts/${name}/`) && !named.has(k));
  };

  it('two host stores on one bucket: the one behind is refused, writes nothing, and then appends at the true end', async () => {
    const oldOwner = store();
    const newOwner = store();
    await oldOwner.put('shard-00/log', Buffer.from('head|'));
    await oldOwner.append('shard-00/log', 5, Buffer.from('one|'));
    // The new owner takes over and writes; the old one still believes the log ends at 9.
    await newOwner.append('shard-00/log', 9, Buffer.from('fence|'));
    await expect(oldOwner.append('shard-00/log', 9, Buffer.from('stale|'))).rejects.toBeInstanceOf(BlobConflictError);
    expect((await readWhole(newOwner, 'shard-00/log'))!.toString()).toBe('head|one|fence|');
    expect(await orphans('shard-00/log')).toEqual([]);
    // Its view read again, it appends where the log really ends.
    await oldOwner.append('shard-00/log', 15, Buffer.from('after|'));
    expect((await readWhole(newOwner, 'shard-00/log'))!.toString()).toBe('head|one|fence|after|');
  });

  it('of two appends racing at one end from two host stores, one counts and the other leaves no part behind', async () => {
    const a = store();
    const b = store();
    await a.put('shard-01/log', Buffer.alloc(0));
    await b.list('shard-01/');
    const results = await Promise.allSettled([a.append('shard-01/log', 0, Buffer.from('AAAA')), b.append('shard-01/log', 0, Buffer.from('BBBB'))]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect((await readWhole(a, 'shard-01/log'))!.toString()).toMatch(/^(AAAA|BBBB)$/);
    expect(await orphans('shard-01/log')).toEqual([]);
  });

  it('a log of 300 small appends is named by a bounded manifest, reads back whole, and leaves no merged part behind', async () => {
    const blobs = store();
    await blobs.put('shard-02/log', Buffer.alloc(0));
    let expected = '';
    for (let i = 0; i < 300; i++) {
      const entry = `entry ${i};`;
      await blobs.append('shard-02/log', expected.length, Buffer.from(entry));
      expected += entry;
    }
    expect((await readWhole(blobs, 'shard-02/log'))!.toString()).toBe(expected);
    expect((await manifest('shard-02/log')).parts.length).toBeLessThanOrEqual(65);
    expect((await manifest('shard-02/log')).size).toBe(expected.length);
    expect(await orphans('shard-02/log')).toEqual([]);
    // A second host store reads the same bytes from the bucket alone.
    expect((await readWhole(store(), 'shard-02/log'))!.toString()).toBe(expected);
  });

  it('cuts a torn tail inside a part, and the next append continues from the cut', async () => {
    const blobs = store();
    await blobs.put('shard-03/log', Buffer.from('kept'));
    await blobs.append('shard-03/log', 4, Buffer.from('+half-written'));
    await blobs.truncate('shard-03/log', 9, 17);
    expect((await readWhole(blobs, 'shard-03/log'))!.toString()).toBe('kept+half');
    await expect(blobs.truncate('shard-03/log', 4, 17)).rejects.toBeInstanceOf(BlobConflictError);
    await blobs.append('shard-03/log', 9, Buffer.from('|next'));
    expect((await readWhole(blobs, 'shard-03/log'))!.toString()).toBe('kept+half|next');
    expect(await orphans('shard-03/log')).toEqual([]);
  });

  it('puts a blob larger than one multipart part (a snapshot), replaces it at its version, and deletes every part with it', async () => {
    const blobs = store();
    const big = Buffer.alloc(9 * 1024 * 1024 + 3);
    for (let i = 0; i < big.length; i += 4096) big[i] = i % 251;
    const { version } = await blobs.put('shard-04/snapshot', (async function* () {
      for (let i = 0; i < big.length; i += 1024 * 1024) yield big.subarray(i, i + 1024 * 1024);
    })());
    expect((await readWhole(blobs, 'shard-04/snapshot'))!.equals(big)).toBe(true);
    expect((await blobs.list('shard-04/'))).toEqual([{ name: 'shard-04/snapshot', size: big.length, version }]);
    await blobs.put('shard-04/snapshot', Buffer.from('smaller'), { ifVersion: version });
    await expect(blobs.put('shard-04/snapshot', Buffer.from('stale'), { ifVersion: version })).rejects.toBeInstanceOf(BlobConflictError);
    expect(await orphans('shard-04/snapshot')).toEqual([]);
    await blobs.delete('shard-04/snapshot');
    expect((await keys()).filter((k) => k.includes('shard-04'))).toEqual([]);
    expect(await blobs.read('shard-04/snapshot')).toBeUndefined();
  });

  it('reads an object put in the bucket by hand (aws s3 cp) as a blob of its bytes, replaces it, and never appends to it or cuts it', async () => {
    const blobs = store();
    const objects = bucket.objects();
    // Even one that looks almost like a manifest: it is bytes, which the enclave authenticates.
    const apiKeys = Buffer.from('{"version":3,"keys":{},"signature":"c2ln"}');
    await objects.put(`${PREFIX}api-keys.signed.json`, apiKeys);
    await objects.put(`${PREFIX}shard-05/log`, Buffer.from('{"size":3,"parts":[]}'));
    expect((await readWhole(blobs, 'api-keys.signed.json'))!.equals(apiKeys)).toBe(true);
    expect((await readWhole(blobs, 'shard-05/log'))!.toString()).toBe('{"size":3,"parts":[]}');
    const [listed] = await blobs.list('api-keys');
    expect(listed).toMatchObject({ name: 'api-keys.signed.json', size: apiKeys.length });

    await expect(blobs.append('shard-05/log', 21, Buffer.from('more'))).rejects.toThrow('shard-05/log is an object put in the bucket by hand');
    await expect(blobs.truncate('shard-05/log', 3, 21)).rejects.toBeInstanceOf(BlobConflictError);
    expect((await bytes(`${PREFIX}shard-05/log`))!.toString()).toBe('{"size":3,"parts":[]}');
    expect((await keys()).filter((k) => k.startsWith(`${PREFIX}.parts/shard-05/`))).toEqual([]);

    // A put at its version replaces it with a blob of this store's own, which appends then extend.
    await blobs.put('shard-05/log', Buffer.from('head|'), { ifVersion: (await blobs.list('shard-05/'))[0].version });
    await blobs.append('shard-05/log', 5, Buffer.from('next|'));
    expect((await readWhole(blobs, 'shard-05/log'))!.toString()).toBe('head|next|');
    expect(await orphans('shard-05/log')).toEqual([]);
  });
});

describe('S3BlobStore on a server that compares If-Match with unquoted ETags (Ceph RADOS Gateway 16)', () => {
  let quirky: S3StandIn;
  beforeAll(async () => {
    quirky = await startS3StandIn('agent-test', 1000, { unquotedIfMatch: true });
  });
  afterAll(async () => {
    await quirky?.close();
  });
  const quirkyStore = () => new S3BlobStore(new S3Objects(quirky.bucket, { endpoint: quirky.endpoint, credentials: { accessKeyId: 'stand-in', secretAccessKey: 'stand-in' } }), 'svc/');

  it('appends and replaces at a version, and still refuses the writer behind and one of two racing appends', async () => {
    const blobs = quirkyStore();
    await blobs.put('shard-00/log', Buffer.from('head|'));
    await blobs.append('shard-00/log', 5, Buffer.from('one|'));
    await blobs.append('shard-00/log', 9, Buffer.from('two|'));
    expect((await readWhole(blobs, 'shard-00/log'))!.toString()).toBe('head|one|two|');

    // Another host store's first conditional write learns the server's way too; the one behind is refused.
    const behind = quirkyStore();
    await behind.list('shard-00/');
    await blobs.append('shard-00/log', 13, Buffer.from('fence|'));
    await expect(behind.append('shard-00/log', 13, Buffer.from('stale|'))).rejects.toBeInstanceOf(BlobConflictError);
    expect((await readWhole(blobs, 'shard-00/log'))!.toString()).toBe('head|one|two|fence|');

    const a = quirkyStore();
    const b = quirkyStore();
    await a.put('shard-01/log', Buffer.alloc(0));
    await b.list('shard-01/');
    const results = await Promise.allSettled([a.append('shard-01/log', 0, Buffer.from('AAAA')), b.append('shard-01/log', 0, Buffer.from('BBBB'))]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect((await readWhole(a, 'shard-01/log'))!.toString()).toMatch(/^(AAAA|BBBB)$/);

    const { version } = (await blobs.list('shard-00/'))[0];
    await blobs.put('shard-00/log', Buffer.from('replaced'), { ifVersion: version });
    await expect(blobs.put('shard-00/log', Buffer.from('stale'), { ifVersion: version })).rejects.toBeInstanceOf(BlobConflictError);
    expect((await readWhole(blobs, 'shard-00/log'))!.toString()).toBe('replaced');
  });
});
