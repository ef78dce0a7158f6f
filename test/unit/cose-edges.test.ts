import { describe, expect, it } from 'vitest';
import {
  AttestationFormatError, decodeCoseSign1, decodeNitroDocument, encodeCoseSign1, encodeNitroDocument, sigStructure, signNitroDocument,
  type CborMap, type CborValue, type NitroDocument,
} from '../../protocol/cose.js';

/**
 * The edges of the attestation document codec (protocol/cose.ts), byte by byte: the CBOR it
 * reads and writes (argument widths, simple values, what it refuses and where), the COSE_Sign1
 * around it, and the content rules of a Nitro payload at their limits. A verifier reads these
 * documents from the network: each refusal is exact, and nothing is read as something else.
 * attestation-verify.test.ts holds the real AWS document and the signature chain.
 */
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const fromHex = (text: string) => new Uint8Array(Buffer.from(text, 'hex'));
const ES384_HEADER = 'a1013822'; // {1: -35}
const SIGNATURE = '5860' + '00'.repeat(96);
/** A COSE_Sign1 whose unprotected header is the CBOR `unprotected` (hex): the codec's way of reading any value. */
const sign1 = (unprotected: string) => fromHex(`8444${ES384_HEADER}${unprotected}40${SIGNATURE}`);
/** The CBOR `value` as the codec writes it (in the unprotected header's place). */
function cbor(value: CborMap): string {
  const all = hex(encodeCoseSign1({ protectedHeader: fromHex(ES384_HEADER), unprotectedHeader: value, payload: new Uint8Array(), signature: new Uint8Array(96) }));
  return all.slice(12, -2 * 99);
}
/** Decodes the map `unprotected` (hex) through the codec. */
const read = (unprotected: string) => decodeCoseSign1(sign1(unprotected)).unprotectedHeader;
const refusal = (bytes: Uint8Array | string) => {
  try {
    decodeCoseSign1(typeof bytes === 'string' ? fromHex(bytes) : bytes);
  } catch (error) {
    expect(error).toBeInstanceOf(AttestationFormatError);
    return (error as Error).message;
  }
  throw new Error('decoded');
};

describe('CBOR integers', () => {
  const widths: Array<[number, string]> = [
    [0, '00'], [23, '17'], [24, '1818'], [255, '18ff'], [256, '190100'], [65535, '19ffff'], [65536, '1a00010000'],
    [2 ** 32 - 1, '1affffffff'], [2 ** 32, '1b0000000100000000'], [2 ** 53 - 1, '1b001fffffffffffff'],
    [-1, '20'], [-24, '37'], [-25, '3818'], [-256, '38ff'], [-257, '390100'], [-65537, '3a00010000'], [-(2 ** 53 - 1), '3b001ffffffffffffe'],
  ];

  it.each(widths)('writes %d in its shortest form, %s, and reads it back', (value, encoded) => {
    expect(cbor(new Map([[1, value]]))).toBe(`a101${encoded}`);
    expect(read(`a101${encoded}`)).toEqual(new Map([[1, value]]));
  });

  it('refuses integers beyond 2^53 - 1 either way, and will not write them or fractions', () => {
    expect(refusal(sign1('a1011b0020000000000000'))).toBe('integer larger than 2^53 - 1 (at byte 8)');
    expect(refusal(sign1('a1013b001fffffffffffff'))).toBe('integer smaller than -(2^53 - 1) (at byte 8)');
    expect(() => cbor(new Map([[1, 2 ** 53]]))).toThrow(new TypeError(`cannot encode ${2 ** 53}: only safe integers are supported`));
    expect(() => cbor(new Map([[1, 1.5]]))).toThrow(new TypeError('cannot encode 1.5: only safe integers are supported'));
  });

  it('reads the non-shortest forms too (the signature, not the codec, pins the bytes)', () => {
    expect(read('a1011800')).toEqual(new Map([[1, 0]]));
    expect(read('a1011b0000000000000005')).toEqual(new Map([[1, 5]]));
  });
});

