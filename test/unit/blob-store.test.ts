import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Server, type ServerDuplexStream } from '@grpc/grpc-js';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobConflictError, readWhole, type BlobStore } from '../../common/blob-store.js';
import { listen } from '../../common/grpc-listen.js';
import { createLogger } from '../../common/logger.js';
import { hostStoreChannelOptions, hostStoreProto, type AppendAckIn, type StreamedAppendIn } from '../../common/proto.js';
import { GrpcBlobStore } from '../../enclave/storage/grpc-blob-store.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { S3BlobStore } from '../../host-store/s3-blob-store.js';
import { S3Objects } from '../../host-store/s3-objects.js';
import { startS3StandIn, type S3StandIn } from '../helpers/s3-stand-in.js';
import { createHostStoreServer } from '../../host-store/grpc-service.js';
import { freePort } from '../helpers/service.js';

/**
 * The BlobStore contract: the host store's folder directly, the same through gRPC as the enclave
 * uses it, and the S3 backend against a loopback stand-in of S3's API and, when S3_TEST_ENDPOINT
 * (with S3_TEST_BUCKET and AWS credentials in the environment) names one, a real S3 server.
 */
const dirs: string[] = [];
const servers: grpc.Server[] = [];
const standIns: S3StandIn[] = [];
const fresh = () => {
  const dir = mkdtempSync(join(tmpdir(), 'blobs-'));
  dirs.push(dir);
  return dir;
};
afterAll(async () => {
  for (const standIn of standIns) await standIn.close();
  for (const server of servers) server.forceShutdown();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function overGrpc(): Promise<{ blobs: BlobStore; dir: string }> {
  const dir = fresh();
  const server = createHostStoreServer(new FsBlobStore(dir), createLogger('test-host-store', 'silent'));
  servers.push(server);
  const port = await listen(server, `127.0.0.1:${await freePort()}`);
  return { blobs: new GrpcBlobStore(`127.0.0.1:${port}`, { callTimeoutMs: 5000 }), dir };
}

/** What a test may look at besides the contract: where the blobs are (a folder or a bucket), to see what a failed write left. */
interface Made {
  blobs: BlobStore;
  /** The folder (file backend): no name may reach outside it. */
  dir?: string;
  /** What an abandoned write of `name` left behind: temporary files, or part objects no manifest names. */
  leftovers(name: string): string[];
}

const tmpFiles = (dir: string) => (name: string) => {
  const folder = join(dir, name.includes('/') ? name.slice(0, name.indexOf('/')) : '');
  return existsSync(folder) ? readdirSync(folder).filter((n) => n.endsWith('.tmp')) : [];
};

/** The stand-in checks no signatures; the SDK still signs every request with some key. */
const STAND_IN_KEYS = { accessKeyId: 'stand-in', secretAccessKey: 'stand-in' };

async function overS3StandIn(): Promise<Made> {
  const standIn = await startS3StandIn('agent-test', 7);
  standIns.push(standIn);
  const prefix = 'service-1/';
  return {
    blobs: new S3BlobStore(new S3Objects(standIn.bucket, { endpoint: standIn.endpoint, credentials: STAND_IN_KEYS }), prefix),
    leftovers: (name) => {
      const named = new Set((JSON.parse(standIn.bytes(prefix + name)?.toString() ?? '{"parts":[]}') as { parts: { k: string }[] }).parts.map((p) => p.k));
      return standIn.keys().filter((k) => k.startsWith(`${prefix}.parts/${name}/`) && !named.has(k));
    },
  };
}

const implementations: Array<[string, () => Promise<Made>]> = [
  ['FsBlobStore (the host store\'s folder)', async () => { const dir = fresh(); return { blobs: new FsBlobStore(dir), dir, leftovers: tmpFiles(dir) }; }],
  ['GrpcBlobStore (the enclave\'s client, over the host store\'s gRPC service)', async () => { const made = await overGrpc(); return { ...made, leftovers: tmpFiles(made.dir) }; }],
  ['S3BlobStore (a loopback stand-in of S3\'s API)', overS3StandIn],
];
const realS3 = process.env.S3_TEST_ENDPOINT;
if (realS3) {
  implementations.push([`S3BlobStore (S3 at ${realS3})`, async () => ({
    blobs: new S3BlobStore(new S3Objects(process.env.S3_TEST_BUCKET ?? 'agent-service-test', { endpoint: realS3 }), `contract-${Date.now()}/`),
    leftovers: () => [],
  })]);
}

async function* pieces(parts: string[], failAfter?: number): AsyncIterable<Uint8Array> {
  for (const [i, part] of parts.entries()) {
    if (failAfter !== undefined && i >= failAfter) throw new Error('the writer gave up');
    yield Buffer.from(part);
  }
}

describe.each(implementations)('BlobStore contract: %s', (_name, make) => {
  let blobs: BlobStore;
  let made: Made;
  beforeAll(async () => {
    made = await make();
    ({ blobs } = made);
  });

  it('puts, reads, lists and deletes blobs, in a folder of one level at most', async () => {
    await blobs.put('memory/a.sealed', Buffer.from('alpha'));
    await blobs.put('key.json', pieces(['{"k":', '1}']));
    expect((await readWhole(blobs, 'memory/a.sealed'))!.toString()).toBe('alpha');
    expect((await readWhole(blobs, 'key.json'))!.toString()).toBe('{"k":1}');
    expect(await readWhole(blobs, 'memory/missing')).toBeUndefined();
    expect(await blobs.list('memory/')).toEqual([{ name: 'memory/a.sealed', size: 5, version: expect.any(String) }]);
    await blobs.delete('memory/a.sealed');
    await blobs.delete('memory/a.sealed');
    expect(await blobs.list('memory/')).toEqual([]);
  });

  it('appends only at the blob\'s end: an append anywhere else is refused and writes nothing', async () => {
    await blobs.put('memory/log', Buffer.from('head'));
    await blobs.append('memory/log', 4, Buffer.from('-one'));
    // A second writer that still thinks the log ends at 4, a repeated append, a gap: all refused.
    await expect(blobs.append('memory/log', 4, Buffer.from('-two'))).rejects.toBeInstanceOf(BlobConflictError);
    // Typed and clear through gRPC too: the blob, where it ends, and the offset asked.
    await expect(blobs.append('memory/log', 4, Buffer.from('-two'))).rejects.toThrow(/memory\/log ends at 8; an append at 4 is refused/);
    await expect(blobs.append('memory/log', 100, Buffer.from('x'))).rejects.toBeInstanceOf(BlobConflictError);
    await expect(blobs.append('memory/log', 0, Buffer.from('x'))).rejects.toBeInstanceOf(BlobConflictError);
    await blobs.append('memory/log', 8, Buffer.from('-three'));
    expect((await readWhole(blobs, 'memory/log'))!.toString()).toBe('head-one-three');
  });

  it('cuts a tail only by a truncate, and only from the size its writer names', async () => {
    await blobs.put('memory/torn', Buffer.from('good-torn'));
    await expect(blobs.truncate('memory/torn', 4, 8)).rejects.toBeInstanceOf(BlobConflictError);
    await expect(blobs.truncate('memory/torn', 4, 8)).rejects.toThrow(/memory\/torn has 9 bytes; a cut to 4 of 8 bytes is refused/);
    await expect(blobs.truncate('memory/torn', 10, 9)).rejects.toBeInstanceOf(BlobConflictError);
    expect((await readWhole(blobs, 'memory/torn'))!.toString()).toBe('good-torn');
    await blobs.truncate('memory/torn', 4, 9);
    expect((await readWhole(blobs, 'memory/torn'))!.toString()).toBe('good');
    await blobs.append('memory/torn', 4, Buffer.from('+more'));
    expect((await readWhole(blobs, 'memory/torn'))!.toString()).toBe('good+more');
  });

  it('puts if absent, or if at a version, and each write makes a new version', async () => {
    const first = await blobs.put('memory/snap', Buffer.from('one'), { ifAbsent: true });
    await expect(blobs.put('memory/snap', Buffer.from('two'), { ifAbsent: true })).rejects.toBeInstanceOf(BlobConflictError);
    expect((await blobs.list('memory/snap'))[0].version).toBe(first.version);
    const second = await blobs.put('memory/snap', Buffer.from('two'), { ifVersion: first.version });
    expect(second.version).not.toBe(first.version);
    // A writer holding the first version (an old owner) is refused, and the blob keeps the second's bytes.
    await expect(blobs.put('memory/snap', Buffer.from('stale'), { ifVersion: first.version })).rejects.toBeInstanceOf(BlobConflictError);
    expect((await readWhole(blobs, 'memory/snap'))!.toString()).toBe('two');
    await expect(blobs.put('memory/none', Buffer.from('x'), { ifVersion: first.version })).rejects.toBeInstanceOf(BlobConflictError);
    expect(await readWhole(blobs, 'memory/none')).toBeUndefined();
    // Appends and truncates change the version too.
    await blobs.append('memory/snap', 3, Buffer.from('!'));
    const appended = (await blobs.list('memory/snap'))[0].version;
    expect(appended).not.toBe(second.version);
    await expect(blobs.put('memory/snap', Buffer.from('x'), { ifVersion: second.version })).rejects.toBeInstanceOf(BlobConflictError);
    await blobs.put('memory/snap', Buffer.from('three'), { ifVersion: appended });
    expect((await readWhole(blobs, 'memory/snap'))!.toString()).toBe('three');
  });

  it('lets exactly one of two racing conditional writers through', async () => {
    await blobs.put('memory/race', Buffer.from('0123'));
    const appends = await Promise.allSettled([blobs.append('memory/race', 4, Buffer.from('AA')), blobs.append('memory/race', 4, Buffer.from('BB'))]);
    expect(appends.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect((await readWhole(blobs, 'memory/race'))!.toString()).toMatch(/^0123(AA|BB)$/);
    const { version } = (await blobs.list('memory/race'))[0];
    const puts = await Promise.allSettled([blobs.put('memory/race', Buffer.from('x'), { ifVersion: version }), blobs.put('memory/race', Buffer.from('y'), { ifVersion: version })]);
    expect(puts.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
  });

  it('appends to many blobs at once (shards, each with its segment): none fails because another blob\'s file was opened', async () => {
    const names = Array.from({ length: 12 }, (_, i) => `shard-${String(i).padStart(2, '0')}/log`);
    for (const name of names) await blobs.put(name, Buffer.alloc(0));
    for (let round = 0; round < 20; round++) {
      await Promise.all(names.map((name) => blobs.append(name, round * 3, Buffer.from('abc'))));
    }
    for (const name of names) expect((await readWhole(blobs, name))!.length).toBe(60);
  });

  it('reads a blob from a byte offset: the bytes from there on, whichever write made them, and none at or past its end', async () => {
    await blobs.put('memory/segment', Buffer.from('header|'));
    await blobs.append('memory/segment', 7, Buffer.from('frame-1|'));
    await blobs.append('memory/segment', 15, Buffer.from('frame-2|'));
    const from = async (offset: number) => {
      const chunks = await blobs.read('memory/segment', offset);
      const parts: Buffer[] = [];
      for await (const chunk of chunks!) parts.push(chunk);
      return Buffer.concat(parts).toString();
    };
    expect(await from(0)).toBe('header|frame-1|frame-2|');
    // Inside the first write, at the boundary of two, inside the last.
    expect(await from(3)).toBe('der|frame-1|frame-2|');
    expect(await from(7)).toBe('frame-1|frame-2|');
    expect(await from(20)).toBe('-2|');
    expect(await from(23)).toBe('');
    expect(await from(1000)).toBe('');
    expect(await blobs.read('memory/none', 5)).toBeUndefined();
    await expect(blobs.read('memory/segment', -1)).rejects.toThrow();
  });

  it('streams a large blob in pieces', async () => {
    const big = Buffer.alloc(5 * 1024 * 1024 + 17, 7);
    await blobs.put('memory/big', big);
    const chunks = await blobs.read('memory/big');
    let count = 0;
    let bytes = 0;
    for await (const chunk of chunks!) {
      count++;
      bytes += chunk.length;
    }
    expect(bytes).toBe(big.length);
    expect(count).toBeGreaterThan(1);
  });

  it('leaves the old blob whole when a put is abandoned part-way, and no temporary file behind', async () => {
    await blobs.put('memory/snapshot.sealed', Buffer.from('the old snapshot'));
    await expect(blobs.put('memory/snapshot.sealed', pieces(['the new', ' snapsh', 'ot'], 2))).rejects.toThrow();
    expect((await readWhole(blobs, 'memory/snapshot.sealed'))!.toString()).toBe('the old snapshot');
    // The host store may take a moment to see the stream end.
    for (let i = 0; i < 50 && made.leftovers('memory/snapshot.sealed').length > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(made.leftovers('memory/snapshot.sealed')).toEqual([]);
  });

  it('refuses names that could leave the folder, or are not blob names', async () => {
    for (const name of ['../escape', '/etc/passwd', 'a/b/c', '.hidden', 'UPPER', 'memory/x.tmp', '']) {
      await expect(blobs.put(name, Buffer.from('x')), name).rejects.toThrow();
    }
    if (made.dir) expect(existsSync(join(made.dir, '..', 'escape'))).toBe(false);
  });
});

describe('GrpcBlobStore against a host store that does not answer an append', () => {
  it('fails the append at its time limit, naming the blob, and the next append on the same stream is answered', async () => {
    const folder = new FsBlobStore(fresh());
    await folder.put('memory/log-000000000001.sealed', Buffer.from('head'));
    // A host store of one RPC, Appends, that swallows the first append it is sent.
    let seen = 0;
    const server = new Server(hostStoreChannelOptions);
    server.addService(hostStoreProto().HostStore.service, {
      Appends: (call: ServerDuplexStream<StreamedAppendIn, AppendAckIn>) => {
        call.on('data', ({ id, append }: StreamedAppendIn) => {
          if (seen++ === 0) return;
          folder.append(append!.name, Number(append!.offset), append!.data).then(() => call.write({ id, error: '', conflict: false }), (err: Error) => call.write({ id, error: err.message, conflict: false }));
        });
        call.on('end', () => call.end());
      },
    });
    servers.push(server);
    const port = await listen(server, `127.0.0.1:${await freePort()}`);
    const blobs = new GrpcBlobStore(`127.0.0.1:${port}`, { callTimeoutMs: 300 });
    await expect(blobs.append('memory/log-000000000001.sealed', 4, Buffer.from('lost'))).rejects.toThrow('host store append memory/log-000000000001.sealed: no answer within 300 ms');
    await blobs.append('memory/log-000000000001.sealed', 4, Buffer.from('kept'));
    expect((await readWhole(folder, 'memory/log-000000000001.sealed'))!.toString()).toBe('headkept');
    await blobs.close();
  });
});
