import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CorruptStoreError } from '../../enclave/storage/errors.js';
import {
  deriveStorageKey, MAX_BOX_BYTES, newHeader, readSealedFile, readSealedStream, sealFrame, type FileKind, type StorageKey,
} from '../../enclave/storage/sealed-file.js';
import { secretbox, secretboxOpen } from '../../enclave/storage/secretbox.js';
import { frameSpans } from '../helpers/sealed-files.js';

/**
 * The edges of the sealed file format (enclave/storage/sealed-file.ts): its exact bytes (a
 * store written by one build must open in the next), frames at the limits of their fields,
 * and every way a file can end. storage-sealed-file.test.ts holds the tampering.
 */
const key = deriveStorageKey(randomBytes(32));
const payloads = () => [Buffer.from('first'), Buffer.from('second'), Buffer.from('third')];

function sealedFile(items: Buffer[], kind: FileKind = 'log', k: StorageKey = key, header = newHeader(kind, k)): Buffer {
  return Buffer.concat([header, ...items.map((p, i) => sealFrame(k, header, i, p))]);
}

/** A frame under `k` whose sealed body is `body` exactly: what a faulty writer with the key could make. */
function rawFrame(body: Buffer, k: StorageKey = key, length?: number): Buffer {
  const nonce = randomBytes(24);
  const box = secretbox(body, nonce, k.box);
  const prefix = Buffer.alloc(8);
  prefix.write('SBX1');
  prefix.writeUInt32BE(length ?? box.length, 4);
  return Buffer.concat([prefix, nonce, box]);
}

/** header ‖ seq (u64 BE) ‖ payload: a frame's body. */
const body = (header: Buffer, seq: bigint, payload = Buffer.alloc(0)) => {
  const b = Buffer.alloc(40 + payload.length);
  header.copy(b, 0);
  b.writeBigUInt64BE(seq, 32);
  payload.copy(b, 40);
  return b;
};

const strict = (data: Buffer, kind: FileKind = 'log') => readSealedFile(data, kind, key, 'f', { allowTail: false });
const lenient = (data: Buffer) => readSealedFile(data, 'log', key, 'f', { allowTail: true });

async function* inChunks(data: Buffer, size: number): AsyncIterable<Buffer> {
  for (let i = 0; i < data.length; i += size) yield Buffer.from(data.subarray(i, i + size));
}
async function streamed(data: Buffer, size: number, kind: FileKind = 'log'): Promise<string[]> {
  const out: string[] = [];
  for await (const p of readSealedStream(inChunks(data, size), kind, key, 'f')) out.push(p.toString());
  return out;
}

describe('the sealed file format, byte for byte', () => {
  it('derives the store key and its id as the format says: HKDF-SHA256 of the sealing key, then a hash naming it', () => {
    const derived = deriveStorageKey(Buffer.alloc(32, 1));
    expect(Buffer.from(derived.box).toString('hex')).toBe('017dbac49f914edf6f5e35aa54530583b4ab62b7fe83ac510914a99ff4beb0d7');
    expect(derived.id.toString('hex')).toBe('fd4cc484e34f7cbd');
    expect(() => deriveStorageKey(Buffer.alloc(31))).toThrow('sealing key must be 32 bytes');
    expect(() => deriveStorageKey(Buffer.alloc(33))).toThrow('sealing key must be 32 bytes');
  });

  it('writes a header of magic, a random file id and the key id', () => {
    const log = newHeader('log', key);
    const snapshot = newHeader('snapshot', key);
    expect(log).toHaveLength(32);
    expect(log.subarray(0, 8).toString()).toBe('PASLOG01');
    expect(snapshot.subarray(0, 8).toString()).toBe('PASSNP01');
    expect(log.subarray(24)).toEqual(key.id);
    expect(log.subarray(8, 24)).not.toEqual(newHeader('log', key).subarray(8, 24));
  });

  it('writes a frame as "SBX1", the box length, the nonce and the box of header, sequence number and payload', () => {
    const header = newHeader('log', key);
    const frame = sealFrame(key, header, 258, Buffer.from('payload'));
    expect(frame.subarray(0, 4).toString()).toBe('SBX1');
    expect(frame.readUInt32BE(4)).toBe(frame.length - 32);
    expect(frame.readUInt32BE(4)).toBe(16 + 32 + 8 + 7);
    const opened = secretboxOpen(frame.subarray(32), frame.subarray(8, 32), key.box)!;
    expect(opened).toEqual(body(header, 258n, Buffer.from('payload')));
  });

  it('reads a file of its header alone as no frames, and an empty payload as a frame', async () => {
    const header = newHeader('log', key);
    expect(await strict(header)).toEqual({ header, payloads: [], validEnd: 32 });
    const data = sealedFile([Buffer.alloc(0), Buffer.from('x')]);
    expect((await strict(data)).payloads).toEqual([Buffer.alloc(0), Buffer.from('x')]);
    expect(await streamed(data, 5)).toEqual(['', 'x']);
  });
});