describe('CBOR strings, arrays, maps and simple values', () => {
  it('writes and reads text, bytes, arrays, maps, false, true and null', () => {
    const value: CborMap = new Map<number | string, CborValue>([
      ['t', 'h\u00e9'], [2, fromHex('0102')], [3, [1, 'a', [null]]], [4, new Map([[5, true]])], [6, false], [7, null], [8, ''], [9, new Uint8Array()],
    ]);
    const encoded = cbor(value);
    expect(encoded).toBe('a8' + '6174' + '6368c3a9' + '02' + '420102' + '03' + '83' + '01' + '6161' + '81f6' + '04' + 'a105f5' + '06f4' + '07f6' + '0860' + '0940');
    expect(read(encoded)).toEqual(value);
  });

  it('writes lengths in their shortest form too', () => {
    expect(cbor(new Map([[1, 'a'.repeat(24)]]))).toBe(`a1017818${'61'.repeat(24)}`);
    expect(cbor(new Map([[1, new Uint8Array(256)]]))).toBe(`a101590100${'00'.repeat(256)}`);
    expect(read(`a1017818${'61'.repeat(24)}`)).toEqual(new Map([[1, 'a'.repeat(24)]]));
  });

  it('copies byte strings out of the input: changing the input later changes nothing decoded', () => {
    const input = Buffer.from(sign1('a1014401020304'));
    const decoded = decodeCoseSign1(input);
    input.fill(0);
    expect(decoded.unprotectedHeader.get(1)).toEqual(fromHex('01020304'));
    expect(decoded.protectedHeader).toEqual(fromHex(ES384_HEADER));
  });

  it.each([
    ['f7', 'unsupported simple value 23 (at byte 8)'],
    ['f820', 'unsupported simple value 24 (at byte 8)'],
    ['f3', 'unsupported simple value 19 (at byte 8)'],
    ['fc', 'unsupported simple value 28 (at byte 8)'],
    ['f93c00', 'floating-point numbers are not allowed (at byte 8)'],
    ['fa3f800000', 'floating-point numbers are not allowed (at byte 8)'],
    ['fb3ff0000000000000', 'floating-point numbers are not allowed (at byte 8)'],
    ['ff', 'unexpected "break" byte (at byte 8)'],
    ['1c', 'reserved additional information 28 (at byte 8)'],
    ['5e', 'reserved additional information 30 (at byte 8)'],
    ['5f4100ff', 'indefinite-length items are not allowed (at byte 8)'],
    ['c000', 'unexpected tag (major type 6) (at byte 8)'],
    ['d200', 'unexpected tag (major type 6) (at byte 8)'],
    ['62c328', 'text string is not valid UTF-8 (at byte 8)'],
  ])('refuses %s as a value, saying where', (value, message) => {
    // The value sits at byte 8: 84, 44 a1013822, a1, 01.
    const bytes = fromHex(`8444${ES384_HEADER}a101${value}40${SIGNATURE}`);
    expect(refusal(bytes)).toBe(message);
  });

  it('refuses a string longer than the bytes left, as truncated (not as bad UTF-8)', () => {
    expect(refusal('636162')).toBe('truncated CBOR: needs 3 byte(s), only 2 left (at byte 1)');
    expect(refusal('43ab')).toBe('truncated CBOR: needs 3 byte(s), only 1 left (at byte 1)');
  });

  it('refuses counts of items that the bytes left cannot hold, and takes a count that they just can', () => {
    expect(refusal('9a00010000')).toBe('truncated CBOR: 65536 items announced, 0 bytes left (at byte 0)');
    expect(refusal('83010203')).toBe('COSE_Sign1 must be an array of 4 items');
    expect(refusal('8401020304')).toBe('COSE protected header must be a byte string');
    expect(refusal('a2010203')).toBe('truncated CBOR: 4 items announced, 3 bytes left (at byte 0)');
    expect(refusal('a201020304')).toBe('COSE_Sign1 must be an array of 4 items');
  });

  it('refuses map keys that are not integers or text, and duplicates, naming them', () => {
    expect(refusal(sign1('a1410001'))).toBe('map key is neither an integer nor a text string (at byte 7)');
    expect(refusal(sign1('a1f401'))).toBe('map key is neither an integer nor a text string (at byte 7)');
    expect(refusal(sign1('a201010102'))).toBe('duplicate map key 1 (at byte 9)');
    expect(read('a201616161616161')).toEqual(new Map<number | string, CborValue>([[1, 'a'], ['a', 'a']]));
  });

  it('reads values nested as deep as its limit, and refuses one level more', () => {
    // The COSE array is depth 0, the unprotected map 1, its value 2: arrays down to depth 8.
    const nested = (levels: number) => `${'81'.repeat(levels)}00`;
    expect(read(`a101${nested(6)}`).get(1)).toEqual([[[[[[0]]]]]]);
    expect(refusal(sign1(`a101${nested(7)}`))).toBe(`nesting is deeper than any Nitro document (at byte ${8 + 7})`);
  });

  it('counts a map key\'s nesting like a value\'s: maps used as keys, a dozen deep, meet the limit before any key check', () => {
    expect(refusal(sign1(`${'a1'.repeat(12)}01${'00'.repeat(12)}`))).toMatch(/^nesting is deeper than any Nitro document/);
  });

  it('refuses an empty input, and names the trailing bytes after the item', () => {
    expect(refusal(new Uint8Array())).toBe('COSE_Sign1 is empty');
    expect(refusal(new Uint8Array([...sign1('a0'), 0, 0]))).toBe('COSE_Sign1 has 2 trailing byte(s) after the CBOR item');
    expect(refusal(fromHex('d2'))).toBe('COSE_Sign1 is empty');
  });
});

