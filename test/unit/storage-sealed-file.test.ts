import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CorruptStoreError, PreparedStateStale } from '../../enclave/storage/errors.js';
import { decodePayload, encodeEvent, encodeHeader, type FileMeta } from '../../enclave/storage/payloads.js';
import { deriveStorageKey, newHeader, readSealedFile, readSealedLog, sealFrame, type StorageKey } from '../../enclave/storage/sealed-file.js';
import { frameSpans } from '../helpers/sealed-files.js';
import nacl from 'tweetnacl';
import { secretbox, secretboxOpen } from '../../enclave/storage/secretbox.js';

const key = deriveStorageKey(randomBytes(32));
const meta: FileMeta = { format: 1, kind: 'log', generation: 1, embedding_model: 'm', dimension: 3, created_at: 0 };

function sealedFile(payloads: Buffer[], k: StorageKey = key, header = newHeader('log', k)): Buffer {
  return Buffer.concat([header, ...payloads.map((p, i) => sealFrame(k, header, i, p))]);
}
const three = () => [encodeHeader(meta), Buffer.from('first entry'), Buffer.from('second entry')];
const read = (data: Buffer, allowTail = true) => readSealedFile(data, 'log', key, 'test.log', { allowTail });

describe('sealed files', () => {
  it('round-trip their payloads, and hold no plaintext', async () => {
    const secret = Buffer.from('a secret memory about Lisbon');
    const data = sealedFile([encodeHeader(meta), secret]);
    const file = await read(data);
    expect(file.payloads.map((p) => p.toString())).toEqual([encodeHeader(meta).toString(), secret.toString()]);
    expect(file.validEnd).toBe(data.length);
    expect(file.tail).toBeUndefined();
    expect(data.includes(secret)).toBe(false);
    expect(data.includes(Buffer.from('Lisbon'))).toBe(false);
  });

  it('use a fresh nonce per frame: the same payload twice seals differently', async () => {
    const header = newHeader('log', key);
    expect(sealFrame(key, header, 1, Buffer.from('x')).equals(sealFrame(key, header, 1, Buffer.from('x')))).toBe(false);
  });

  it('encode memory events with their vectors exactly', async () => {
    const record = { id: 'mem_1', object: 'memory' as const, tenant_id: 't', content: 'héllo ✓', metadata: { source: 's', n: 1.5, b: true, z: null }, created_at: 5 };
    const vector = Float32Array.from([0.1, -2.5, 3e-8]);
    expect(decodePayload(encodeEvent({ type: 'add', record, vector }), 'x')).toEqual({ type: 'event', event: { type: 'add', record, vector } });
    expect(decodePayload(encodeEvent({ type: 'delete', tenant_id: 't', id: 'mem_1' }), 'x'))
      .toEqual({ type: 'event', event: { type: 'delete', tenant_id: 't', id: 'mem_1' } });
  });

  it('refuse a file sealed under another key, saying so', async () => {
    const other = deriveStorageKey(randomBytes(32));
    await expect(read(sealedFile(three(), other))).rejects.toThrow(/sealed with a different key/);
  });

  it('cut a torn tail at every possible length, keeping every complete frame', async () => {
    const data = sealedFile(three());
    const [, second, last] = frameSpans(data);
    for (let end = last[0] + 1; end < data.length; end++) {
      const file = await read(data.subarray(0, end));
      expect(file.payloads).toHaveLength(2);
      expect(file.validEnd).toBe(second[1]);
      expect(file.tail).toEqual({ offset: second[1], bytes: end - second[1] });
    }
  });

  it('treat every one-byte change as refusal, except in the last frame, which is cut as a damaged tail', async () => {
    const data = sealedFile(three());
    const [, , last] = frameSpans(data);
    for (let i = 0; i < data.length; i++) {
      const changed = Buffer.from(data);
      changed[i] ^= 0x40;
      if (i < last[0]) {
        await expect(read(changed), `byte ${i}`).rejects.toThrow(CorruptStoreError);
      } else {
        const file = await read(changed);
        expect(file.payloads, `byte ${i}`).toHaveLength(2);
        expect(file.tail?.offset).toBe(last[0]);
      }
    }
  });

  it('refuse a damaged tail where no tail is allowed (snapshots, older logs)', async () => {
    const data = sealedFile(three());
    await expect(read(data.subarray(0, data.length - 3), false)).rejects.toThrow(/incomplete frame/);
  });

  it('refuse frames removed from the middle, reordered, repeated, or moved from another file', async () => {
    const payloads = [...three(), Buffer.from('third entry')];
    const data = sealedFile(payloads);
    const spans = frameSpans(data);
    const frame = (i: number) => data.subarray(spans[i][0], spans[i][1]);
    const head = data.subarray(0, 32);
    await expect(read(Buffer.concat([head, frame(0), frame(2), frame(3)]))).rejects.toThrow(/frame 2 found where frame 1 belongs/);
    await expect(read(Buffer.concat([head, frame(0), frame(2), frame(1), frame(3)]))).rejects.toThrow(/frame 2 found where frame 1 belongs/);
    await expect(read(Buffer.concat([head, frame(0), frame(1), frame(1), frame(2)]))).rejects.toThrow(/frame 1 found where frame 2 belongs/);

    // Same key, same position, another file: its frames authenticate but name another header.
    const other = sealedFile(payloads);
    const otherSpans = frameSpans(other);
    const spliced = Buffer.concat([head, frame(0), other.subarray(otherSpans[1][0], otherSpans[1][1]), frame(2), frame(3)]);
    await expect(read(spliced)).rejects.toThrow(/belongs to another file/);
    // …even as the last frame, where damage would otherwise be cut.
    await expect(read(Buffer.concat([head, frame(0), frame(1), frame(2), other.subarray(otherSpans[3][0], otherSpans[3][1])]))).rejects.toThrow(/another file/);
  });

  it('refuse a length field inflated in the middle, although it looks like a torn frame', async () => {
    const data = sealedFile([...three(), Buffer.from('third entry')]);
    const [, second] = frameSpans(data);
    data.writeUInt32BE(data.length, second[0] + 4);
    await expect(read(data)).rejects.toThrow(/followed by valid frames/);
  });

  it('refuse a file of the other kind', async () => {
    await expect(readSealedFile(sealedFile(three()), 'snapshot', key, 'x', { allowTail: false })).rejects.toThrow(/not a sealed snapshot file/);
  });
});

