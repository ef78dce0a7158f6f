import { describe, expect, it } from 'vitest';
import type { ChangeInfo, MemoryEvent, MemoryVersion } from '../../enclave/memory/types.js';
import { CorruptStoreError } from '../../enclave/storage/errors.js';
import {
  decodePayload, encodeEnd, encodeEvent, encodeFence, encodeHeader, encodeHeads, type FileMeta,
} from '../../enclave/storage/payloads.js';

/**
 * Frame payloads (enclave/storage/payloads.ts) byte for byte: a store written by one build is
 * read by the next, so each kind is pinned to its documented bytes, read back exactly, and a
 * payload that breaks the format is refused as unreadable rather than read as something else.
 */
const hex = (b: Buffer) => b.toString('hex');
const json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('hex');
const u32 = (n: number) => n.toString(16).padStart(8, '0');
const record = { id: 'mem_1', object: 'memory' as const, tenant_id: 't', content: 'héllo', metadata: {}, created_at: 5 };
/** 1.0 and -2.0 as float32 little-endian. */
const vector = () => Float32Array.from([1, -2]);
const VECTOR_HEX = '0000803f000000c0';
const roundTrip = (event: MemoryEvent) => decodePayload(encodeEvent(event), 'f');
const unreadable = (payload: Buffer | string, reason: string) =>
  expect(() => decodePayload(typeof payload === 'string' ? Buffer.from(payload, 'hex') : payload, 'f'))
    .toThrow(new CorruptStoreError(`f: unreadable entry (${reason})`));

