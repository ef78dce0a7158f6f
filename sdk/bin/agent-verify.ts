#!/usr/bin/env node
/**
 * agent-verify: checks an attestation document (AWS Nitro, or the simulated TEE with
 * --root <dataDir>/simulated-root.pem) and says why it does or does not verify.
 * Exit status: 0 every check passed, 1 a check failed, 2 usage error.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { parseArgs as parseNodeArgs } from 'node:util';
import { ManifestError, verifyManifest, type VerifiedManifest } from '../attestation/manifest.js';
import { verifyAttestation, type Check, type VerificationResult } from '../../protocol/attestation/verify.js';
import { checkSignature, sha256Hex, SIGNATURE_HEADER, SHARD_HEADER, STATE_HEADER, STORE_HEADER, TIMESTAMP_HEADER, type SignedRequest } from '../../protocol/response-signature.js';
import { checkReceipt } from '../../protocol/deletion-receipt.js';
import { invokedDirectly } from './invoked-directly.js';
import { parseHex, parseKey32, parsePcrs, readManifestText } from './trust-args.js';

export const USAGE = `Usage: agent-verify <file | base-url> [options]
       agent-verify --receipt <file> [--public-key <key>] [--json]

Verifies an attestation document. <file> holds the base64 document or the JSON returned
by GET /v1/attestation; with an http(s) <base-url>, fetches <base-url>/v1/attestation.
When the JSON has tee_public_key, the document's public_key must equal it; when it has
operator_pubkey and tee_box_public_key, the document's user_data must bind them. A fetched
answer must also be signed by that key; its state head (changes the enclave's store has
made durable, and their chained hash), store id and shard (shard 0: the attestation answer
acts for no tenant) are printed: remember them, and a later
answer from an older state, or another store, is a rollback by the host.

Options:
  --root <pem-file>     root certificate to pin (default: AWS Nitro Enclaves Root G1)
  --at <unix-seconds>   check certificate validity at this time (default: now)
  --nonce <hex>         expected nonce (also sent as ?nonce= when fetching); when fetching
                        without it, a fresh random nonce is sent and checked, so an old
                        document replayed by the host fails
  --no-nonce            when fetching, accept a document without a nonce (a cached one)
  --pcr <index>=<hex>   expected PCR value; repeatable
  --max-age <seconds>   refuse a document whose timestamp is older than this, at --at
                        or now (default: the lifetime of its leaf certificate; 3 hours
                        on AWS)
  --allow-debug         accept an enclave in debug mode (PCR0, PCR1 and PCR2 all zero),
                        which is refused by default: the host can read a debug enclave's
                        memory. For development only
  --operator-key <key>  expected operator Ed25519 key in user_data, base64 or hex
                        (instead of the operator_pubkey the service advertises)
  --manifest <file|url> pin the PCRs of a release manifest signed by the operator
                        (npm run release:manifest); needs --operator-key, the key you
                        trust to sign releases, and replaces --pcr
  --receipt             <file> is a deletion receipt (the "receipt" of a DELETE answer, or
                        the whole answer): checks its signature offline and prints what was
                        deleted, when, and the state head after it. Keep the head: a later
                        answer from a state that does not descend from it comes from a copy
                        of the store from before the deletion (sdk: receiptState)
  --public-key <key>    with --receipt: the enclave key it must be signed by (tee_public_key
                        of an attestation you verified), base64 or hex; without it, only the
                        key the receipt names is checked
  --json                print the result as JSON
  -h, --help            show this help

Exit status: 0 if every check passes, 1 if one fails, 2 for usage errors.`;

export interface VerifyCommand {
  kind: 'verify';
  input: string;
  rootFile?: string;
  at?: Date;
  nonce?: Uint8Array;
  pcrs: Record<number, Uint8Array>;
  operatorKey?: Uint8Array;
  allowDebug: boolean;
  maxAgeSeconds?: number;
  /** A release manifest (file or URL) whose PCRs to pin, once its signature checks out. */
  manifest?: string;
  json: boolean;
}

