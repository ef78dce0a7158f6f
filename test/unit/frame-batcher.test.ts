import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { FrameBatcher } from '../../enclave/api/sealed-stream-route.js';

const text = (bytes: Uint8Array) => Buffer.from(bytes).toString('utf8');

describe('FrameBatcher: the inner chunks of one turn of the event loop in one sealed frame', () => {
  it('gathers what is written in one turn, in order, and sends what comes later apart', async () => {
    const frames: string[] = [];
    const batcher = new FrameBatcher(async (bytes) => void frames.push(text(bytes)));
    await batcher.write(Buffer.from('a'));
    await batcher.write(Buffer.from('b'));
    await batcher.write(Buffer.from('c'));
    expect(frames).toEqual([]);
    await nextTurn();
    expect(frames).toEqual(['abc']);
    await batcher.write(Buffer.from('d'));
    await batcher.flush();
    expect(frames).toEqual(['abc', 'd']);
    await batcher.flush();
    expect(frames).toEqual(['abc', 'd']);
  });

  it('sends at once when a turn\'s chunks reach the frame size, and waits on that write', async () => {
    const frames: number[] = [];
    let release!: () => void;
    const batcher = new FrameBatcher((bytes) => {
      frames.push(bytes.length);
      return new Promise((resolve) => { release = resolve; });
    }, 10);
    void batcher.write(Buffer.alloc(6));
    let done = false;
    const big = batcher.write(Buffer.alloc(6)).then(() => { done = true; });
    expect(frames).toEqual([12]);
    await Promise.resolve();
    expect(done).toBe(false);
    release();
    await big;
    expect(done).toBe(true);
  });

  it('a failed write reaches the next writer, and the timer\'s flush leaves no unhandled rejection', async () => {
    const batcher = new FrameBatcher(async () => { throw new Error('sink closed'); });
    await batcher.write(Buffer.from('x'));
    await nextTurn();
    await expect(batcher.write(Buffer.from('y'))).rejects.toThrow('sink closed');
  });
});