describe('payloads without a vector', () => {
  it('a header is 0x01 and the file\'s meta as JSON', () => {
    const meta: FileMeta = { format: 4, kind: 'snapshot', generation: 3, embedding_model: 'm', dimension: 2, created_at: 9, store_id: 'ab'.repeat(16), head: { seq: 1, hash: 'cd'.repeat(32) }, max_bytes: 100 };
    expect(hex(encodeHeader(meta))).toBe(`01${json(meta)}`);
    expect(decodePayload(encodeHeader(meta), 'f')).toEqual({ type: 'header', meta });
  });

  it('an end mark is 0x04 and {count}, with deleted only when there were tombstones', () => {
    expect(hex(encodeEnd(3))).toBe(`04${json({ count: 3 })}`);
    expect(hex(encodeEnd(3, 0))).toBe(`04${json({ count: 3 })}`);
    expect(hex(encodeEnd(3, 2))).toBe(`04${json({ count: 3, deleted: 2 })}`);
    expect(decodePayload(encodeEnd(3), 'f')).toStrictEqual({ type: 'end', count: 3 });
    expect(decodePayload(encodeEnd(3, 2), 'f')).toStrictEqual({ type: 'end', count: 3, deleted: 2 });
  });

  it('a fence is 0x07 and {writer, generation?}', () => {
    expect(hex(encodeFence('enclave-1'))).toBe(`07${json({ writer: 'enclave-1' })}`);
    expect(decodePayload(encodeFence('enclave-1'), 'f')).toEqual({ type: 'fence', writer: 'enclave-1' });
    expect(hex(encodeFence('enclave-1', 7))).toBe(`07${json({ writer: 'enclave-1', generation: 7 })}`);
    expect(decodePayload(encodeFence('enclave-1', 7), 'f')).toEqual({ type: 'fence', writer: 'enclave-1', generation: 7 });
    expect(() => decodePayload(Buffer.concat([Buffer.of(7), Buffer.from(JSON.stringify({ writer: 'w', generation: -1 }))]), 'f')).toThrow(/f/);
  });

  it('the heads are 0x06, the first seq as u64 BE, then 8 bytes a head', () => {
    const prefixes = Buffer.from('0102030405060708a1a2a3a4a5a6a7a8', 'hex');
    const encoded = encodeHeads(258, prefixes);
    expect(hex(encoded)).toBe(`060000000000000102${hex(prefixes)}`);
    expect(decodePayload(encoded, 'f')).toEqual({ type: 'heads', first: 258, prefixes });
    expect(decodePayload(encodeHeads(0, Buffer.alloc(0)), 'f')).toEqual({ type: 'heads', first: 0, prefixes: Buffer.alloc(0) });
  });

  it('refuses heads that are not whole 8-byte prefixes, or start beyond the safe integers', () => {
    unreadable(encodeHeads(1, Buffer.alloc(7)), 'malformed heads');
    unreadable(encodeHeads(1, Buffer.alloc(9)), 'malformed heads');
    unreadable(`06${'0020000000000000'}`, 'malformed heads');
    expect(decodePayload(Buffer.from(`06${'001fffffffffffff'}`, 'hex'), 'f')).toMatchObject({ first: 2 ** 53 - 1 });
  });

  it('a delete is 0x03 and {tenant_id, id}, with the change when there is one', () => {
    const change: ChangeInfo = { at: 7, key_id: null, extracted: false };
    expect(hex(encodeEvent({ type: 'delete', tenant_id: 't', id: 'mem_1' }))).toBe(`03${json({ tenant_id: 't', id: 'mem_1' })}`);
    expect(hex(encodeEvent({ type: 'delete', tenant_id: 't', id: 'mem_1', change }))).toBe(`03${json({ tenant_id: 't', id: 'mem_1', change })}`);
    expect(roundTrip({ type: 'delete', tenant_id: 't', id: 'mem_1' })).toStrictEqual({ type: 'event', event: { type: 'delete', tenant_id: 't', id: 'mem_1' } });
    expect(roundTrip({ type: 'delete', tenant_id: 't', id: 'mem_1', change })).toStrictEqual({ type: 'event', event: { type: 'delete', tenant_id: 't', id: 'mem_1', change } });
  });

  it('a tombstone is 0x0a and {tenant_id, id, versions}; one without versions is refused', () => {
    const versions: MemoryVersion[] = [{ event: 'add', at: 1, key_id: null, extracted: false }, { event: 'delete', at: 2, key_id: null, extracted: false }];
    const event = { type: 'tombstone' as const, tenant_id: 't', id: 'mem_1', versions };
    expect(hex(encodeEvent(event))).toBe(`0a${json({ tenant_id: 't', id: 'mem_1', versions })}`);
    expect(roundTrip(event)).toEqual({ type: 'event', event });
    unreadable(Buffer.concat([Buffer.of(0x0a), Buffer.from(JSON.stringify({ tenant_id: 't', id: 'mem_1' }))]), 'a tombstone without versions');
    unreadable(Buffer.concat([Buffer.of(0x0a), Buffer.from(JSON.stringify({ tenant_id: 't', id: 'mem_1', versions: {} }))]), 'a tombstone without versions');
  });

  it('a tenant-sealed entry is 0x0b, its tenant id\'s length and the id in the clear, then what is sealed; one without its tenant is refused', () => {
    // The rest (model, nonce, box) is opened by tenant-keys.ts; here only the tenant is read, and kept with the whole entry.
    const entry = Buffer.concat([Buffer.of(0x0b, 5), Buffer.from('acme1'), Buffer.alloc(40, 9)]);
    expect(decodePayload(entry, 'f')).toStrictEqual({ type: 'sealed', tenant_id: 'acme1', payload: entry });
    // The id may end at the entry's last byte, and no further.
    expect(decodePayload(entry.subarray(0, 7), 'f')).toMatchObject({ type: 'sealed', tenant_id: 'acme1' });
    unreadable(entry.subarray(0, 6), 'a tenant-sealed entry without its tenant');
    unreadable(Buffer.concat([Buffer.of(0x0b, 0), Buffer.alloc(40, 9)]), 'a tenant-sealed entry without its tenant');
    unreadable(Buffer.of(0x0b, 200, 0x61), 'a tenant-sealed entry without its tenant');
    // The tag alone: no length byte at all (read as undefined, it passed both checks and named tenant '').
    unreadable(Buffer.of(0x0b), 'a tenant-sealed entry without its tenant');
  });
});