export interface ReceiptCommand {
  kind: 'receipt';
  input: string;
  publicKey?: Uint8Array;
  json: boolean;
}

export type Command = VerifyCommand | ReceiptCommand | { kind: 'help' } | { kind: 'usage-error'; message: string };

/** Pure: argv (without node and script) → what to do. */
export function parseArgs(argv: string[]): Command {
  let parsed;
  try {
    parsed = parseNodeArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        root: { type: 'string' },
        at: { type: 'string' },
        nonce: { type: 'string' },
        'no-nonce': { type: 'boolean', default: false },
        pcr: { type: 'string', multiple: true },
        'operator-key': { type: 'string' },
        manifest: { type: 'string' },
        json: { type: 'boolean', default: false },
        receipt: { type: 'boolean', default: false },
        'public-key': { type: 'string' },
        'allow-debug': { type: 'boolean', default: false },
        'max-age': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (error) {
    return usageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) return { kind: 'help' };
  if (positionals.length !== 1) return usageError('expected exactly one <file | base-url>');
  if (values.receipt) {
    const receipt: ReceiptCommand = { kind: 'receipt', input: positionals[0], json: values.json };
    if (values['public-key'] !== undefined) {
      const key = parseKey32(values['public-key']);
      if (!key) return usageError('--public-key must be a 32-byte key in base64 or hex');
      receipt.publicKey = key;
    }
    return receipt;
  }
  if (values['public-key'] !== undefined) return usageError('--public-key goes with --receipt');

  const command: VerifyCommand = { kind: 'verify', input: positionals[0], pcrs: {}, json: values.json, allowDebug: values['allow-debug'] };
  if (values['max-age'] !== undefined) {
    if (!/^\d+$/.test(values['max-age'])) return usageError(`--max-age must be whole seconds, got "${values['max-age']}"`);
    command.maxAgeSeconds = Number(values['max-age']);
  }
  if (values.root !== undefined) command.rootFile = values.root;
  if (values.at !== undefined) {
    if (!/^\d+$/.test(values.at)) return usageError(`--at must be whole unix seconds, got "${values.at}"`);
    command.at = new Date(Number(values.at) * 1000);
  }
  if (values.nonce !== undefined && values['no-nonce']) return usageError('--nonce and --no-nonce exclude each other');
  if (values.nonce !== undefined) {
    const nonce = parseHex(values.nonce);
    if (!nonce) return usageError(`--nonce must be hex, got "${values.nonce}"`);
    command.nonce = nonce;
  } else if (!values['no-nonce'] && /^https?:\/\//i.test(positionals[0])) {
    // Freshness by default: a document answering our own random nonce cannot be an old one.
    command.nonce = new Uint8Array(randomBytes(16));
  }
  if (values['operator-key'] !== undefined) {
    const key = parseKey32(values['operator-key']);
    if (!key) return usageError('--operator-key must be a 32-byte key in base64 or hex');
    command.operatorKey = key;
  }
  if (values.manifest !== undefined) {
    // A manifest is only as good as the key checked against it: the one it names, or the one
    // the service advertises, could be anybody's.
    if (!command.operatorKey) return usageError('--manifest needs --operator-key: the operator key you trust to sign releases');
    if (values.pcr !== undefined) return usageError('--manifest and --pcr exclude each other: the manifest says which PCRs to pin');
    command.manifest = values.manifest;
  }
  const pcrs = parsePcrs(values.pcr ?? []);
  if (typeof pcrs === 'string') return usageError(pcrs);
  command.pcrs = pcrs;
  return command;
}

function usageError(message: string): Command {
  return { kind: 'usage-error', message };
}

export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  fetch: typeof fetch;
}

const defaultIo: Io = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
  fetch: (...args) => globalThis.fetch(...args),
};

