/**
 * The web console's verifier is the sdk's (issue 35 item 2, issue 31 item 6): the bundle it
 * loads is what the sdk's source builds to, and it gives the sdk's verdicts, check by check.
 * Run after `npm run build`, like every test of dist/.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import nacl from 'tweetnacl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedNitroProvider, simulatedRootPath } from '../../enclave/attestation/simulated-nsm.js';
import { FsBlobStore } from '../../host-store/fs-blob-store.js';
import { CONSOLE_BUNDLE, consoleBundleOptions } from '../../scripts/build-console.js';
import * as answerModule from '../../sdk/attestation/answer.js';
import { decodeCoseSign1, encodeCoseSign1 } from '../../protocol/cose.js';
import * as verifyModule from '../../protocol/attestation/verify.js';
import { encodeUserData } from '../../protocol/user-data.js';
import { signedManifest } from '../helpers/manifests.js';

type Bundle = typeof import('../../sdk/attestation/browser.js');
let bundle: Bundle;
beforeAll(async () => {
  bundle = await import(pathToFileURL(CONSOLE_BUNDLE).href) as Bundle;
});

const fixture = new Uint8Array(Buffer.from(readFileSync(new URL('../fixtures/aws-nitro-sample-2024-09-17.b64', import.meta.url), 'utf8').trim(), 'base64'));
const AT = new Date(1726606091 * 1000);
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

describe('the console verifier bundle (dist/console/verifier.js)', () => {
  it('is exactly what the sdk source bundles to', async () => {
    const rebuilt = await build({ ...consoleBundleOptions, write: false });
    expect(rebuilt.outputFiles.map((file) => file.path)).toEqual([CONSOLE_BUNDLE]);
    expect(rebuilt.outputFiles[0].text).toBe(readFileSync(CONSOLE_BUNDLE, 'utf8'));
  });

  it('uses no Node API, so it runs in a browser', () => {
    const source = readFileSync(CONSOLE_BUNDLE, 'utf8');
    expect(source).not.toMatch(/\bBuffer\b|\bprocess\.|\brequire\(|from ['"]node:/);
  });

  it('gives the sdk\'s verdict on a real AWS document, good and bad, check by check', async () => {
    const sign1 = decodeCoseSign1(fixture);
    const flipped = encodeCoseSign1({ ...sign1, signature: sign1.signature.map((b, i) => (i === 5 ? b ^ 1 : b)) });
    const cases: Array<[Uint8Array, verifyModule.VerifyOptions, boolean]> = [
      [fixture, { at: AT, allowDebug: true }, true],
      [fixture, { at: AT }, false], // debug mode: PCR0–2 are zero
      [flipped, { at: AT, allowDebug: true }, false],
      [fixture, { at: new Date('2024-09-18T00:00:00Z'), allowDebug: true }, false],
    ];
    for (const [document, options, ok] of cases) {
      const [fromSdk, fromBundle] = [await verifyModule.verifyAttestation(document, options), await bundle.verifyAttestation(document, options)];
      expect(fromSdk.ok).toBe(ok);
      expect(JSON.stringify(fromBundle)).toBe(JSON.stringify(fromSdk));
    }
    expect(JSON.stringify(await bundle.verifyAttestation(fixture, { at: AT }))).toContain('"name":"debug mode","ok":false');
  });
});

describe('checkAttestationAnswer: the console\'s verdict on GET /v1/attestation', () => {
  let dataDir: string;
  let rootPem: string;
  const operator = nacl.sign.keyPair();
  const signing = nacl.sign.keyPair();
  const box = nacl.box.keyPair();
  const nonce = new Uint8Array(32).fill(9);
  const measured = new Map([0, 1, 2].map((i) => [i, new Uint8Array(48).fill(0x10 + i)]));

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'console-verifier-'));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  /** An answer as the simulated service gives it, attesting `pcrs`. */
  async function answerFor(pcrs: Map<number, Uint8Array>) {
    const provider = new SimulatedNitroProvider({ blobs: new FsBlobStore(dataDir), pcrs });
    const document = await provider.attest({
      publicKey: signing.publicKey,
      userData: encodeUserData({ operatorKey: operator.publicKey, boxPublicKey: box.publicKey }),
      nonce,
    });
    rootPem ??= await readFile(simulatedRootPath(dataDir), 'utf8');
    return {
      code_attestation: b64(document), tee_name: 'simulated',
      tee_public_key: b64(signing.publicKey), operator_pubkey: b64(operator.publicKey), tee_box_public_key: b64(box.publicKey),
    };
  }

  /** The verdict through the sdk's module and through the bundle, which must agree. */
  async function verdict(answer: unknown, pins: answerModule.Pins) {
    const options = { nonce, rootPem, pins, at: new Date() };
    const [fromSdk, fromBundle] = [await answerModule.checkAttestationAnswer(answer, options), await bundle.checkAttestationAnswer(answer, options)];
    expect(JSON.stringify(fromBundle)).toBe(JSON.stringify(fromSdk));
    return { ok: fromSdk.ok, pinned: fromSdk.pinned, failed: fromSdk.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`) };
  }

  it('verifies a genuine answer with PCR0 pinned, and cannot verify one without a pin', async () => {
    const answer = await answerFor(measured);
    expect(await verdict(answer, { pcrs: `0=${hex(measured.get(0)!)}` })).toEqual({ ok: true, pinned: true, failed: [] });
    const unpinned = await verdict(answer, {});
    expect(unpinned).toMatchObject({ ok: false, pinned: false });
    expect(unpinned.failed).toEqual([expect.stringMatching(/^pinned PCRs: nothing pins which code this is/)]);
  });

  it('refuses a debug-mode document (PCR0–2 zero) whatever is pinned', async () => {
    const zeros = new Map([0, 1, 2].map((i) => [i, new Uint8Array(48)]));
    const answer = await answerFor(zeros);
    const pinnedToZeros = await verdict(answer, { pcrs: `0=${'00'.repeat(48)}` });
    expect(pinnedToZeros.ok).toBe(false);
    expect(pinnedToZeros.failed).toEqual([expect.stringMatching(/^debug mode: PCR0, PCR1 and PCR2 are all zero/)]);
    expect((await verdict(answer, {})).failed.map((f) => f.split(':')[0])).toEqual(['pinned PCRs', 'debug mode']);
  });

  it('requires PCR0 among pinned PCRs, and well-formed lines', async () => {
    const answer = await answerFor(measured);
    expect((await verdict(answer, { pcrs: `1=${hex(measured.get(1)!)}` })).failed).toEqual([expect.stringMatching(/^pinned PCRs: pin PCR0/)]);
    expect((await verdict(answer, { pcrs: '0=abcd' })).failed).toEqual([expect.stringMatching(/^pinned PCRs: "0=abcd" is not <PCR index 0-31>=<96 hex digits>/)]);
    // The forms agent-verify and the page print are accepted too.
    expect((await verdict(answer, { pcrs: `PCR0 ${hex(measured.get(0)!)}\nPCR1: ${hex(measured.get(1)!)}` })).ok).toBe(true);
  });

  it('pins a manifest only with the operator key the user gives, which must also be the one bound in the document', async () => {
    const answer = await answerFor(measured);
    const manifest = JSON.stringify(signedManifest({ signer: operator, pcrs: Object.fromEntries(measured) }));
    expect(await verdict(answer, { manifest, operatorKey: b64(operator.publicKey) })).toEqual({ ok: true, pinned: true, failed: [] });
    expect(await verdict(answer, { manifest })).toEqual({
      ok: false, pinned: true, failed: [expect.stringMatching(/^manifest: a manifest needs the operator key you trust/)],
    });
    const stranger = nacl.sign.keyPair();
    const theirs = JSON.stringify(signedManifest({ signer: stranger, pcrs: Object.fromEntries(measured) }));
    // Their manifest and their key: the manifest checks out, but the document binds another operator.
    expect((await verdict(answer, { manifest: theirs, operatorKey: hex(stranger.publicKey) })).failed).toEqual([
      expect.stringMatching(/^operator key: operator key in user_data mismatch/),
    ]);
    const forAws = JSON.stringify(signedManifest({ signer: operator, pcrs: Object.fromEntries(measured), teeName: 'aws-nitro-enclaves' }));
    expect((await verdict(answer, { manifest: forAws, operatorKey: b64(operator.publicKey) })).failed).toEqual([
      'tee: the service says tee_name simulated, the manifest is for aws-nitro-enclaves',
    ]);
  });

  it('refuses an answer without the keys it must bind', async () => {
    const { tee_box_public_key: _, ...partial } = await answerFor(measured);
    expect((await verdict(partial, { pcrs: `0=${hex(measured.get(0)!)}` })).failed).toEqual(['answer: the attestation answer has no base64 tee_box_public_key']);
  });
});