describe('adds and updates', () => {
  it('without a change: 0x02 / 0x05, the record\'s JSON length (u32 BE) and JSON, then the vector as float32 LE', () => {
    const body = Buffer.from(JSON.stringify(record));
    expect(hex(encodeEvent({ type: 'add', record, vector: vector() }))).toBe(`02${u32(body.length)}${hex(body)}${VECTOR_HEX}`);
    expect(hex(encodeEvent({ type: 'update', record, vector: vector() }))).toBe(`05${u32(body.length)}${hex(body)}${VECTOR_HEX}`);
    expect(roundTrip({ type: 'add', record, vector: vector() })).toStrictEqual({ type: 'event', event: { type: 'add', record, vector: vector() } });
    expect(roundTrip({ type: 'update', record, vector: vector() })).toStrictEqual({ type: 'event', event: { type: 'update', record, vector: vector() } });
  });

  it('encodes exactly the vector\'s own floats, from a view into a larger buffer', () => {
    const under = Float32Array.from([9, 1, -2, 9]);
    const encoded = encodeEvent({ type: 'add', record, vector: under.subarray(1, 3) });
    expect(hex(encoded).endsWith(VECTOR_HEX)).toBe(true);
    expect((roundTrip({ type: 'add', record, vector: under.subarray(1, 3) }) as { event: { vector: Float32Array } }).event.vector).toEqual(vector());
  });

  it('with a change by a hex key id: 0x08 / 0x09, flags 2 (| 1 extracted), at as u32 BE, the 16 key bytes', () => {
    const body = Buffer.from(JSON.stringify(record));
    const keyId = '0123456789abcdef0123456789abcdef';
    const change: ChangeInfo = { at: 0x01020304, key_id: keyId, extracted: true };
    expect(hex(encodeEvent({ type: 'add', record, vector: vector(), change }))).toBe(`08${u32(body.length)}${hex(body)}03${'01020304'}${keyId}${VECTOR_HEX}`);
    expect(hex(encodeEvent({ type: 'update', record, vector: vector(), change: { ...change, extracted: false } }))).toBe(`09${u32(body.length)}${hex(body)}02${'01020304'}${keyId}${VECTOR_HEX}`);
    expect(roundTrip({ type: 'add', record, vector: vector(), change })).toStrictEqual({ type: 'event', event: { type: 'add', record, vector: vector(), change } });
    expect(roundTrip({ type: 'update', record, vector: vector(), change })).toStrictEqual({ type: 'event', event: { type: 'update', record, vector: vector(), change } });
  });

  it('with another key id: flags 4, its UTF-8 length in a byte, and the bytes, cut at 255', () => {
    const body = Buffer.from(JSON.stringify(record));
    const change: ChangeInfo = { at: 1, key_id: 'clé', extracted: false };
    const key = Buffer.from('clé');
    expect(hex(encodeEvent({ type: 'add', record, vector: vector(), change }))).toBe(`08${u32(body.length)}${hex(body)}04${u32(1)}${key.length.toString(16).padStart(2, '0')}${hex(key)}${VECTOR_HEX}`);
    expect(roundTrip({ type: 'add', record, vector: vector(), change })).toStrictEqual({ type: 'event', event: { type: 'add', record, vector: vector(), change } });
    // Upper-case hex and a 31-digit id are not the 16-byte form.
    for (const keyId of ['0123456789ABCDEF0123456789ABCDEF', '0123456789abcdef0123456789abcde', `x${'0'.repeat(32)}`]) {
      expect(roundTrip({ type: 'add', record, vector: vector(), change: { ...change, key_id: keyId } })).toMatchObject({ event: { change: { key_id: keyId } } });
    }
    const long = 'k'.repeat(300);
    expect(roundTrip({ type: 'add', record, vector: vector(), change: { ...change, key_id: long } })).toMatchObject({ event: { change: { key_id: 'k'.repeat(255) }, vector: vector() } });
  });

  it('with no key id: flags 0, and the time alone', () => {
    const body = Buffer.from(JSON.stringify(record));
    const change: ChangeInfo = { at: 9, key_id: null, extracted: false };
    expect(hex(encodeEvent({ type: 'add', record, vector: vector(), change }))).toBe(`08${u32(body.length)}${hex(body)}00${u32(9)}${VECTOR_HEX}`);
    expect(roundTrip({ type: 'add', record, vector: vector(), change })).toStrictEqual({ type: 'event', event: { type: 'add', record, vector: vector(), change } });
  });

  it('an add with past versions: flags 8, their JSON length (u32 BE) and JSON, after the key; an update carries none', () => {
    const body = Buffer.from(JSON.stringify(record));
    const past: MemoryVersion[] = [{ event: 'add', at: 1, key_id: null, extracted: false, record: { ...record, content: 'old' } }];
    const change: ChangeInfo = { at: 2, key_id: 'ab'.repeat(16), extracted: false };
    const pastJson = Buffer.from(JSON.stringify(past));
    expect(hex(encodeEvent({ type: 'add', record, vector: vector(), change, past }))).toBe(`08${u32(body.length)}${hex(body)}0a${u32(2)}${'ab'.repeat(16)}${u32(pastJson.length)}${hex(pastJson)}${VECTOR_HEX}`);
    expect(roundTrip({ type: 'add', record, vector: vector(), change, past })).toStrictEqual({ type: 'event', event: { type: 'add', record, vector: vector(), change, past } });
    // Past versions alone (no change recorded): a change of time 0 and no key.
    expect(roundTrip({ type: 'add', record, vector: vector(), past })).toStrictEqual({ type: 'event', event: { type: 'add', record, vector: vector(), change: { at: 0, key_id: null, extracted: false }, past } });
    // An update written with the past flag (no writer does) is read without them.
    const update = Buffer.from(hex(encodeEvent({ type: 'add', record, vector: vector(), change, past })).replace(/^08/, '09'), 'hex');
    expect(decodePayload(update, 'f')).toStrictEqual({ type: 'event', event: { type: 'update', record, vector: vector(), change } });
  });

  it('refuses a vector that is not whole floats, and a change that runs past the payload', () => {
    const add = encodeEvent({ type: 'add', record, vector: vector() });
    unreadable(add.subarray(0, add.length - 1), 'vector bytes not a multiple of 4');
    const body = Buffer.from(JSON.stringify(record));
    // Flags say past versions of 100 bytes follow; the payload ends first.
    const cut = Buffer.concat([Buffer.of(0x08), Buffer.from(u32(body.length), 'hex'), body, Buffer.from(`08${u32(0)}${u32(100)}`, 'hex')]);
    expect(() => decodePayload(cut, 'f')).toThrow(CorruptStoreError);
    expect(() => decodePayload(cut, 'f')).toThrow(/^f: unreadable entry/);
    const past = Buffer.from('[]');
    const over = Buffer.concat([Buffer.of(0x08), Buffer.from(u32(body.length), 'hex'), body, Buffer.from(`08${u32(0)}${u32(4)}`, 'hex'), past]);
    unreadable(over, 'vector bytes not a multiple of 4');
  });

  it('an add with another key id and past versions: the past versions follow the key\'s bytes', () => {
    const past: MemoryVersion[] = [{ event: 'add', at: 1, key_id: null, extracted: false }];
    const change: ChangeInfo = { at: 2, key_id: 'clé', extracted: true };
    expect(roundTrip({ type: 'add', record, vector: vector(), change, past })).toStrictEqual({ type: 'event', event: { type: 'add', record, vector: vector(), change, past } });
  });

  it('refuses a key id whose length runs past the payload, though the overshoot is whole floats', () => {
    const body = Buffer.from(JSON.stringify(record));
    // Flags 4: a key of 8 bytes announced, 4 there: the vector would start 4 bytes past the end.
    const over = Buffer.concat([Buffer.of(0x08), Buffer.from(u32(body.length), 'hex'), body, Buffer.from(`04${u32(0)}08`, 'hex'), Buffer.from('abcd')]);
    unreadable(over, 'vector bytes not a multiple of 4');
  });

  it('reads an add with no vector bytes as an empty vector', () => {
    const body = Buffer.from(JSON.stringify(record));
    expect(decodePayload(Buffer.concat([Buffer.of(0x02), Buffer.from(u32(body.length), 'hex'), body]), 'f'))
      .toStrictEqual({ type: 'event', event: { type: 'add', record, vector: new Float32Array() } });
  });
});

describe('unreadable payloads', () => {
  it.each([
    ['an unknown type', '0e7b7d', 'unknown payload type 14'],
    ['type 0', '00', 'unknown payload type 0'],
    ['an empty payload', '', 'unknown payload type undefined'],
  ])('refuses %s, naming it', (_name, payload, reason) => unreadable(payload, reason));

  it('refuses JSON that does not parse, as unreadable', () => {
    for (const tag of ['01', '03', '04', '07', '0a']) {
      expect(() => decodePayload(Buffer.from(`${tag}7b`, 'hex'), 'where')).toThrow(/^where: unreadable entry \(/);
    }
  });
});