/** Returns the exit status. */
export async function main(argv: string[], io: Io = defaultIo): Promise<number> {
  const command = parseArgs(argv);
  if (command.kind === 'help') {
    io.out(USAGE);
    return 0;
  }
  if (command.kind === 'usage-error') {
    io.err(`agent-verify: ${command.message}\n\n${USAGE}`);
    return 2;
  }
  if (command.kind === 'receipt') return verifyReceiptFile(command, io);
  let rootPem: string | undefined;
  if (command.rootFile !== undefined) {
    try {
      rootPem = await readFile(command.rootFile, 'utf8');
    } catch (error) {
      io.err(`agent-verify: cannot read --root ${command.rootFile}: ${(error as Error).message}`);
      return 2;
    }
  }

  let result: VerificationResult;
  try {
    const manifest = command.manifest === undefined ? undefined : await loadManifest(command.manifest, command.operatorKey as Uint8Array, io.fetch);
    if (manifest) command.pcrs = manifest.pcrs;
    const { document, teePublicKey, operatorKey, boxPublicKey, reply, teeName } = await loadDocument(command, io.fetch);
    result = await verifyAttestation(document, {
      rootPem,
      at: command.at,
      nonce: command.nonce,
      pcrs: command.pcrs,
      publicKey: teePublicKey,
      operatorKey: command.operatorKey ?? operatorKey,
      boxPublicKey,
      allowDebug: command.allowDebug,
      maxAgeSeconds: command.maxAgeSeconds,
    });
    if (reply && teePublicKey) {
      const check = checkSignature(teePublicKey, reply.request, { status: reply.status, bodySha256: sha256Hex(reply.body) }, reply.signature);
      result.checks.push(check.ok
        ? { name: 'reply signature', ok: true, detail: `signed by public_key at ${check.signedAt.toISOString()}; state head ${check.state.seq}:${check.state.hash} of store ${check.store} (shard ${check.shard.index} of ${check.shard.count})` }
        : { name: 'reply signature', ok: false, detail: check.reason });
      if (!check.ok) result.ok = false;
    }
    if (manifest) {
      const { version, tee_name: manifestTee } = manifest.manifest;
      const pinned = Object.keys(manifest.pcrs).map((i) => `PCR${i}`).join(', ');
      result.checks.unshift({ name: 'manifest', ok: true, detail: `release ${version} (${manifestTee}) signed by the operator key; pins ${pinned}` });
      // A manifest for another kind of TEE names measurements this service cannot have.
      if (teeName !== undefined && teeName !== manifestTee) {
        result.checks.push({ name: 'tee', ok: false, detail: `the service says tee_name ${teeName}, the manifest is for ${manifestTee}` });
        result.ok = false;
      }
    }
  } catch (error) {
    // Nothing to verify: report it like any other failed check.
    const check = { name: error instanceof ManifestError ? 'manifest' : 'input', ok: false, detail: (error as Error).message };
    result = { ok: false, checkedAt: command.at ?? new Date(), checks: [check] };
  }
  io.out(command.json ? JSON.stringify(result, jsonBytesAsHex, 2) : formatResult(result, command));
  return result.ok ? 0 : 1;
}

