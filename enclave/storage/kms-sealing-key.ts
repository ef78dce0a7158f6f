/**
 * The Nitro sealing key: an AES-256 data key from AWS KMS whose key policy releases it only
 * to an enclave presenting an attestation document with the expected PCRs
 * (deploy/sealing.md). Node cannot talk to the Nitro Security Module, so this runs AWS's
 * `kmstool_enclave_cli` (aws-nitro-enclaves-sdk-c), which attaches the attestation
 * document to the KMS request, reaches KMS through the vsock proxy, and decrypts the
 * answer KMS encrypted to the enclave's ephemeral key:
 *
 *   first start  kmstool_enclave_cli genkey  --key-id K --key-spec AES-256 → CIPHERTEXT, PLAINTEXT
 *   later        kmstool_enclave_cli decrypt --ciphertext C                → PLAINTEXT
 *
 * Only CIPHERTEXT (useless without KMS and the right PCRs) goes to the host store, so a
 * restarted enclave with the same PCRs gets its key back from KMS and reads its state.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { readWhole, type BlobStore } from '../../common/blob-store.js';
import { refuseNewKeyForSealedBlobs, SEALING_KEY_BYTES, type SealingKeySource } from './sealing-key.js';

const execFileAsync = promisify(execFile);

export const KMS_KEY_FILE = 'sealing-key.kms';

export interface KmsSealingOptions {
  blobs: BlobStore;
  /** Where sealed blobs live; a key is never generated for existing ones. */
  sealedPrefix: string;
  /** Path of kmstool_enclave_cli. */
  tool: string;
  keyId: string;
  region: string;
  /** The vsock proxy's port towards kms.<region>.amazonaws.com. */
  proxyPort: number;
  /** The parent instance role's credentials; KMS's key policy, not their secrecy, guards the key. */
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  timeoutMs?: number;
}

export class KmsSealingKey implements SealingKeySource {
  readonly simulated = false;
  readonly description: string;

  constructor(private readonly options: KmsSealingOptions) {
    this.description = `AWS KMS data key under ${options.keyId}, released to this attested enclave only (encrypted copy in the host store as ${KMS_KEY_FILE})`;
  }

  async load(): Promise<Uint8Array> {
    const stored = await readWhole(this.options.blobs, KMS_KEY_FILE);
    if (stored) {
      const ciphertext = stored.toString('utf8').trim();
      const out = await this.run(['decrypt', ...this.common(), '--ciphertext', ciphertext]);
      return decodeKey(field(out, 'PLAINTEXT'));
    }
    await refuseNewKeyForSealedBlobs(this.options.blobs, this.options.sealedPrefix, KMS_KEY_FILE);
    const out = await this.run(['genkey', ...this.common(), '--key-id', this.options.keyId, '--key-spec', 'AES-256']);
    const key = decodeKey(field(out, 'PLAINTEXT'));
    const ciphertext = field(out, 'CIPHERTEXT');
    if (Buffer.from(ciphertext, 'base64').length === 0) throw new Error('KMS returned an empty data key ciphertext');
    await this.options.blobs.put(KMS_KEY_FILE, Buffer.from(`${ciphertext}\n`));
    return key;
  }

  private common(): string[] {
    const { region, proxyPort, credentials } = this.options;
    const args = ['--region', region, '--proxy-port', String(proxyPort),
      '--aws-access-key-id', credentials.accessKeyId, '--aws-secret-access-key', credentials.secretAccessKey];
    if (credentials.sessionToken) args.push('--aws-session-token', credentials.sessionToken);
    return args;
  }

  private async run(args: string[]): Promise<string> {
    try {
      const { stdout } = await execFileAsync(this.options.tool, args, { timeout: this.options.timeoutMs ?? 30_000, maxBuffer: 64 * 1024 });
      return stdout;
    } catch (error) {
      // Never echo the arguments: they hold credentials.
      const { stderr, code, killed } = error as { stderr?: string; code?: string | number; killed?: boolean };
      const reason = stderr?.trim().split('\n').slice(-3).join(' ') || (killed ? 'timed out' : code !== undefined ? `exit ${code}` : 'no output');
      throw new Error(`${this.options.tool} ${args[0]} failed: ${reason}`);
    }
  }
}

function field(output: string, name: 'PLAINTEXT' | 'CIPHERTEXT'): string {
  const m = new RegExp(`^${name}:\\s*([A-Za-z0-9+/=]+)\\s*$`, 'm').exec(output);
  if (!m) throw new Error(`kmstool_enclave_cli printed no ${name}`);
  return m[1];
}

function decodeKey(base64: string): Uint8Array {
  const key = Buffer.from(base64, 'base64');
  if (key.length !== SEALING_KEY_BYTES) throw new Error(`KMS data key has ${key.length} bytes, expected ${SEALING_KEY_BYTES}`);
  return new Uint8Array(key);
}
