/**
 * Command-line values that pin trust, parsed one way for every command that takes them
 * (agent-verify, agent-gateway): PCRs, keys, and a release manifest read from a file or URL.
 */
import { readFile } from 'node:fs/promises';
import { ManifestError } from '../attestation/manifest.js';

export function parseHex(text: string): Uint8Array | undefined {
  if (text.length === 0 || text.length % 2 !== 0 || !/^[0-9a-fA-F]+$/.test(text)) return undefined;
  return new Uint8Array(Buffer.from(text, 'hex'));
}

/** A 32-byte key given as 64 hex digits or as base64. */
export function parseKey32(text: string): Uint8Array | undefined {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return new Uint8Array(Buffer.from(text, 'hex'));
  const bytes = Buffer.from(text, 'base64');
  return bytes.length === 32 && bytes.toString('base64') === text ? new Uint8Array(bytes) : undefined;
}

/** `--pcr <index>=<hex>` values → PCRs by index, or the message of the first bad one. */
export function parsePcrs(specs: string[]): Record<number, Uint8Array> | string {
  const pcrs: Record<number, Uint8Array> = {};
  for (const spec of specs) {
    const match = /^(\d{1,2})=(.*)$/.exec(spec);
    const index = match ? Number(match[1]) : NaN;
    if (!match || index > 31) return `--pcr must be <index 0-31>=<hex>, got "${spec}"`;
    const value = parseHex(match[2]);
    if (!value || value.length !== 48) return `--pcr ${index} must be 96 hex digits (48 bytes, SHA-384)`;
    if (pcrs[index]) return `--pcr ${index} given twice`;
    pcrs[index] = value;
  }
  return pcrs;
}

/** The text of a release manifest from a file or an http(s) URL (its signature is checked by the caller). */
export async function readManifestText(source: string, fetchImpl: typeof fetch): Promise<string> {
  if (/^https?:\/\//i.test(source)) {
    const response = await fetchImpl(source);
    if (!response.ok) throw new ManifestError(`GET ${source} returned HTTP ${response.status}`);
    return response.text();
  }
  return readFile(source, 'utf8').catch((error: Error) => {
    throw new ManifestError(`cannot read ${source}: ${error.message}`);
  });
}