/** agent-verify --receipt: the receipt's signature, offline. */
async function verifyReceiptFile(command: ReceiptCommand, io: Io): Promise<number> {
  let value: unknown;
  try {
    value = JSON.parse(await readFile(command.input, 'utf8'));
  } catch (error) {
    io.err(`agent-verify: cannot read a JSON receipt from ${command.input}: ${(error as Error).message}`);
    return 2;
  }
  // The whole DELETE answer, or its receipt alone.
  const receipt = (value as { receipt?: unknown } | null)?.receipt ?? value;
  const check = checkReceipt(receipt, command.publicKey);
  if (command.json) {
    io.out(JSON.stringify(check.ok ? { ok: true, receipt: check.receipt, key_pinned: command.publicKey !== undefined } : check, null, 2));
  } else if (check.ok) {
    const { scope, tenant_id, where, ids, count } = check.receipt;
    io.out([
      `✓ receipt signature: signed by ${check.receipt.public_key}${command.publicKey ? ' (the key given with --public-key)' : ''}`,
      '',
      `deleted      ${scope === 'tenant' ? `every memory of tenant ${JSON.stringify(tenant_id)}`
        : scope === 'scope' ? `every memory of tenant ${JSON.stringify(tenant_id)} with ${Object.entries(where!).map(([k, v]) => `${k} ${JSON.stringify(v)}`).join(', ')}`
        : `${ids.join(', ')} of tenant ${JSON.stringify(tenant_id)}`} (${count})`,
      `at           ${check.deletedAt.toISOString()}`,
      `state        ${check.state.seq}:${check.state.hash} of store ${check.store}`,
      '',
      ...(command.publicKey ? [] : ['note: no --public-key given: check that the key above is the tee_public_key of an attestation you verified', '']),
      'OK: the receipt verifies; an answer from a state that does not descend from the one above is a rollback',
    ].join('\n'));
  } else {
    io.out(`✗ receipt signature: ${check.reason}\nFAILED`);
  }
  return check.ok ? 0 : 1;
}

interface LoadedDocument {
  document: Uint8Array;
  /** When fetched: what was asked and answered, to check the enclave's signature on it. */
  reply?: { request: SignedRequest; status: number; body: Uint8Array; signature: { signature?: string; timestamp?: string; state?: string; store?: string; shard?: string } };
  /** From the /v1/attestation JSON; the document must bind these keys. */
  teePublicKey?: Uint8Array;
  operatorKey?: Uint8Array;
  boxPublicKey?: Uint8Array;
  teeName?: string;
}

/** Reads a release manifest from a file or an http(s) URL and checks its signature. */
async function loadManifest(source: string, operatorKey: Uint8Array, fetchImpl: typeof fetch): Promise<VerifiedManifest> {
  const text = await readManifestText(source, fetchImpl);
  try {
    return verifyManifest(text, operatorKey);
  } catch (error) {
    throw new ManifestError(`${source}: ${(error as Error).message}`);
  }
}

async function loadDocument(command: VerifyCommand, fetchImpl: typeof fetch): Promise<LoadedDocument> {
  if (/^https?:\/\//i.test(command.input)) {
    const url = new URL('v1/attestation', command.input.endsWith('/') ? command.input : `${command.input}/`);
    if (command.nonce) url.searchParams.set('nonce', Buffer.from(command.nonce).toString('hex'));
    const response = await fetchImpl(url);
    if (!response.ok) throw new Error(`GET ${url} returned HTTP ${response.status}`);
    const body = new Uint8Array(await response.arrayBuffer());
    const header = (name: string) => response.headers.get(name) ?? undefined;
    return {
      ...fromAttestationJson(Buffer.from(body).toString('utf8'), `GET ${url}`),
      reply: {
        request: { method: 'GET', target: `${url.pathname}${url.search}`, body: new Uint8Array() },
        status: response.status,
        body,
        signature: { signature: header(SIGNATURE_HEADER), timestamp: header(TIMESTAMP_HEADER), state: header(STATE_HEADER), store: header(STORE_HEADER), shard: header(SHARD_HEADER) },
      },
    };
  }
  const text = await readFile(command.input, 'utf8').catch((error: Error) => {
    throw new Error(`cannot read ${command.input}: ${error.message}`);
  });
  return text.trimStart().startsWith('{')
    ? fromAttestationJson(text, command.input)
    : { document: decodeBase64(text, `${command.input}`) };
}

/**
 * The body of GET /v1/attestation:
 * {code_attestation, operator_pubkey, tee_name, tee_public_key, tee_box_public_key}.
 */
