/**
 * A stand-in for AWS's kmstool_enclave_cli and the KMS behind it (neither can run here),
 * faithful on the points the sealing key relies on:
 *
 * - a ciphertext blob names the key it was made under, and `decrypt` without `--key-id`
 *   uses that key, as KMS does for symmetric keys; with `--key-id` (which, like the real
 *   tool, needs `--encryption-algorithm`) a blob under another key is refused
 *   (IncorrectKeyException);
 * - the encryption context is authenticated: `decrypt` with another context fails
 *   (InvalidCiphertextException);
 * - each key's material stays inside "KMS" (derived from FAKE_KMS_SECRET), so the only way
 *   to a data key is through this tool.
 *
 * It prints what the real tool prints (`CIPHERTEXT: …`, `PLAINTEXT: …`) and appends its
 * arguments, one JSON array a line, to FAKE_KMS_LOG. FAKE_KMS_FAIL makes every call fail as
 * KMS does for a wrong PCR; FAKE_KMS_DROP_CONTEXT makes genkey ignore the context, as the
 * upstream tool's genkey ignores options it does not know.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const SCRIPT = String.raw`#!/usr/bin/env node
const fs = require('node:fs');
const crypto = require('node:crypto');
const args = process.argv.slice(2);
if (process.env.FAKE_KMS_LOG) fs.appendFileSync(process.env.FAKE_KMS_LOG, JSON.stringify(args) + '\n');
const fail = (message) => { process.stderr.write(message + '\n'); process.exit(1); };
const one = (name) => { const i = args.indexOf(name); return i < 0 ? undefined : args[i + 1]; };
const all = (name) => args.flatMap((a, i) => (a === name ? [args[i + 1]] : []));
if (process.env.FAKE_KMS_FAIL) fail('AccessDeniedException: attestation PCR0 does not match');
const context = () => {
  const pairs = all('--encryption-context').map((pair) => {
    const at = pair.indexOf('=');
    if (at < 1) fail('bad --encryption-context ' + pair);
    return [pair.slice(0, at), pair.slice(at + 1)];
  });
  pairs.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify(pairs);
};
const material = (arn) => crypto.createHmac('sha256', process.env.FAKE_KMS_SECRET || 'fake-kms').update(arn).digest();
const command = args[0];
if (command === 'genkey') {
  const arn = one('--key-id');
  if (!arn) fail('--key-id must be set');
  if (one('--key-spec') !== 'AES-256') fail('--key-spec must be set');
  const aad = process.env.FAKE_KMS_DROP_CONTEXT ? '[]' : context();
  const key = crypto.randomBytes(32);
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', material(arn), iv).setAAD(Buffer.from(aad));
  const ct = Buffer.concat([cipher.update(key), cipher.final()]);
  const blob = { arn, iv: iv.toString('base64'), ct: ct.toString('base64'), tag: cipher.getAuthTag().toString('base64') };
  process.stdout.write('CIPHERTEXT: ' + Buffer.from(JSON.stringify(blob)).toString('base64') + '\nPLAINTEXT: ' + key.toString('base64') + '\n');
} else if (command === 'decrypt') {
  let blob;
  try { blob = JSON.parse(Buffer.from(one('--ciphertext') || '', 'base64').toString('utf8')); } catch { fail('InvalidCiphertextException: not a ciphertext blob'); }
  const keyId = one('--key-id');
  if (keyId !== undefined && !one('--encryption-algorithm')) fail('--encryption-algorithm must be set at key-id exists');
  if (keyId !== undefined && keyId !== blob.arn) fail('IncorrectKeyException: the ciphertext was not encrypted under the KMS key in the request');
  let key;
  try {
    const decipher = crypto.createDecipheriv('aes-256-gcm', material(blob.arn), Buffer.from(blob.iv, 'base64')).setAAD(Buffer.from(context()));
    decipher.setAuthTag(Buffer.from(blob.tag, 'base64'));
    key = Buffer.concat([decipher.update(Buffer.from(blob.ct, 'base64')), decipher.final()]);
  } catch { fail('InvalidCiphertextException: the ciphertext or its encryption context is not valid'); }
  process.stdout.write('PLAINTEXT: ' + key.toString('base64') + '\n');
} else {
  fail('unknown command ' + command);
}
`;

/** Writes the fake tool as `<dir>/kmstool` (executable) and returns its path. */
export function installFakeKmstool(dir: string): string {
  const path = join(dir, 'kmstool');
  writeFileSync(path, SCRIPT);
  chmodSync(path, 0o755);
  return path;
}
