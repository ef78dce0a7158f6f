/**
 * The web console's whole verdict on an answer of GET /v1/attestation, from what its
 * fields hold: the document checked by verify.ts against the pinned root, the page's
 * nonce, pinned PCRs (or a release manifest checked against the operator key the user
 * pins), and the advertised keys bound in the document. Here rather than in the page's
 * own script so that it is built from the sdk's source and tested in Node
 * (test/unit/console-verifier.test.ts) before the browser runs it.
 *
 * Stricter than `connect()` on purpose: a pin is required (no `insecureSkipPcrPinning`),
 * it must include PCR0 (the code, or on Nitro the whole image; pinning only other PCRs pins
 * no code), and debug-mode enclaves are always refused.
 */
import { ManifestError, verifyManifest } from './manifest.js';
import { verifyAttestation, type Check, type VerificationResult } from '../../protocol/attestation/verify.js';
import { fromBase64, fromHex } from '../../protocol/bytes.js';

/** What the user typed: PCR lines, or a signed manifest's JSON and the operator key (base64 or hex). */
export interface Pins {
  pcrs?: string;
  manifest?: string;
  operatorKey?: string;
}

export interface AnswerCheckOptions {
  /** The nonce the page sent with its request: the document must echo it. */
  nonce: Uint8Array;
  /** The root certificate the user pins (PEM). */
  rootPem: string;
  pins: Pins;
  at?: Date;
}

export interface AnswerVerification extends VerificationResult {
  /** False when no usable pin was given: whatever else passed, nothing says which code this is. */
  pinned: boolean;
}

const PIN_CODE = 0;

/** Never throws: anything unusable becomes a failed check. */
export async function checkAttestationAnswer(answer: unknown, options: AnswerCheckOptions): Promise<AnswerVerification> {
  const at = options.at ?? new Date();
  const refuse = (name: string, detail: string, pinned = false): AnswerVerification => ({ ok: false, pinned, checkedAt: at, checks: [{ name, ok: false, detail }] });
  let fields: AnswerFields;
  try {
    fields = answerFields(answer);
  } catch (error) {
    return refuse('answer', (error as Error).message);
  }
  let pin: Pin;
  try {
    pin = pinFrom(options.pins);
  } catch (error) {
    // Something was given as a pin and is wrong: that is a failure, not "nothing pinned".
    return refuse(error instanceof ManifestError ? 'manifest' : 'pinned PCRs', (error as Error).message, true);
  }
  const result = await verifyAttestation(fields.document, {
    rootPem: options.rootPem,
    at,
    nonce: options.nonce,
    pcrs: pin.pcrs,
    publicKey: fields.teePublicKey,
    // The advertised keys must be the bound ones; an operator key the user pinned wins over the advertised one.
    operatorKey: pin.operatorKey ?? fields.operatorKey,
    boxPublicKey: fields.boxPublicKey,
  });
  const checks: Check[] = [...pin.checks, ...result.checks];
  // A manifest for another kind of TEE names measurements this service cannot have.
  if (pin.teeName !== undefined && pin.teeName !== fields.teeName) {
    checks.push({ name: 'tee', ok: false, detail: `the service says tee_name ${fields.teeName}, the manifest is for ${pin.teeName}` });
  }
  return { ...result, checks, ok: checks.every((c) => c.ok), pinned: pin.pinned };
}

interface AnswerFields {
  document: Uint8Array;
  teePublicKey: Uint8Array;
  operatorKey: Uint8Array;
  boxPublicKey: Uint8Array;
  teeName: string;
}

function answerFields(answer: unknown): AnswerFields {
  const record = (typeof answer === 'object' && answer !== null ? answer : {}) as Record<string, unknown>;
  const bytes = (name: string): Uint8Array => {
    const value = record[name];
    const decoded = typeof value === 'string' ? fromBase64(value) : undefined;
    if (!decoded?.length) throw new Error(`the attestation answer has no base64 ${name}`);
    return decoded;
  };
  if (typeof record.tee_name !== 'string') throw new Error('the attestation answer has no tee_name');
  return {
    document: bytes('code_attestation'),
    teePublicKey: bytes('tee_public_key'),
    operatorKey: bytes('operator_pubkey'),
    boxPublicKey: bytes('tee_box_public_key'),
    teeName: record.tee_name,
  };
}

interface Pin {
  pinned: boolean;
  pcrs: Record<number, Uint8Array>;
  operatorKey?: Uint8Array;
  teeName?: string;
  /** What the pin itself says: shown first. */
  checks: Check[];
}

/** Throws (ManifestError for the manifest) when what was typed cannot be a pin. */
function pinFrom(pins: Pins): Pin {
  const text = (value: string | undefined) => value?.trim() ?? '';
  const [pcrText, manifest, operatorText] = [text(pins.pcrs), text(pins.manifest), text(pins.operatorKey)];
  const operatorKey = operatorText === '' ? undefined : key32(operatorText);
  if (manifest !== '') {
    if (pcrText !== '') throw new ManifestError('give either PCRs or a manifest, not both: the manifest says which PCRs to pin');
    // The key a manifest names, or the one the service advertises, could be anybody's.
    if (!operatorKey) throw new ManifestError('a manifest needs the operator key you trust to sign releases, obtained from the operator, not from this service');
    const verified = verifyManifest(manifest, operatorKey);
    const { version, tee_name: teeName } = verified.manifest;
    const pinned = Object.keys(verified.pcrs).map((i) => `PCR${i}`).join(', ');
    return {
      pinned: true, pcrs: verified.pcrs, operatorKey, teeName,
      checks: [{ name: 'manifest', ok: true, detail: `release ${version} (${teeName}) signed by the pinned operator key; pins ${pinned}` }],
    };
  }
  if (pcrText === '') {
    return {
      pinned: false, pcrs: {}, operatorKey,
      checks: [{
        name: 'pinned PCRs', ok: false,
        detail: 'nothing pins which code this is: give the PCRs of the build you trust, or a release manifest and the operator key, ' +
          'both obtained elsewhere than this service; without them any code the root vouches for would pass',
      }],
    };
  }
  const pcrs = parsePcrLines(pcrText);
  if (!(PIN_CODE in pcrs)) throw new Error('pin PCR0: it measures the code (on Nitro, the whole image); other PCRs alone pin no code');
  return { pinned: true, pcrs, operatorKey, checks: [] };
}

/** Lines of `<index>=<96 hex>` (also `PCR0 <hex>` or `0: <hex>`, as agent-verify and the console print them). */
export function parsePcrLines(text: string): Record<number, Uint8Array> {
  const pcrs: Record<number, Uint8Array> = {};
  for (const line of text.split('\n').map((l) => l.trim()).filter((l) => l !== '')) {
    const match = /^(?:PCR)?(\d{1,2})\s*[=:\s]\s*([0-9a-fA-F]+)$/i.exec(line);
    const index = match ? Number(match[1]) : NaN;
    const value = match ? fromHex(match[2]) : undefined;
    if (!match || index > 31 || value?.length !== 48) throw new Error(`"${line.slice(0, 40)}" is not <PCR index 0-31>=<96 hex digits>`);
    if (index in pcrs) throw new Error(`PCR${index} is given twice`);
    pcrs[index] = value;
  }
  return pcrs;
}

/** A 32-byte key as 64 hex digits or base64. */
function key32(text: string): Uint8Array {
  const bytes = /^[0-9a-fA-F]{64}$/.test(text) ? fromHex(text) : fromBase64(text);
  if (bytes?.length !== 32) throw new ManifestError('the operator key must be 32 bytes, in base64 or hex');
  return bytes;
}