describe('COSE_Sign1', () => {
  it('reads the untagged and the tag-18 form alike', () => {
    const plain = sign1('a0');
    expect(decodeCoseSign1(fromHex(`d2${hex(plain)}`))).toEqual(decodeCoseSign1(plain));
    expect(decodeCoseSign1(plain)).toEqual({ protectedHeader: fromHex(ES384_HEADER), unprotectedHeader: new Map(), payload: new Uint8Array(), signature: new Uint8Array(96) });
  });

  it.each([
    ['a protected header that is not a byte string', `84a0a040${SIGNATURE}`, 'COSE protected header must be a byte string'],
    ['an unprotected header that is not a map', `8444${ES384_HEADER}4040${SIGNATURE}`, 'COSE unprotected header must be a map'],
    ['a payload that is not a byte string', `8444${ES384_HEADER}a0f6${SIGNATURE}`, 'COSE payload must be a byte string'],
    ['a signature that is not a byte string', `8444${ES384_HEADER}a040f6`, 'COSE signature must be a byte string'],
    ['a protected header that is not a map', `844101a040${SIGNATURE}`, 'COSE protected header must encode a map'],
    ['a protected header with no algorithm', `8441a0a040${SIGNATURE}`, 'COSE algorithm must be ES384 (-35), got null'],
    ['a protected header that is not CBOR', `8441ffa040${SIGNATURE}`, 'unexpected "break" byte (at byte 0)'],
    ['an empty protected header', `8440a040${SIGNATURE}`, 'COSE protected header is empty'],
    ['a signature of 95 bytes', `8444${ES384_HEADER}a040585f${'00'.repeat(95)}`, 'ES384 signature must be 96 bytes, got 95'],
    ['a signature of 97 bytes', `8444${ES384_HEADER}a0405861${'00'.repeat(97)}`, 'ES384 signature must be 96 bytes, got 97'],
  ])('refuses %s', (_name, bytes, message) => {
    expect(refusal(bytes)).toBe(message);
  });

  it('signs the RFC 8152 Sig_structure: ["Signature1", protected, empty external_aad, payload]', () => {
    expect(hex(sigStructure(fromHex(ES384_HEADER), fromHex('0102')))).toBe(`846a${Buffer.from('Signature1').toString('hex')}44${ES384_HEADER}40420102`);
  });

  it('builds a document untagged, with the ES384 header, an empty unprotected map and the signature over the Sig_structure', async () => {
    const signed: Uint8Array[] = [];
    const bytes = await signNitroDocument(nitro(), async (toBeSigned) => {
      signed.push(toBeSigned);
      return new Uint8Array(96).fill(7);
    });
    const payload = encodeNitroDocument(nitro());
    expect(signed).toEqual([sigStructure(fromHex(ES384_HEADER), payload)]);
    expect(hex(bytes.subarray(0, 6))).toBe(`8444${ES384_HEADER}`);
    expect(decodeCoseSign1(bytes)).toEqual({ protectedHeader: fromHex(ES384_HEADER), unprotectedHeader: new Map(), payload, signature: new Uint8Array(96).fill(7) });
  });
});