describe('secretbox (libsodium)', () => {
  it('seals and opens exactly as tweetnacl does, so files written by either open with either', async () => {
    for (const length of [0, 1, 31, 32, 33, 700, 70_000]) {
      const boxKey = randomBytes(32);
      const nonce = randomBytes(24);
      const message = randomBytes(length);
      const native = secretbox(message, nonce, boxKey);
      const js = nacl.secretbox(message, nonce, boxKey);
      expect(Buffer.from(js).equals(native)).toBe(true);
      expect(secretboxOpen(js, nonce, boxKey)!.equals(message)).toBe(true);
      expect(Buffer.from(nacl.secretbox.open(native, nonce, boxKey)!).equals(message)).toBe(true);
    }
  });

  it('refuses a box that was altered, a wrong key or nonce, and one too short to hold a tag', async () => {
    const boxKey = randomBytes(32);
    const nonce = randomBytes(24);
    const box = secretbox(Buffer.from('a memory'), nonce, boxKey);
    for (let i = 0; i < box.length; i++) {
      const altered = Buffer.from(box);
      altered[i] ^= 1;
      expect(secretboxOpen(altered, nonce, boxKey)).toBeUndefined();
    }
    expect(secretboxOpen(box, nonce, randomBytes(32))).toBeUndefined();
    expect(secretboxOpen(box, randomBytes(24), boxKey)).toBeUndefined();
    expect(secretboxOpen(box.subarray(0, 15), nonce, boxKey)).toBeUndefined();
  });

  it('read the same way however the bytes arrive in chunks, whole, torn and damaged files alike', async () => {
    const data = sealedFile([...three(), Buffer.from('third entry')]);
    const [, , , last] = frameSpans(data);
    const damaged = Buffer.from(data);
    damaged[last[0] + 40] ^= 1;
    for (const file of [data, data.subarray(0, data.length - 5), damaged]) {
      const whole = await read(file);
      for (const size of [1, 7, 64, 1000]) {
        const payloads: string[] = [];
        const streamed = await readSealedLog(inChunks(file, size), 'log', key, 'test.log', { allowTail: true }, (p) => { payloads.push(p.toString('hex')); });
        expect(payloads).toEqual(whole.payloads.map((p) => p.toString('hex')));
        expect({ validEnd: streamed.validEnd, tail: streamed.tail }).toEqual({ validEnd: whole.validEnd, tail: whole.tail });
      }
    }
  });

  it('stop reading a junk tail at maxBytes, the most its writer can have written (hold round two, 8)', async () => {
    const data = sealedFile(three());
    const junk = randomBytes(64 * 1024);
    let pulled = 0;
    async function* endless(): AsyncIterable<Buffer> {
      yield data;
      // A host streaming junk for ever after the last frame.
      for (;;) {
        pulled += junk.length;
        if (pulled > 100 * junk.length) throw new Error('read past the cap');
        yield junk;
      }
    }
    const read = await readSealedLog(endless(), 'log', key, 'test.log', { allowTail: true, maxBytes: data.length + 200_000 }, () => {});
    expect(read.frames).toBe(3);
    expect(read.validEnd).toBe(data.length);
    expect(read.tail!.offset).toBe(data.length);
    expect(pulled).toBeLessThan(6 * junk.length);
  });

  it('take nothing past maxBytes, however it arrives: cut as a tail of the last log, refused elsewhere', async () => {
    const data = sealedFile([...three(), Buffer.from('third entry')]);
    const [, , second] = frameSpans(data);
    for (const size of [10, data.length]) {
      const read = await readSealedLog(inChunks(data, size), 'log', key, 'x', { allowTail: true, maxBytes: second[1] + 3 }, () => {});
      expect({ frames: read.frames, validEnd: read.validEnd, tailAt: read.tail?.offset }).toEqual({ frames: 3, validEnd: second[1], tailAt: second[1] });
      await expect(readSealedLog(inChunks(data, size), 'log', key, 'x', { allowTail: false, maxBytes: second[1] + 3 }, () => {}))
        .rejects.toThrow(/the largest size this file can have/);
    }
  });
});

