import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import sodium from 'sodium-native';

/**
 * Searches bytes for the private half of a known public key without having the private key:
 * every 32-byte window is tried as an Ed25519 seed (does it give `signingPublicKey`?) and as an
 * X25519 secret key (does it give `boxPublicKey`?). A 64-byte Ed25519 secret key is a seed
 * followed by its public key, so it is found too. Text is also decoded: every run of base64 or
 * hex long enough to hold 32 bytes is searched as the bytes it encodes. Cost: two scalar
 * multiplications per byte searched, so keep the input to a few hundred KB.
 */
export interface KeyScanTargets {
  signingPublicKey: Uint8Array;
  boxPublicKey: Uint8Array;
}

export interface KeyHit {
  where: string;
  key: 'signing seed' | 'box secret key';
  offset: number;
  encoding: 'raw' | 'base64' | 'hex';
}

export function scanForPrivateKeys(sources: Record<string, Buffer>, targets: KeyScanTargets): { hits: KeyHit[]; bytesSearched: number } {
  const signing = Buffer.from(targets.signingPublicKey);
  const box = Buffer.from(targets.boxPublicKey);
  const pk = Buffer.alloc(sodium.crypto_sign_PUBLICKEYBYTES);
  const sk = Buffer.alloc(sodium.crypto_sign_SECRETKEYBYTES);
  const q = Buffer.alloc(sodium.crypto_scalarmult_BYTES);
  const hits: KeyHit[] = [];
  let bytesSearched = 0;
  const searchWindows = (where: string, bytes: Buffer, encoding: KeyHit['encoding']) => {
    bytesSearched += bytes.length;
    for (let offset = 0; offset + 32 <= bytes.length; offset++) {
      const window = bytes.subarray(offset, offset + 32);
      sodium.crypto_sign_seed_keypair(pk, sk, window);
      if (pk.equals(signing)) hits.push({ where, key: 'signing seed', offset, encoding });
      sodium.crypto_scalarmult_base(q, window);
      if (q.equals(box)) hits.push({ where, key: 'box secret key', offset, encoding });
    }
  };
  for (const [where, bytes] of Object.entries(sources)) {
    searchWindows(where, bytes, 'raw');
    const text = bytes.toString('latin1');
    for (const m of text.matchAll(/[A-Za-z0-9+/_-]{43,}={0,2}/g)) {
      // The run may start before the encoding does: try the four alignments.
      const run = m[0].replace(/-/g, '+').replace(/_/g, '/');
      for (let shift = 0; shift < 4; shift++) searchWindows(where, Buffer.from(run.slice(shift), 'base64'), 'base64');
    }
    for (const m of text.matchAll(/[0-9a-fA-F]{64,}/g)) searchWindows(where, Buffer.from(m[0].slice(0, m[0].length & ~1), 'hex'), 'hex');
  }
  return { hits, bytesSearched };
}

/**
 * Every file under `dir`, by its path relative to `dir`. The service may be running: a file
 * listed and then deleted before it is read (a log segment a compaction just removed, its
 * changes already in the snapshot) is left out rather than failing the scan.
 */
export function filesUnder(dir: string): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  const gone = (error: unknown) => (error as NodeJS.ErrnoException).code === 'ENOENT';
  const walk = (folder: string) => {
    for (const name of readdirSync(folder)) {
      const path = join(folder, name);
      try {
        if (statSync(path).isDirectory()) walk(path);
        else out[relative(dir, path)] = readFileSync(path);
      } catch (error) {
        if (!gone(error)) throw error;
      }
    }
  };
  walk(dir);
  return out;
}

/** Where `needle` occurs in any source, raw or as base64 or hex text. */
export function occurrences(sources: Record<string, Buffer>, needle: Uint8Array): string[] {
  const forms = [Buffer.from(needle), Buffer.from(Buffer.from(needle).toString('base64')), Buffer.from(Buffer.from(needle).toString('hex'))];
  return Object.entries(sources).filter(([, bytes]) => forms.some((f) => bytes.includes(f))).map(([where]) => where);
}