describe('frames at the limits of their fields', () => {
  it('refuses, as damage, an authentic frame too short to hold a header and sequence number (instead of reading past it)', async () => {
    const header = newHeader('log', key);
    const short = rawFrame(body(header, 0n).subarray(0, 39));
    await expect(strict(Buffer.concat([header, short]))).rejects.toThrow(new CorruptStoreError('f: a frame that does not authenticate at byte 32'));
  });

  it('refuses a box length above the largest frame as damage, not as a frame still being written', async () => {
    const header = newHeader('log', key);
    const over = Buffer.alloc(64);
    over.write('SBX1');
    over.writeUInt32BE(MAX_BOX_BYTES + 1, 4);
    await expect(strict(Buffer.concat([header, over]))).rejects.toThrow(new CorruptStoreError('f: a frame that does not authenticate at byte 32'));
    over.writeUInt32BE(MAX_BOX_BYTES, 4);
    await expect(strict(Buffer.concat([header, over]))).rejects.toThrow(new CorruptStoreError('f: an incomplete frame at byte 32'));
    // The smallest box a frame can have (MAC, header, sequence number) is read, not refused.
    over.writeUInt32BE(16 + 40 - 1, 4);
    await expect(strict(Buffer.concat([header, over]))).rejects.toThrow(new CorruptStoreError('f: a frame that does not authenticate at byte 32'));
  });

  it('refuses a sequence number beyond the safe integers as damage, and reads the largest safe one as out of place', async () => {
    const header = newHeader('log', key);
    const beyond = rawFrame(body(header, 2n ** 53n));
    await expect(strict(Buffer.concat([header, beyond]))).rejects.toThrow(new CorruptStoreError('f: a frame that does not authenticate at byte 32'));
    const largest = rawFrame(body(header, 2n ** 53n - 1n));
    await expect(strict(Buffer.concat([header, largest]))).rejects.toThrow(/frame 9007199254740991 found where frame 0 belongs/);
  });
});