async function* inChunks(data: Buffer, size: number): AsyncIterable<Buffer> {
  for (let i = 0; i < data.length; i += size) yield Buffer.from(data.subarray(i, i + size));
}

describe('a sealed log read on after an earlier read (a shard read ahead, then opened)', () => {
  const payloads = (n: number, from = 0) => Array.from({ length: n }, (_, i) => Buffer.from(`entry ${from + i}`));
  /** Reads `data` in chunks of `size`, handing out payloads; returns them with what the read found. */
  async function readIn(data: Buffer, size: number, options: Parameters<typeof readSealedLog>[4]) {
    const out: Array<[number, string]> = [];
    const found = await readSealedLog(inChunks(data, size), 'log', key, 'test.log', options, (p, seq) => { out.push([seq, p.toString()]); });
    return { out, found };
  }
  /** What a read ahead keeps to go on from, and the bytes a host serves from there in `file`. */
  const goOn = (found: Awaited<ReturnType<typeof readIn>>['found'], frames: number) =>
    ({ bytes: found.validEnd, frames, header: found.header, last: found.last! });

  it('reads from the last frame read before once it is the same, and hands out only the frames after it, numbered on', async () => {
    const header = newHeader('log', key);
    const early = sealedFile([encodeHeader(meta), ...payloads(3)], key, header);
    // The same file after three more appends.
    const file = Buffer.concat([early, ...payloads(3, 3).map((p, i) => sealFrame(key, header, 4 + i, p))]);
    for (const size of [1, 7, 64, file.length]) {
      const first = await readIn(early, size, { allowTail: true, keepLast: true });
      expect(first.found).toMatchObject({ frames: 4, validEnd: early.length });
      const after = goOn(first.found, 4);
      expect(after.last.offset + after.last.bytes.length).toBe(early.length);
      const again = await readIn(file.subarray(after.last.offset), size, { allowTail: true, after });
      expect(again.out).toEqual([[4, 'entry 3'], [5, 'entry 4'], [6, 'entry 5']]);
      expect(again.found).toMatchObject({ frames: 7, validEnd: file.length });
      // Its last frame is the file's last, to go on from again.
      expect(again.found.last!.bytes).toEqual(file.subarray(again.found.last!.offset));
      // Nothing written since: nothing handed out, and the same last frame.
      const none = await readIn(early.subarray(after.last.offset), size, { allowTail: true, after });
      expect(none.out).toEqual([]);
      expect(none.found.last).toEqual(after.last);
    }
  });

  it('the last frame kept is the last good one, not a torn tail', async () => {
    const file = sealedFile([encodeHeader(meta), ...payloads(2)]);
    const whole = await readIn(file, 64, { allowTail: true, keepLast: true });
    const torn = await readIn(Buffer.concat([file, file.subarray(40, 70)]), 64, { allowTail: true, keepLast: true });
    expect(torn.found.tail).toBeDefined();
    expect(torn.found.last).toEqual(whole.found.last);
  });

  it('refuses (PreparedStateStale) other bytes where the last frame read was, or fewer of them, before handing anything out', async () => {
    const header = newHeader('log', key);
    const early = sealedFile([encodeHeader(meta), ...payloads(3)], key, header);
    const { found } = await readIn(early, 64, { allowTail: true, keepLast: true });
    const after = goOn(found, 4);
    // The same entries sealed again (another writer's copy of the file, fresh nonces), and more: its frames line up with the read's.
    const resealed = sealedFile([encodeHeader(meta), ...payloads(5)], key, header);
    const handed: string[] = [];
    await expect(readSealedLog(inChunks(resealed.subarray(after.last.offset), 64), 'log', key, 'test.log', { allowTail: true, after }, (p) => { handed.push(p.toString()); }))
      .rejects.toBeInstanceOf(PreparedStateStale);
    expect(handed).toEqual([]);
    // Cut short, inside the last frame.
    await expect(readIn(early.subarray(after.last.offset, early.length - 5), 64, { allowTail: true, after })).rejects.toBeInstanceOf(PreparedStateStale);
    // Nothing at all (the blob shorter than the offset).
    await expect(readIn(Buffer.alloc(0), 64, { allowTail: true, after })).rejects.toBeInstanceOf(PreparedStateStale);
    // Bytes from another offset: the file's start (a host store that ignores the offset), or one frame late.
    await expect(readIn(early, 64, { allowTail: true, after })).rejects.toBeInstanceOf(PreparedStateStale);
    await expect(readIn(early.subarray(after.last.offset + 1), 64, { allowTail: true, after })).rejects.toBeInstanceOf(PreparedStateStale);
    // One byte flipped in the last frame.
    const flipped = Buffer.from(early.subarray(after.last.offset));
    flipped[30] ^= 1;
    await expect(readIn(flipped, 64, { allowTail: true, after })).rejects.toBeInstanceOf(PreparedStateStale);
  });
});