/** A document that meets every content rule, at the small end. */
function nitro(change: Partial<NitroDocument> = {}): NitroDocument {
  return {
    moduleId: 'i-1', digest: 'SHA384', timestamp: 1, pcrs: new Map([[0, new Uint8Array(48)]]),
    certificate: new Uint8Array(1), cabundle: [new Uint8Array(1)], publicKey: null, userData: null, nonce: null, ...change,
  };
}

describe('the Nitro payload', () => {
  it('writes the fields in the NSM\'s order, PCRs by index, absent ones as null, and reads them back', () => {
    const doc = nitro({ pcrs: new Map([[4, new Uint8Array(32)], [0, new Uint8Array(64)]]), publicKey: new Uint8Array(1), userData: new Uint8Array(), nonce: new Uint8Array(512) });
    const decoded = decodeNitroDocument(encodeNitroDocument(doc));
    expect(decoded).toEqual(doc);
    expect([...decoded.pcrs.keys()]).toEqual([0, 4]);
    const plain = encodeNitroDocument(nitro());
    const text = (s: string) => `${(0x60 + s.length).toString(16)}${Buffer.from(s).toString('hex')}`;
    expect(hex(plain)).toBe(
      `a9${text('module_id')}${text('i-1')}${text('digest')}${text('SHA384')}${text('timestamp')}01${text('pcrs')}a10058${'30'}${'00'.repeat(48)}` +
      `${text('certificate')}4100${text('cabundle')}814100${text('public_key')}f6${text('user_data')}f6${text('nonce')}f6`,
    );
  });

  it('reads absent optional fields as null', () => {
    const full = decodeNitroDocument(encodeNitroDocument(nitro()));
    const map = read(cbor(new Map<number | string, CborValue>([
      ['module_id', 'i-1'], ['digest', 'SHA384'], ['timestamp', 1], ['pcrs', new Map([[0, new Uint8Array(48)]])], ['certificate', new Uint8Array(1)], ['cabundle', [new Uint8Array(1)]],
    ])));
    const payload = fromHex(cbor(map));
    expect(decodeNitroDocument(payload)).toEqual(full);
  });

  it.each<[string, Partial<NitroDocument>, string]>([
    ['an empty module_id', { moduleId: '' }, 'module_id is empty'],
    ['another digest', { digest: 'SHA256' as 'SHA384' }, 'digest must be "SHA384", got "SHA256"'],
    ['timestamp 0', { timestamp: 0 }, 'timestamp must be greater than 0'],
    ['no PCRs', { pcrs: new Map() }, 'pcrs must have 1 to 32 entries, got 0'],
    ['33 PCRs', { pcrs: new Map(Array.from({ length: 33 }, (_, i) => [i, new Uint8Array(48)])) }, 'pcrs must have 1 to 32 entries, got 33'],
    ['PCR index -1', { pcrs: new Map([[-1, new Uint8Array(48)]]) }, 'PCR index -1 is outside 0..31'],
    ['PCR index 1.5', { pcrs: new Map([[1.5, new Uint8Array(48)]]) }, 'PCR index 1.5 is outside 0..31'],
    ['a PCR of 47 bytes', { pcrs: new Map([[3, new Uint8Array(47)]]) }, 'PCR3 must be 32, 48 or 64 bytes, got 47'],
    ['an empty certificate', { certificate: new Uint8Array() }, 'certificate must be 1 to 1024 bytes, got 0'],
    ['a certificate of 1025 bytes', { certificate: new Uint8Array(1025) }, 'certificate must be 1 to 1024 bytes, got 1025'],
    ['an empty cabundle', { cabundle: [] }, 'cabundle is empty'],
    ['a cabundle entry of 1025 bytes', { cabundle: [new Uint8Array(1), new Uint8Array(1025)] }, 'cabundle[1] must be 1 to 1024 bytes, got 1025'],
    ['an empty cabundle entry', { cabundle: [new Uint8Array()] }, 'cabundle[0] must be 1 to 1024 bytes, got 0'],
    ['an empty public_key', { publicKey: new Uint8Array() }, 'public_key must be 1 to 1024 bytes, got 0'],
    ['a public_key of 1025 bytes', { publicKey: new Uint8Array(1025) }, 'public_key must be 1 to 1024 bytes, got 1025'],
    ['user_data of 513 bytes', { userData: new Uint8Array(513) }, 'user_data must be 0 to 512 bytes, got 513'],
  ])('refuses %s, writing or reading', (_name, change, message) => {
    expect(() => encodeNitroDocument(nitro(change))).toThrow(new AttestationFormatError(message));
  });

  it('takes every field at its upper limit', () => {
    const doc = nitro({
      pcrs: new Map(Array.from({ length: 32 }, (_, i) => [i, new Uint8Array(32)])), certificate: new Uint8Array(1024), cabundle: [new Uint8Array(1024)],
      publicKey: new Uint8Array(1024), userData: new Uint8Array(512), nonce: new Uint8Array(512),
    });
    expect(decodeNitroDocument(encodeNitroDocument(doc))).toEqual(doc);
  });

  /** The payload of nitro() with `field` set to `value` (CBOR), through the codec. */
  const withField = (field: string, value: CborValue | undefined) => {
    const map = read(hex(encodeNitroDocument(nitro())));
    if (value === undefined) map.delete(field);
    else map.set(field, value);
    return fromHex(cbor(map));
  };

  it.each<[string, CborValue | undefined, string]>([
    ['timestamp', 'now', 'timestamp must be an unsigned integer'],
    ['timestamp', -5, 'timestamp must be greater than 0'],
    ['digest', 1, 'digest must be a text string'],
    ['certificate', 'der', 'certificate must be a byte string'],
    ['certificate', undefined, 'attestation payload is missing certificate'],
    ['pcrs', [new Uint8Array(48)], 'pcrs must be a map'],
    ['pcrs', new Map([['0', new Uint8Array(48)]]), 'pcrs key "0" must be an integer'],
    ['pcrs', new Map([[0, 'zeros']]), 'PCR0 must be a byte string'],
    ['cabundle', new Uint8Array(1), 'cabundle must be an array'],
    ['cabundle', [new Uint8Array(1), 'cert'], 'cabundle[1] must be a byte string'],
    ['public_key', 'key', 'public_key must be a byte string or null'],
    ['user_data', false, 'user_data must be a byte string or null'],
    ['nonce', 0, 'nonce must be a byte string or null'],
  ])('refuses %s = %j when reading', (field, value, message) => {
    expect(() => decodeNitroDocument(withField(field, value))).toThrow(new AttestationFormatError(message));
  });

  it('refuses fields it does not know, integer keys included', () => {
    const map = read(hex(encodeNitroDocument(nitro())));
    map.set(1, 1);
    expect(() => decodeNitroDocument(fromHex(cbor(map)))).toThrow(new AttestationFormatError('attestation payload has unknown field 1'));
    expect(() => decodeNitroDocument(fromHex('a0'))).toThrow('attestation payload is missing module_id');
    expect(() => decodeNitroDocument(new Uint8Array())).toThrow('attestation payload is empty');
  });
});
