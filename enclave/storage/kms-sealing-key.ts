/**
 * The Nitro sealing key: an AES-256 data key from AWS KMS whose key policy releases it only
 * to an enclave presenting an attestation document with the expected PCRs
 * (deploy/sealing.md). Node cannot talk to the Nitro Security Module, so this runs AWS's
 * `kmstool_enclave_cli` (aws-nitro-enclaves-sdk-c), which attaches the attestation
 * document to the KMS request, reaches KMS through the vsock proxy, and decrypts the
 * answer KMS encrypted to the enclave's ephemeral key:
 *
 *   first start  genkey  --key-id ARN --key-spec AES-256                            → CIPHERTEXT, PLAINTEXT
 *                decrypt (as below) of that CIPHERTEXT, which must give the same PLAINTEXT
 *   later        decrypt --ciphertext C --key-id ARN --encryption-algorithm SYMMETRIC_DEFAULT  → PLAINTEXT
 *
 * Only CIPHERTEXT (useless without KMS and the right PCRs) goes to the host store, so a
 * restarted enclave with the same PCRs gets its key back from KMS and reads its state.
 *
 * Trust decision: the host writes `sealing-key.kms`. Without `--key-id`, KMS decrypts a
 * symmetric ciphertext under whichever key the blob itself names, so a host able to use
 * any KMS key of its own could plant a blob under that key, and the enclave would seal
 * everything new under a key the host knows (issue 32, finding 1). Naming the measured key
 * ARN makes KMS refuse such a blob (IncorrectKeyException), and the refusal stops the
 * enclave: it never falls back to a new key. No encryption context: AWS's kmstool has no
 * option for one (its decrypt refuses unknown options), and a host that could call Encrypt
 * under the right key could supply the same context; the key policy's denial of Encrypt is
 * what guards that (deploy/sealing.md).
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
  /** The key ARN (kms-key-arn.ts): decrypt names it, so KMS refuses a blob made under any other key. */
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
      let plaintext: string;
      try {
        plaintext = field(await this.run(this.decryptArgs(ciphertext)), 'PLAINTEXT');
      } catch (error) {
        throw new Error(`${KMS_KEY_FILE} in the host store does not open under KMS_KEY_ID ${this.options.keyId} `
          + `(${(error as Error).message}); it was made under another key, or KMS refused this enclave. `
          + 'Nothing is sealed under it; restore the original blob or fix the key policy');
      }
      return decodeKey(plaintext);
    }
    await refuseNewKeyForSealedBlobs(this.options.blobs, this.options.sealedPrefix, KMS_KEY_FILE);
    const out = await this.run(['genkey', ...this.common(), '--key-id', this.options.keyId, '--key-spec', 'AES-256']);
    const key = decodeKey(field(out, 'PLAINTEXT'));
    const ciphertext = field(out, 'CIPHERTEXT');
    if (Buffer.from(ciphertext, 'base64').length === 0) throw new Error('KMS returned an empty data key ciphertext');
    // Open the new blob once, exactly as every later start will, before anything is sealed
    // under its key: a kmstool that misread the key id at genkey would
    // otherwise leave data that no later start could read.
    const again = decodeKey(field(await this.run(this.decryptArgs(ciphertext)), 'PLAINTEXT'));
    if (!Buffer.from(again).equals(Buffer.from(key))) throw new Error('KMS gave back another data key than genkey made; refusing to seal under either');
    await this.options.blobs.put(KMS_KEY_FILE, Buffer.from(`${ciphertext}\n`));
    return key;
  }

  private decryptArgs(ciphertext: string): string[] {
    return ['decrypt', ...this.common(), '--ciphertext', ciphertext,
      '--key-id', this.options.keyId, '--encryption-algorithm', 'SYMMETRIC_DEFAULT'];
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