describe('how a file may end', () => {
  it('calls a file shorter than its header too short, whole or in pieces', async () => {
    for (const data of [Buffer.alloc(0), newHeader('log', key).subarray(0, 31)]) {
      await expect(strict(data)).rejects.toThrow(new CorruptStoreError('f is too short to be a sealed log file'));
      await expect(streamed(data, 7)).rejects.toThrow(new CorruptStoreError('f is too short to be a sealed log file'));
    }
    await expect(streamed(Buffer.alloc(0), 1, 'snapshot')).rejects.toThrow('f is too short to be a sealed snapshot file');
  });

  it('names the wrong magic and the two key ids', async () => {
    const data = sealedFile(payloads());
    await expect(strict(data, 'snapshot')).rejects.toThrow(new CorruptStoreError('f is not a sealed snapshot file'));
    await expect(streamed(data, 1000, 'snapshot')).rejects.toThrow('f is not a sealed snapshot file');
    const other = deriveStorageKey(randomBytes(32));
    const foreign = sealedFile(payloads(), 'log', other);
    const message = `f was sealed with a different key (key id ${other.id.toString('hex')}, this enclave's is ${key.id.toString('hex')})`;
    await expect(strict(foreign)).rejects.toThrow(new CorruptStoreError(message));
    await expect(streamed(foreign, 10)).rejects.toThrow(message);
  });

  it('tells the start of a frame cut short from bytes that cannot start one', async () => {
    const data = sealedFile(payloads());
    const end = data.length;
    for (const tail of ['S', 'SBX', 'SBX1', 'SBX1\0\0\0\x50abc']) {
      await expect(strict(Buffer.concat([data, Buffer.from(tail, 'latin1')])), tail).rejects.toThrow(new CorruptStoreError(`f: an incomplete frame at byte ${end}`));
    }
    for (const tail of ['X', 'SX', 'SBX2', 'SBX2\0\0\0\x50abc']) {
      await expect(strict(Buffer.concat([data, Buffer.from(tail, 'latin1')])), tail).rejects.toThrow(new CorruptStoreError(`f: a frame that does not authenticate at byte ${end}`));
    }
    expect((await lenient(Buffer.concat([data, Buffer.from('SB')]))).tail).toEqual({ offset: end, bytes: 2 });
    expect((await lenient(Buffer.concat([data, Buffer.from('junk')]))).tail).toEqual({ offset: end, bytes: 4 });
  });

  it('refuses a frame prefix with no box and a box length below the smallest as damage, not as a frame cut short', async () => {
    const data = sealedFile(payloads());
    const prefix = Buffer.alloc(32);
    prefix.write('SBX1');
    await expect(strict(Buffer.concat([data, prefix]))).rejects.toThrow(new CorruptStoreError(`f: a frame that does not authenticate at byte ${data.length}`));
  });

  it('reads a file exactly as long as maxBytes whole, and names where the frames past maxBytes begin', async () => {
    const data = sealedFile(payloads());
    const spans = frameSpans(data);
    const whole = await readSealedFile(data, 'log', key, 'f', { allowTail: false, maxBytes: data.length });
    expect(whole.payloads).toHaveLength(3);
    expect(whole.tail).toBeUndefined();
    await expect(readSealedFile(data, 'log', key, 'f', { allowTail: false, maxBytes: spans[1][1] + 3 })).rejects.toThrow(
      new CorruptStoreError(`f: bytes past ${spans[1][1] + 3}, the largest size this file can have at byte ${spans[1][1]}`),
    );
  });

  it('streams a snapshot that is its header alone as no payloads', async () => {
    expect(await streamed(newHeader('snapshot', key), 32, 'snapshot')).toEqual([]);
    expect(await streamed(newHeader('snapshot', key), 7, 'snapshot')).toEqual([]);
  });

  it('names the byte of a bad or foreign frame in a snapshot that arrives whole', async () => {
    const data = sealedFile(payloads(), 'snapshot');
    const spans = frameSpans(data);
    const damaged = Buffer.from(data);
    damaged[spans[2][0] + 40] ^= 1;
    await expect(streamed(damaged, data.length, 'snapshot')).rejects.toThrow(new CorruptStoreError(`f: a frame that does not authenticate at byte ${spans[2][0]}`));
    const other = sealedFile(payloads(), 'snapshot');
    const otherSpans = frameSpans(other);
    const spliced = Buffer.concat([data.subarray(0, spans[2][0]), other.subarray(otherSpans[2][0], otherSpans[2][1])]);
    await expect(streamed(spliced, data.length, 'snapshot')).rejects.toThrow(new CorruptStoreError(`f: the frame at byte ${spans[2][0]} belongs to another file`));
  });

  it('refuses a damaged frame followed by an authentic one, also when the damage is a short box length', async () => {
    const header = newHeader('log', key);
    const frames = payloads().map((p, i) => sealFrame(key, header, i, p));
    const damaged = Buffer.from(frames[1]);
    damaged.writeUInt32BE(10, 4);
    await expect(lenient(Buffer.concat([header, frames[0], damaged, frames[2]]))).rejects.toThrow(/a frame that does not authenticate at byte \d+ is followed by valid frames/);
  });

  it('streams a snapshot in any chunking, and refuses one cut short, damaged, reordered or from another file', async () => {
    const data = sealedFile(payloads(), 'snapshot');
    for (const size of [1, 7, 33, data.length]) expect(await streamed(data, size, 'snapshot')).toEqual(['first', 'second', 'third']);
    const spans = frameSpans(data);
    await expect(streamed(data.subarray(0, data.length - 1), 9, 'snapshot')).rejects.toThrow(
      new CorruptStoreError(`f: an incomplete frame at byte ${spans[2][0]} (the file was cut short)`),
    );
    const damaged = Buffer.from(data);
    damaged[spans[1][0] + 40] ^= 1;
    await expect(streamed(damaged, 9, 'snapshot')).rejects.toThrow(new CorruptStoreError(`f: a frame that does not authenticate at byte ${spans[1][0]}`));
    const frame = (i: number) => data.subarray(spans[i][0], spans[i][1]);
    const reordered = Buffer.concat([data.subarray(0, 32), frame(0), frame(2), frame(1)]);
    await expect(streamed(reordered, 9, 'snapshot')).rejects.toThrow(/frame 2 found where frame 1 belongs \(frames were removed, reordered or repeated\)/);
    const other = sealedFile(payloads(), 'snapshot');
    const otherSpans = frameSpans(other);
    const spliced = Buffer.concat([data.subarray(0, spans[1][0]), other.subarray(otherSpans[1][0], otherSpans[1][1]), frame(2)]);
    await expect(streamed(spliced, 9, 'snapshot')).rejects.toThrow(new CorruptStoreError(`f: the frame at byte ${spans[1][0]} belongs to another file`));
  });

  it('names the byte where a frame from another file sits in a log', async () => {
    const data = sealedFile(payloads());
    const other = sealedFile(payloads());
    const spans = frameSpans(data);
    const otherSpans = frameSpans(other);
    const spliced = Buffer.concat([data.subarray(0, spans[1][0]), other.subarray(otherSpans[1][0], otherSpans[1][1]), data.subarray(spans[2][0])]);
    await expect(strict(spliced)).rejects.toThrow(new CorruptStoreError(`f: the frame at byte ${spans[1][0]} belongs to another file`));
  });
});
