/**
 * The `TEE_MODE=nitro` provider. Attestation documents come from the Nitro Secure Module
 * via an ioctl on /dev/nsm, which Node cannot issue, so this shells out to the small
 * `nsm-attest` helper (source in deploy/nsm-attest/):
 *
 *   nsm-attest --public-key <hex> [--user-data <hex>] [--nonce <hex>]  → raw document on stdout
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ed25519SpkiDer } from '../../protocol/public-key.js';
import type { AttestationProvider, AttestationRequest } from './provider.js';

const execFileAsync = promisify(execFile);

export const DEFAULT_NSM_HELPER = '/usr/local/bin/nsm-attest';
/** The NSM's response buffer is 12 KiB; anything larger is not a document. */
const MAX_DOCUMENT_BYTES = 0x3000;

export interface NitroProviderOptions {
  helperPath?: string;
  timeoutMs?: number;
}

export class NitroProvider implements AttestationProvider {
  readonly teeName = 'aws-nitro-enclaves';
  private readonly helperPath: string;
  private readonly timeoutMs: number;

  constructor(options: NitroProviderOptions = {}) {
    this.helperPath = options.helperPath ?? DEFAULT_NSM_HELPER;
    this.timeoutMs = options.timeoutMs ?? 10_000;
  }

  async attest(request: AttestationRequest): Promise<Uint8Array> {
    // The NSM copies public_key into the document as given; AWS documents it as DER.
    const args = ['--public-key', hex(ed25519SpkiDer(request.publicKey))];
    if (request.userData) args.push('--user-data', hex(request.userData));
    if (request.nonce) args.push('--nonce', hex(request.nonce));
    let stdout: Buffer;
    try {
      ({ stdout } = await execFileAsync(this.helperPath, args, {
        encoding: 'buffer',
        maxBuffer: MAX_DOCUMENT_BYTES,
        timeout: this.timeoutMs,
      }));
    } catch (error) {
      const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
      throw new Error(`${this.helperPath} failed: ${stderr || (error as Error).message}`);
    }
    if (stdout.length === 0) throw new Error(`${this.helperPath} returned an empty document`);
    return new Uint8Array(stdout);
  }
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('hex');
}
