/**
 * "A write is acknowledged only once the host store has it on disk" (docs/durability.md),
 * observed where it happens: the built host store runs under strace, a client (the enclave's
 * own GrpcBlobStore) puts and appends, and the system calls must show each blob's bytes
 * written, then flushed (fsync/fdatasync on that file), and only then a reply on the socket.
 * A SIGKILL keeps the page cache, so the crash tests cannot see a missing flush; this can.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcBlobStore } from '../../enclave/storage/grpc-blob-store.js';
import { nodeArgs } from '../../scripts/lib/node-args.js';
import { freePort, waitFor } from '../helpers/service.js';
import { isSocketWrite, readStraceLog, type Syscall } from '../helpers/strace.js';
import { ensureCommand } from '../helpers/system-package.js';

const root = resolve(import.meta.dirname, '../..');
let dir: string;
let dataDir: string;
let traceFile: string;
let hostStore: ChildProcess;
let client: GrpcBlobStore;
let output = '';

beforeAll(async () => {
  const strace = ensureCommand('strace', 'strace');
  dir = mkdtempSync(join(tmpdir(), 'agent-fsync-'));
  dataDir = join(dir, 'data');
  traceFile = join(dir, 'trace.txt');
  const address = `127.0.0.1:${await freePort()}`;
  const env = { ...process.env, DATA_DIR: dataDir, HOST_STORE_ADDR: address, LOG_LEVEL: 'info' };
  // -f: every thread (libuv's pool does the file calls, the main thread the socket writes);
  // -yy: each descriptor's path or socket; -o: one log, in the order the calls happened.
  hostStore = spawn(strace, ['-f', '-qq', '-yy', '-s', '0', '-e', 'trace=write,writev,pwrite64,pwritev,pwritev2,sendmsg,sendto,fsync,fdatasync,close', '-o', traceFile,
    process.execPath, ...nodeArgs(join(root, 'dist/host-store/main.js'), env)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  hostStore.stdout!.on('data', (d: Buffer) => { output += d.toString(); });
  hostStore.stderr!.on('data', (d: Buffer) => { output += d.toString(); });
  await waitFor(async () => output.includes('host store listening'), 60_000, () => `waiting for the host store under strace to listen\n${output}`);
  client = new GrpcBlobStore(address);
});
afterAll(async () => {
  await client?.close();
  if (hostStore && hostStore.exitCode === null) {
    // strace ignores SIGTERM: stop the host store it runs, and strace ends with it.
    const traced = readFileSync(`/proc/${hostStore.pid}/task/${hostStore.pid}/children`, 'utf8').trim().split(/\s+/).map(Number);
    await new Promise<void>((res) => {
      hostStore.once('exit', () => res());
      for (const pid of traced) process.kill(pid, 'SIGTERM');
    });
  }
  rmSync(dir, { recursive: true, force: true });
});

/**
 * For each write of `path`'s bytes: the first reply the process sent after it must come
 * after a flush of that same file. Returns the problems found (none when all is well).
 */
function flushedBeforeReplies(calls: Syscall[], path: (target: string) => boolean, flush: string): string[] {
  const writes = calls.filter((c) => /^pwrite/.test(c.name) && path(c.target));
  if (writes.length === 0) return ['no write of the blob was traced'];
  return writes.flatMap((w) => {
    const reply = calls.find((c) => isSocketWrite(c) && c.started > w.ended);
    if (!reply) return [`no reply after the write at line ${w.started}`];
    const flushed = calls.some((c) => c.name === flush && c.target === w.target && c.started > w.ended && c.ended < reply.started);
    return flushed ? [] : [`${w.name} of ${w.target} (line ${w.started}) was followed by a reply (line ${reply.started}) with no ${flush} of it in between`];
  });
}

describe('the host store flushes a write to disk before it acknowledges it', () => {
  it('an append: pwrite, then fdatasync of that file, then the acknowledgement', async () => {
    await client.put('memory/log-000000000001.sealed', Buffer.alloc(16, 1));
    for (let i = 0; i < 5; i++) await client.append('memory/log-000000000001.sealed', 16 + i * 100, Buffer.alloc(100, i));
    const calls = readStraceLog(traceFile);
    const log = join(dataDir, 'memory/log-000000000001.sealed');
    expect(flushedBeforeReplies(calls, (t) => t === log, 'fdatasync')).toEqual([]);
    expect(calls.filter((c) => /^pwrite/.test(c.name) && c.target === log)).toHaveLength(5);
  });

  it('a put: the temporary file is written, then fsynced, then renamed into place and acknowledged', async () => {
    await client.put('memory/snapshot.sealed', Buffer.alloc(4096, 7));
    const calls = readStraceLog(traceFile);
    const tmp = join(dataDir, 'memory/snapshot.sealed.tmp');
    expect(flushedBeforeReplies(calls, (t) => t === tmp, 'fsync')).toEqual([]);
  });
});

describe('the host store keeps the logs it appends to open', () => {
  it('appends that take turns over two segments of each of a cluster\'s 64 shards close no log: an append is a write and a flush, not also an open and a close', async () => {
    const names = Array.from({ length: 128 }, (_, i) => `shard-${String(i % 64).padStart(2, '0')}/log-00000000000${1 + Math.floor(i / 64)}.sealed`);
    for (const name of names) await client.put(name, Buffer.alloc(16, 1));
    for (let round = 0; round < 3; round++) {
      await Promise.all(names.map((name) => client.append(name, 16 + round * 100, Buffer.alloc(100, round))));
    }
    const logs = new Set(names.map((name) => join(dataDir, name)));
    const calls = readStraceLog(traceFile);
    expect(calls.filter((c) => /^pwrite/.test(c.name) && logs.has(c.target))).toHaveLength(3 * names.length);
    expect(calls.filter((c) => c.name === 'close' && logs.has(c.target)).map((c) => c.target)).toEqual([]);
  });
});
