import { statSync, unlinkSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { join } from 'node:path';

/**
 * One writer per data folder: two host stores appending to one log would corrupt it.
 *
 * The lock is a listening Unix socket named after the folder's device and inode (so every
 * path to the folder names the same lock). The kernel drops it the moment its holder dies,
 * by any means, SIGKILL included, so there is no stale lock to judge by a pid that may have
 * been reused (a pid file made with O_EXCL needs that guess), and binding is atomic, so of
 * two processes starting at once exactly one wins (flock would do too, but Node has it only
 * through a native addon or a helper process that may outlive us). On Linux the name is in
 * the abstract namespace, so no file is left behind; the lock then covers one network
 * namespace (a host, or a container: containers sharing one volume are not covered).
 * Elsewhere it is a socket file in the folder, removed when nobody answers on it.
 */
export type DataDirLock = { held: true; release(): void } | { held: false; holderPid?: number };

export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  const { dev, ino } = statSync(dataDir, { bigint: true });
  const abstract = process.platform === 'linux';
  const path = abstract ? `\0agent-service-data-dir:${dev}:${ino}` : join(dataDir, '.lock.sock');
  for (let attempt = 0; ; attempt++) {
    // Whoever asks is told the holder's pid, for the message that names it.
    const server = createServer((socket) => socket.end(`${process.pid}\n`));
    const failed = await new Promise<NodeJS.ErrnoException | undefined>((res) => {
      server.once('error', res);
      server.listen(path, () => res(undefined));
    });
    if (!failed) {
      server.unref();
      return { held: true, release: () => server.close() };
    }
    if (failed.code !== 'EADDRINUSE') throw failed;
    const holder = await askHolder(path);
    if (holder.alive || abstract || attempt > 0) return { held: false, holderPid: holder.pid };
    unlinkSync(path); // the socket file of a holder that died: nobody listens on it
  }
}

/** Whether a process listens on the lock, and its pid if it says within a second. */
function askHolder(path: string): Promise<{ alive: boolean; pid?: number }> {
  return new Promise((res) => {
    let alive = false;
    let answer = '';
    const socket = createConnection(path);
    const done = () => {
      socket.destroy();
      const pid = Number(answer.trim());
      res({ alive, pid: Number.isInteger(pid) && pid > 0 ? pid : undefined });
    };
    socket.setTimeout(1000, done);
    socket.on('connect', () => { alive = true; });
    socket.on('data', (chunk: Buffer) => { answer += chunk.toString(); });
    socket.on('end', done);
    socket.on('error', done);
  });
}
