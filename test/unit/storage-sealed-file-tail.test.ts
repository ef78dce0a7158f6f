import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CorruptStoreError } from '../../enclave/storage/errors.js';
import { deriveStorageKey, newHeader, readSealedLog, sealFrame, type ReadOptions } from '../../enclave/storage/sealed-file.js';

/**
 * What a log reader makes of the bytes after damage (enclave/storage/sealed-file.ts, the
 * scan of a damaged tail): a tail is cut only when no authentic frame of the file follows
 * the damage, whatever frame-shaped junk lies in between and however the host cuts the
 * bytes into chunks; and nothing past maxBytes is read. storage-sealed-file.test.ts holds
 * the plain cases.
 */
const key = deriveStorageKey(randomBytes(32));
const header = newHeader('log', key);
const frames = ['first', 'second', 'third', 'fourth', 'fifth'].map((p, i) => sealFrame(key, header, i, Buffer.from(p)));

/** A frame with one bit of its box flipped: same length, no longer authentic. */
function damaged(frame: Buffer): Buffer {
  const copy = Buffer.from(frame);
  copy[40] ^= 1;
  return copy;
}
/** Bytes shaped like a whole frame (magic, a plausible box length, nonce, box) that authenticate under no key. */
function forged(boxLength = 100): Buffer {
  const prefix = Buffer.alloc(8);
  prefix.write('SBX1');
  prefix.writeUInt32BE(boxLength, 4);
  return Buffer.concat([prefix, randomBytes(24 + boxLength)]);
}
/** A frame start whose box would run far past the end of the file: it looks like a frame cut short. */
function opening(): Buffer {
  const prefix = Buffer.alloc(8);
  prefix.write('SBX1');
  prefix.writeUInt32BE(1_000_000, 4);
  return Buffer.concat([prefix, randomBytes(24)]);
}

async function* inChunks(data: Buffer, size: number): AsyncIterable<Buffer> {
  for (let i = 0; i < data.length; i += size) yield Buffer.from(data.subarray(i, i + size));
}
async function read(data: Buffer, size: number, options: ReadOptions = { allowTail: true }) {
  const payloads: string[] = [];
  const r = await readSealedLog(inChunks(data, size), 'log', key, 'f', options, (p) => { payloads.push(p.toString()); });
  return { payloads, validEnd: r.validEnd, tail: r.tail };
}
const sizes = (data: Buffer) => [1, 5, 7, 33, 64, 100, 200, data.length];

describe('a damaged log tail', () => {
  it('is refused when an authentic frame follows the damage, whatever lies between and however it arrives', async () => {
    const cases: Record<string, Buffer[]> = {
      'damage, then frames': [frames[0], damaged(frames[1]), frames[2], frames[3]],
      'damage, forged frames, then a frame': [frames[0], damaged(frames[1]), forged(), forged(30), frames[2]],
      'damage, a frame start cut short, then a frame': [frames[0], damaged(frames[1]), opening(), frames[2]],
      'two frame starts cut short, then a frame': [frames[0], opening(), opening(), frames[2]],
      // Authentic under the same key, though of another file: only tampering puts it there.
      'damage, then a frame of another file': [frames[0], damaged(frames[1]), sealFrame(key, newHeader('log', key), 2, Buffer.from('elsewhere'))],
    };
    for (const [name, parts] of Object.entries(cases)) {
      const data = Buffer.concat([header, ...parts]);
      for (const size of sizes(data)) {
        await expect(read(data, size), `${name}, chunks of ${size}`).rejects.toThrow(/is followed by valid frames \(the file was altered or damaged in the middle\)/);
      }
    }
  });

  it('is cut whole when it holds only frame-shaped junk, and named at the first damaged byte where no tail is allowed', async () => {
    const good = Buffer.concat([header, frames[0], frames[1]]);
    const data = Buffer.concat([good, damaged(frames[2]), forged(), Buffer.from('SBX1'), forged(40), randomBytes(100), opening()]);
    for (const size of sizes(data)) {
      expect(await read(data, size), `chunks of ${size}`).toEqual({
        payloads: ['first', 'second'], validEnd: good.length, tail: { offset: good.length, bytes: data.length - good.length },
      });
      await expect(read(data, size, { allowTail: false }), `chunks of ${size}`).rejects.toThrow(
        new CorruptStoreError(`f: a frame that does not authenticate at byte ${good.length}`),
      );
    }
  });

  it('is refused when an authentic frame follows the damage within maxBytes, though junk runs on past it', async () => {
    const before = Buffer.concat([header, frames[0], damaged(frames[1]), forged(), frames[2]]);
    const data = Buffer.concat([before, Buffer.alloc(500, 0xff)]);
    for (const size of sizes(data)) {
      await expect(read(data, size, { allowTail: true, maxBytes: before.length + 10 }), `chunks of ${size}`).rejects.toThrow(/is followed by valid frames/);
    }
  });

  it('names the damage, not the limit, when a damaged frame comes before junk past maxBytes', async () => {
    const good = Buffer.concat([header, frames[0]]);
    const data = Buffer.concat([good, damaged(frames[1]), Buffer.alloc(200, 0xff)]);
    for (const size of sizes(data)) {
      await expect(read(data, size, { allowTail: false, maxBytes: data.length - 100 }), `chunks of ${size}`).rejects.toThrow(
        new CorruptStoreError(`f: a frame that does not authenticate at byte ${good.length}`),
      );
    }
  });

  it('cuts every authentic frame at or past maxBytes with the tail, however many there are', async () => {
    const kept = Buffer.concat([header, frames[0], frames[1], frames[2]]);
    const data = Buffer.concat([kept, frames[3], frames[4]]);
    for (const size of sizes(data)) {
      const r = await read(data, size, { allowTail: true, maxBytes: kept.length + 3 });
      expect({ payloads: r.payloads, validEnd: r.validEnd, tailAt: r.tail?.offset }, `chunks of ${size}`).toEqual({
        payloads: ['first', 'second', 'third'], validEnd: kept.length, tailAt: kept.length,
      });
      await expect(read(data, size, { allowTail: false, maxBytes: kept.length + 3 })).rejects.toThrow(
        new CorruptStoreError(`f: bytes past ${kept.length + 3}, the largest size this file can have at byte ${kept.length}`),
      );
    }
  });

  it('is read no further than the chunk that takes the file past maxBytes', async () => {
    const good = Buffer.concat([header, frames[0]]);
    let pulled = 0;
    async function* junkForEver(): AsyncIterable<Buffer> {
      yield good;
      for (;;) {
        pulled++;
        yield Buffer.alloc(8, 0xff);
      }
    }
    // 20 bytes past the last frame are allowed: the third chunk of 8 is the first past them.
    const r = await readSealedLog(junkForEver(), 'log', key, 'f', { allowTail: true, maxBytes: good.length + 20 }, () => {});
    expect(pulled).toBe(3);
    expect(r.tail).toEqual({ offset: good.length, bytes: 24 });
  });
});
