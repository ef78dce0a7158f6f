import { describe, expect, it, vi } from 'vitest';
import type { MemoryEvent } from '../../enclave/memory/types.js';
import { decodePayload, encodeEvent } from '../../enclave/storage/payloads.js';

/**
 * A store must read the same on any machine: vectors are float32 little-endian whatever the
 * CPU. The machines the tests run on are little-endian, so this file reports the CPU as
 * big-endian to payloads.ts, which then writes and reads one float at a time, and checks that
 * the bytes are the ones storage-payloads.test.ts pins for the little-endian copy.
 */
vi.mock('node:os', async (original) => ({ ...await original<typeof import('node:os')>(), endianness: () => 'BE' }));

const record = { id: 'mem_1', object: 'memory' as const, tenant_id: 't', content: 'x', metadata: {}, created_at: 5 };
const body = Buffer.from(JSON.stringify(record));
const u32 = (n: number) => n.toString(16).padStart(8, '0');
/** 1.0, -2.0, 0.5 and 3.0 as float32 little-endian. */
const floats = [1, -2, 0.5, 3];
const FLOATS_HEX = '0000803f000000c00000003f00004040';

describe('vectors on a big-endian machine', () => {
  it('are written as float32 little-endian, the vector\'s own floats only', () => {
    const expected = `02${u32(body.length)}${body.toString('hex')}${FLOATS_HEX}`;
    expect(encodeEvent({ type: 'add', record, vector: Float32Array.from(floats) }).toString('hex')).toBe(expected);
    const under = Float32Array.from([9, ...floats, 9]);
    expect(encodeEvent({ type: 'add', record, vector: under.subarray(1, 5) }).toString('hex')).toBe(expected);
  });

  it('are read back from float32 little-endian, also after a change and its key', () => {
    const payload = Buffer.from(`02${u32(body.length)}${body.toString('hex')}${FLOATS_HEX}`, 'hex');
    expect(decodePayload(payload, 'f')).toStrictEqual({ type: 'event', event: { type: 'add', record, vector: Float32Array.from(floats) } });
    const event: MemoryEvent = { type: 'update', record, vector: Float32Array.from(floats), change: { at: 7, key_id: 'ops', extracted: false } };
    const encoded = encodeEvent(event);
    expect(encoded.subarray(encoded.length - 16).toString('hex')).toBe(FLOATS_HEX);
    expect(decodePayload(encoded, 'f')).toStrictEqual({ type: 'event', event });
  });

  it('refuses a vector that is not whole floats', () => {
    const payload = Buffer.from(`02${u32(body.length)}${body.toString('hex')}${FLOATS_HEX}00`, 'hex');
    expect(() => decodePayload(payload, 'f')).toThrow('f: unreadable entry (vector bytes not a multiple of 4)');
  });
});

describe('an event of no known type', () => {
  it('is refused when written, naming what it is not', () => {
    expect(() => encodeEvent({ type: 'rename' } as unknown as MemoryEvent)).toThrow('unknown memory event: rename');
  });
});
