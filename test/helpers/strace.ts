import { readFileSync } from 'node:fs';

/**
 * One system call from an `strace -f -yy` log, in the order strace reported it. A call that
 * another thread interrupted is reported twice ("<unfinished ...>", then "<... resumed>"):
 * `started` is where it began and `ended` where it returned, as line numbers of the log, so
 * "A returned before B began" is `a.ended < b.started`, whichever threads they ran on.
 */
export interface Syscall {
  pid: number;
  name: string;
  /** The file descriptor's annotation from -yy: a path, or e.g. "TCP:[127.0.0.1:1->127.0.0.1:2]". */
  target: string;
  started: number;
  ended: number;
}

const CALL = /^(\d+)\s+(?:[\d:.]+\s+)?(\w+)\((\d+)<([^>]*)>(.*)$/;
const RESUMED = /^(\d+)\s+(?:[\d:.]+\s+)?<\.\.\. (\w+) resumed>/;

/** Parses a log written by `strace -f -yy -o <file>` (any -e trace= set of fd calls). */
export function readStraceLog(file: string): Syscall[] {
  const calls: Syscall[] = [];
  const open = new Map<string, Syscall>();
  readFileSync(file, 'utf8').split('\n').forEach((line, n) => {
    const call = CALL.exec(line);
    if (call) {
      const entry: Syscall = { pid: Number(call[1]), name: call[2], target: call[4], started: n, ended: n };
      calls.push(entry);
      if (call[5].includes('<unfinished ...>')) open.set(`${entry.pid}/${entry.name}`, entry);
      return;
    }
    const resumed = RESUMED.exec(line);
    if (resumed) {
      const key = `${resumed[1]}/${resumed[2]}`;
      const entry = open.get(key);
      if (entry) {
        entry.ended = n;
        open.delete(key);
      }
    }
  });
  return calls;
}

/** Writes on a TCP socket: what the process sends its peers (here, its gRPC replies). */
export const isSocketWrite = (c: Syscall) => /^(write|writev|sendmsg|sendto)$/.test(c.name) && c.target.startsWith('TCP');
