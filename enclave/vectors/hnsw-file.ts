/**
 * hnswlib's index file (HierarchicalNSW::saveIndex), read and scrubbed in memory. hnswlib
 * only saves to and loads from a path, so the bytes pass through a temp file: in RAM when
 * /dev/shm exists (and inside the enclave's own memory in a Nitro enclave), deleted at once.
 *
 * Layout (hnswlib 0.8, little-endian): a 96-byte header, then `count` elements of
 * `perElement` bytes — level-0 links (a u32 whose third byte holds the delete mark, then the
 * neighbours), the vector (`dimension` floats, normalised for cosine), the label (u64) —
 * then each element's upper-level links.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, unlinkSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const HEADER_BYTES = 96;
const DELETE_MARK = 0x01;

interface Layout {
  count: number;
  perElement: number;
  labelOffset: number;
  dataOffset: number;
}

/** The header's sizes; undefined when they cannot be hnswlib's for this dimension. */
function layout(file: Buffer, dimension: number): Layout | undefined {
  if (file.length < HEADER_BYTES) return undefined;
  const u64 = (at: number) => Number(file.readBigUInt64LE(at));
  const [offsetLevel0, count, perElement, labelOffset, dataOffset] = [u64(0), u64(16), u64(24), u64(32), u64(40)];
  const dataBytes = dimension * 4;
  if (offsetLevel0 !== 0 || dataOffset + dataBytes !== labelOffset || labelOffset + 8 !== perElement) return undefined;
  if (!Number.isSafeInteger(count * perElement) || HEADER_BYTES + count * perElement > file.length) return undefined;
  return { count, perElement, labelOffset, dataOffset };
}

/**
 * Zeroes the vector of every element whose label is not in use (`inUse(label)` false), which
 * must be marked deleted: hnswlib's markDelete keeps a deleted vector in its data, and a
 * saved graph must not keep a deleted memory's vector. The element stays as a waypoint of the
 * graph (its links), and a later add under its label gives it a vector again. Throws when
 * the file is not laid out as expected, or an element's label is not its place (HnswIndex
 * adds each new label at the end and reuses a freed one in its own place).
 */
export function scrubUnused(file: Buffer, dimension: number, inUse: (label: number) => boolean): void {
  const shape = layout(file, dimension);
  if (!shape) throw new Error('not an hnswlib index of this dimension');
  for (let i = 0; i < shape.count; i++) {
    const at = HEADER_BYTES + i * shape.perElement;
    if (Number(file.readBigUInt64LE(at + shape.labelOffset)) !== i) throw new Error(`element ${i} has another label`);
    if (inUse(i)) continue;
    if ((file[at + 2] & DELETE_MARK) === 0) throw new Error(`element ${i} is unused but not marked deleted`);
    file.fill(0, at + shape.dataOffset, at + shape.dataOffset + dimension * 4);
  }
}

/** Elements in the file (hnswlib's cur_element_count); undefined when it is not one of this dimension. */
export function elementCount(file: Buffer, dimension: number): number | undefined {
  return layout(file, dimension)?.count;
}

function tempPath(): string {
  const dir = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
  return join(dir, `hnsw-${process.pid}-${randomBytes(8).toString('hex')}.bin`);
}

/** Runs `save(path)` and returns what it wrote, the temp file gone; read without blocking the event loop (queries go on). */
export async function savedBytes(save: (path: string) => Promise<unknown>): Promise<Buffer> {
  const path = tempPath();
  try {
    await save(path);
    return await readFile(path);
  } finally {
    try { unlinkSync(path); } catch { /* never written */ }
  }
}

/** Runs `load(path)` on a temp file holding `file`, then deletes it. */
export function loadBytes(file: Uint8Array, load: (path: string) => void): void {
  const path = tempPath();
  try {
    writeFileSync(path, file, { mode: 0o600 });
    load(path);
  } finally {
    try { unlinkSync(path); } catch { /* never written */ }
  }
}
