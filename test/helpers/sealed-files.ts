import { readFileSync, writeFileSync } from 'node:fs';

/** [start, end) of each frame of a sealed file, read from the frame lengths (no key needed). */
export function frameSpans(data: Buffer): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  let at = 32;
  while (at + 8 <= data.length) {
    const end = at + 32 + data.readUInt32BE(at + 4);
    spans.push([at, Math.min(end, data.length)]);
    at = end;
  }
  return spans;
}

/** Flips one bit of the byte at `offset` of a file. */
export function flipByte(path: string, offset: number): void {
  const data = readFileSync(path);
  data[offset] ^= 0x01;
  writeFileSync(path, data);
}
