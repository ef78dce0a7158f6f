#!/usr/bin/env node
/**
 * kms-policy: adds a release's PCRs to the sealing key's policy, or removes them, taking them
 * only from a release manifest signed by the operator key (deploy/README.md, "Upgrade";
 * the policy's shape is deploy/sealing.md's). Each release gets an Allow statement of its
 * own, so PCR0, 1 and 2 must all come from one release (separate value lists per key would
 * also let one release's PCR0 pass with another's PCR2), and its PCR0 joins the list of the
 * "NoUseWithoutAttestation" Deny.
 * Exit status: 0 written, 1 refused, 2 usage error.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { verifyManifest } from '../sdk/attestation/manifest.js';
import { parsePublicKey } from '../enclave/operator-key.js';
import { invokedDirectly } from '../sdk/bin/invoked-directly.js';

export const USAGE = `Usage: kms-policy (add | remove) --policy <file> --manifest <file> --operator-key <base64> [--out <file>]

  add     a statement allowing the manifest's PCR0, 1, 2 (and 8), and its PCR0 in the Deny's list
  remove  the statement of the manifest's PCR0, and its PCR0 from the Deny's list
  --policy        the key policy (aws kms get-key-policy --output text --query Policy)
  --manifest      release-manifest-<tag>.json, written by deploy/release.sh
  --operator-key  the operator's Ed25519 public key (OPERATOR_PUBKEY): the manifest must be signed by it
  --out           write here instead of stdout`;

const ALLOW_TEMPLATE = 'DataKeysOnlyForTheAttestedEnclave';
const ALLOW_PREFIX = 'DataKeysForPcr0';
const DENY = 'NoUseWithoutAttestation';
const PCR = (index: number) => `kms:RecipientAttestation:PCR${index}`;

interface Statement {
  Sid?: string;
  Effect: string;
  Condition?: Record<string, Record<string, string | string[]>>;
  [key: string]: unknown;
}
interface Policy {
  Statement: Statement[];
  [key: string]: unknown;
}

class Refused extends Error {}

const list = (value: string | string[] | undefined): string[] => (value === undefined ? [] : Array.isArray(value) ? value : [value]);
const sidFor = (pcr0: string) => `${ALLOW_PREFIX}${pcr0.slice(0, 16)}`;
const isAllow = (s: Statement) => s.Sid === ALLOW_TEMPLATE || (s.Sid?.startsWith(ALLOW_PREFIX) ?? false);

export function addRelease(policy: Policy, pcrs: Record<number, string>): Policy {
  const allows = policy.Statement.filter(isAllow);
  const template = allows[0];
  if (!template) throw new Refused(`the policy has no "${ALLOW_TEMPLATE}" statement (deploy/sealing.md) to model the release's on`);
  if (allows.some((s) => list(s.Condition?.StringEqualsIgnoreCase?.[PCR(0)]).includes(pcrs[0]))) throw new Refused('the policy already allows this PCR0');
  const conditions: Record<string, string> = {};
  for (const index of [0, 1, 2, 8]) if (pcrs[index] !== undefined) conditions[PCR(index)] = pcrs[index];
  const statement: Statement = { ...template, Sid: sidFor(pcrs[0]), Condition: { StringEqualsIgnoreCase: conditions } };
  const statements = policy.Statement.map((s) => (s.Sid === DENY ? withDenied(s, [...denied(s), pcrs[0]]) : s));
  const at = statements.lastIndexOf(allows[allows.length - 1]);
  statements.splice(at + 1, 0, statement);
  return { ...policy, Statement: statements };
}

export function removeRelease(policy: Policy, pcr0: string): Policy {
  const allows = policy.Statement.filter(isAllow);
  const mine = allows.filter((s) => list(s.Condition?.StringEqualsIgnoreCase?.[PCR(0)]).includes(pcr0));
  if (mine.length === 0) throw new Refused('the policy does not allow this PCR0');
  if (mine.length === allows.length) throw new Refused('this is the only release the policy allows: removing it would lock every enclave out of the sealed data');
  return {
    ...policy,
    Statement: policy.Statement.filter((s) => !mine.includes(s)).map((s) => (s.Sid === DENY ? withDenied(s, denied(s).filter((v) => v !== pcr0)) : s)),
  };
}

function denied(s: Statement): string[] {
  return list(s.Condition?.StringNotEqualsIgnoreCase?.[PCR(0)]);
}

function withDenied(s: Statement, values: string[]): Statement {
  return { ...s, Condition: { ...s.Condition, StringNotEqualsIgnoreCase: { [PCR(0)]: values.length === 1 ? values[0] : values } } };
}

export async function main(argv: string[], out: (text: string) => void = (t) => process.stdout.write(t), err: (text: string) => void = (t) => process.stderr.write(t)): Promise<number> {
  let command: string | undefined;
  let values;
  try {
    const parsed = parseArgs({
      args: argv, allowPositionals: true, strict: true,
      options: { policy: { type: 'string' }, manifest: { type: 'string' }, 'operator-key': { type: 'string' }, out: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    });
    values = parsed.values;
    if (values.help) {
      out(`${USAGE}\n`);
      return 0;
    }
    command = parsed.positionals[0];
    if (parsed.positionals.length !== 1 || (command !== 'add' && command !== 'remove')) throw new Error('give one command: add or remove');
    if (!values.policy || !values.manifest || !values['operator-key']) throw new Error('--policy, --manifest and --operator-key are required');
  } catch (error) {
    err(`kms-policy: ${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  try {
    const operatorKey = parsePublicKey(values['operator-key']);
    if (!operatorKey) throw new Refused('--operator-key must be a 32-byte Ed25519 public key in base64 or hex');
    // Only PCRs the operator signed reach the key policy: a swapped measurements file on the
    // build machine would otherwise open the sealed data to another image.
    const { manifest } = verifyManifest(await readFile(values.manifest, 'utf8'), operatorKey);
    const pcrs = Object.fromEntries(Object.entries(manifest.pcrs).map(([i, v]) => [Number(i), v.toLowerCase()])) as Record<number, string>;
    if (/^0+$/.test(pcrs[0] ?? '')) throw new Refused('PCR0 is all zeros: a debug-mode enclave, whose memory the host can read');
    const policy = JSON.parse(await readFile(values.policy, 'utf8')) as Policy;
    if (!Array.isArray(policy.Statement)) throw new Refused(`${values.policy} has no Statement list`);
    const next = command === 'add' ? addRelease(policy, pcrs) : removeRelease(policy, pcrs[0]);
    const text = `${JSON.stringify(next, null, 2)}\n`;
    if (values.out) await writeFile(values.out, text);
    else out(text);
    err(`kms-policy: ${command === 'add' ? 'added' : 'removed'} release ${manifest.version} (PCR0 ${pcrs[0].slice(0, 16)}…)\n`);
    return 0;
  } catch (error) {
    err(`kms-policy: refused: ${(error as Error).message}\n`);
    return 1;
  }
}

if (invokedDirectly(import.meta.url)) process.exitCode = await main(process.argv.slice(2));
