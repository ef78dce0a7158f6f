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

/**
 * What the host store's memory blobs hold once opened with the sealing key: every payload of
 * every sealed file under `dataDir`/memory, by file, decrypted (in simulated mode the host can
 * read the key: this is what a host holding the sealing key could read). Also any .tmp.
 */
export async function openedMemoryBlobs(dataDir: string): Promise<Record<string, Buffer>> {
  const { readdirSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { deriveStorageKey, readSealedFile } = await import('../../enclave/storage/sealed-file.js');
  const { SIMULATED_KEY_FILE } = await import('../../enclave/storage/sealing-key.js');
  const key = deriveStorageKey(Buffer.from((JSON.parse(readFileSync(join(dataDir, SIMULATED_KEY_FILE), 'utf8')) as { key: string }).key, 'base64'));
  const out: Record<string, Buffer> = {};
  // The store's snapshots, graphs, segments and .tmp files (memory/shards.sealed, the shard map, holds the count and store ids, nothing of a tenant).
  for (const name of readdirSync(join(dataDir, 'memory')).filter((n) => n !== 'shards.sealed')) {
    const bytes = readFileSync(join(dataDir, 'memory', name));
    const kind = name.startsWith('snapshot') ? 'snapshot' : name.startsWith('graph-') ? 'graph' : 'log';
    const opened = await readSealedFile(bytes, kind, key, name, { allowTail: true });
    out[name] = Buffer.concat(opened.payloads);
  }
  return out;
}