function fromAttestationJson(text: string, source: string): LoadedDocument {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new Error(`${source} is not valid JSON`);
  }
  const fields = (body ?? {}) as Record<string, unknown>;
  if (typeof fields.code_attestation !== 'string') throw new Error(`${source} has no code_attestation string`);
  const optionalKey = (name: string): Uint8Array | undefined => {
    const value = fields[name];
    if (value === undefined) return undefined;
    if (typeof value !== 'string') throw new Error(`${source}: ${name} is not a string`);
    return decodeBase64(value, `${source} ${name}`);
  };
  return {
    document: decodeBase64(fields.code_attestation, `${source} code_attestation`),
    teePublicKey: optionalKey('tee_public_key'),
    operatorKey: optionalKey('operator_pubkey'),
    boxPublicKey: optionalKey('tee_box_public_key'),
    teeName: typeof fields.tee_name === 'string' ? fields.tee_name : undefined,
  };
}

/** Buffer.from(…, 'base64') skips invalid characters; refuse them instead. */
function decodeBase64(text: string, what: string): Uint8Array {
  const compact = text.replace(/\s+/g, '');
  if (compact.length === 0 || compact.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(compact)) {
    throw new Error(`${what} is not base64`);
  }
  return new Uint8Array(Buffer.from(compact, 'base64'));
}


function formatResult(result: VerificationResult, command: VerifyCommand): string {
  const lines = result.checks.map((c: Check) => `${c.ok ? '✓' : '✗'} ${c.name}: ${c.detail}`);
  const doc = result.document;
  if (doc) {
    const { subject, notBefore, notAfter } = doc.certificate;
    lines.push(
      '',
      `module_id    ${doc.moduleId}`,
      `timestamp    ${doc.timestamp.toISOString()}`,
      `digest       ${doc.digest}`,
      ...Object.entries(doc.pcrs).map(([index, value]) => `${`PCR${index}`.padEnd(12)} ${value}`),
      `public_key   ${describeBytes(doc.publicKey)}`,
      `user_data    ${describeBytes(doc.userData)}`,
      `nonce        ${describeBytes(doc.nonce)}`,
      `certificate  ${subject}, valid ${notBefore.toISOString()} to ${notAfter.toISOString()}`,
    );
  }
  lines.push('');
  if (result.ok && Object.keys(command.pcrs).length === 0 && command.manifest === undefined) {
    lines.push(
      'note: no --pcr or --manifest given, so the document is authentic but nothing pins which code it attests;',
      '      pin a release with --manifest <file|url> (the operator\'s signed release manifest, deploy/README.md)',
    );
  }
  if (result.ok && command.rootFile !== undefined && doc?.moduleId.startsWith('simulated-')) {
    lines.push(
      'note: a simulated TEE: its root (--root) was made by the service itself, so this proves nothing against',
      '      the host running it; only an AWS Nitro document checked against the AWS root (the default) does',
    );
  }
  const failed = result.checks.filter((c) => !c.ok).length;
  const total = result.checks.length;
  lines.push(result.ok ? `OK: all ${total} checks passed` : `FAILED: ${failed} of ${total} checks failed`);
  return lines.join('\n');
}

/** Hex, plus the text when the bytes are printable ASCII (e.g. a test key "dummy"). */
function describeBytes(bytes: Uint8Array | null): string {
  if (bytes === null) return '(none)';
  const hex = Buffer.from(bytes).toString('hex');
  const text = Buffer.from(bytes).toString('latin1');
  return bytes.length > 0 && /^[\x20-\x7e]+$/.test(text) ? `${hex} ("${text}")` : hex || '(empty)';
}

function jsonBytesAsHex(_key: string, value: unknown): unknown {
  return value instanceof Uint8Array ? Buffer.from(value).toString('hex') : value;
}

if (invokedDirectly(import.meta.url)) process.exitCode = await main(process.argv.slice(2));
