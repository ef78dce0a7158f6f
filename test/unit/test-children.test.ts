import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { endLeftovers, track } from '../helpers/children.js';

const idle = (code: string) => spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'ignore'] });
const ended = (child: ReturnType<typeof idle>) => child.exitCode !== null || child.signalCode !== null;

describe('the processes a test leaves running (test/helpers/children.ts)', () => {
  it('are ended after the file: SIGTERM first, SIGKILL for one that ignores it, and named', async () => {
    const polite = track(idle('setInterval(() => {}, 1000)'), 'polite');
    const stubborn = track(idle('process.on("SIGTERM", () => {}); setInterval(() => {}, 1000); console.log("ignoring SIGTERM")'), 'stubborn');
    // Once it says so, it has its handler (before, the first SIGTERM would end it).
    await new Promise((resolve) => stubborn.stdout!.once('data', resolve));
    const left = await endLeftovers(200);
    expect(left).toEqual([`polite (pid ${polite.pid})`, `stubborn (pid ${stubborn.pid})`]);
    expect(polite.signalCode).toBe('SIGTERM');
    expect(stubborn.signalCode).toBe('SIGKILL');
    expect(await endLeftovers(200)).toEqual([]);
  });

  it('forgets a process once it has exited', async () => {
    const quick = track(idle(''), 'quick');
    await new Promise((resolve) => quick.once('exit', resolve));
    expect(ended(quick)).toBe(true);
    expect(await endLeftovers(200)).toEqual([]);
  });
});
