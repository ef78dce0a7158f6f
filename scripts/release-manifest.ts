#!/usr/bin/env node
/**
 * release-manifest: writes the signed release manifest clients pin PCRs from
 * (sdk/attestation/manifest.ts; deploy/README.md, "Publish the PCRs"). Run it on the
 * machine that holds the operator's private key.
 * Exit status: 0 written, 1 refused (unreadable key, measurements or service), 2 usage error.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { connect } from '../sdk/client.js';
import { manifestSigningBytes, MANIFEST_TYPE, verifyManifest, type JsonValue, type ReleaseManifest, type SignedManifest } from '../sdk/attestation/manifest.js';
import { parseNitroMeasurements } from './lib/nitro-measurements.js';
import { parseOperatorSigningKey } from './lib/operator-signing-key.js';
import { invokedDirectly } from '../sdk/bin/invoked-directly.js';

export const USAGE = `Usage: release-manifest --key <operator key> --release <name> <measurements> [options]

Signs the PCRs of a build with the operator key, for clients to pin
(agent-verify --manifest, the sdk's connect({ manifest, operatorKey })).

  --key <file>           operator private key: PEM (openssl genpkey -algorithm ed25519) or,
                         for a local simulated service, $DATA_DIR/operator-key.json
  --release <name>       the release's name, e.g. a git tag
Measurements, one of:
  --measurements <file>  output of nitro-cli build-enclave or describe-eif (PCR0, 1, 2, and 8 if signed)
  --pcr <index>=<hex>    a PCR value, repeatable (PCR0, 1 and 2 at least)
  --from-service <url>   the PCRs a running service attests (with --root): for the simulated
                         TEE, whose PCRs are measured at start; its operator key must be --key's
Options:
  --root <pem-file>      root to verify --from-service against (default: AWS Nitro Root G1)
  --tee <name>           tee_name (default aws-nitro-enclaves; the service's with --from-service)
  --image <key>=<value>  what was built (image digests, .eif hash…), repeatable; signed
  --source <key>=<value> what it was built from (commit, lockfile hashes…), repeatable; signed
  --out <file>           write here instead of stdout
  -h, --help             show this help`;

class Usage extends Error {}

interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  now: () => Date;
}

const defaultIo: Io = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(`${text}\n`),
  now: () => new Date(),
};

export async function main(argv: string[], io: Io = defaultIo): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        key: { type: 'string' },
        release: { type: 'string' },
        measurements: { type: 'string' },
        pcr: { type: 'string', multiple: true },
        'from-service': { type: 'string' },
        root: { type: 'string' },
        tee: { type: 'string' },
        image: { type: 'string', multiple: true },
        source: { type: 'string', multiple: true },
        out: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
    if (values.help) {
      io.out(`${USAGE}\n`);
      return 0;
    }
    if (!values.key) throw new Usage('--key is required');
    if (!values.release) throw new Usage('--release is required');
    const sources = [values.measurements, values.pcr, values['from-service']].filter((v) => v !== undefined);
    if (sources.length !== 1) throw new Usage('give the measurements one way: --measurements, --pcr or --from-service');
    if (values.root !== undefined && values['from-service'] === undefined) throw new Usage('--root goes with --from-service');
  } catch (error) {
    io.err(`release-manifest: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }

  try {
    const key = parseOperatorSigningKey(await readFile(values.key, 'utf8'), values.key);
    let pcrs: Record<number, string>;
    let teeName = values.tee ?? 'aws-nitro-enclaves';
    if (values.measurements !== undefined) {
      pcrs = parseNitroMeasurements(await readFile(values.measurements, 'utf8'), values.measurements);
    } else if (values.pcr !== undefined) {
      pcrs = parsePcrArgs(values.pcr);
    } else {
      const attested = await attestedPcrs(values['from-service'] as string, values.root, key.publicKey);
      pcrs = attested.pcrs;
      teeName = values.tee ?? attested.teeName;
    }
    const manifest: ReleaseManifest = {
      type: MANIFEST_TYPE,
      version: values.release,
      tee_name: teeName,
      pcrs: Object.fromEntries(Object.entries(pcrs).map(([i, v]) => [i, v.toLowerCase()])),
      operator_pubkey: Buffer.from(key.publicKey).toString('base64'),
      created_at: io.now().toISOString(),
      ...(values.image ? { image: keyValues(values.image, '--image') } : {}),
      ...(values.source ? { source: keyValues(values.source, '--source') } : {}),
    };
    const signed: SignedManifest = { manifest, signature: Buffer.from(key.sign(manifestSigningBytes(manifest))).toString('base64') };
    // Check what we are about to publish exactly as a client will.
    verifyManifest(JSON.stringify(signed), key.publicKey);
    const text = `${JSON.stringify(signed, null, 2)}\n`;
    if (values.out) {
      await writeFile(values.out, text);
      io.err(`release-manifest: wrote ${values.out} (${Object.keys(pcrs).map((i) => `PCR${i}`).join(', ')}; operator key ${manifest.operator_pubkey})`);
    } else {
      io.out(text);
    }
    return 0;
  } catch (error) {
    io.err(`release-manifest: ${error instanceof Usage ? '' : 'refused: '}${(error as Error).message}`);
    return error instanceof Usage ? 2 : 1;
  }
}

function parsePcrArgs(specs: string[]): Record<number, string> {
  const pcrs: Record<number, string> = {};
  for (const spec of specs) {
    const match = /^(\d|[12]\d|3[01])=([0-9a-fA-F]{96})$/.exec(spec);
    if (!match) throw new Usage(`--pcr must be <index 0-31>=<96 hex digits>, got "${spec}"`);
    if (match[1] in pcrs) throw new Usage(`--pcr ${match[1]} given twice`);
    pcrs[Number(match[1])] = match[2];
  }
  return pcrs;
}

function keyValues(specs: string[], flag: string): Record<string, JsonValue> {
  const entries: Record<string, JsonValue> = {};
  for (const spec of specs) {
    const at = spec.indexOf('=');
    if (at <= 0) throw new Usage(`${flag} must be <key>=<value>, got "${spec}"`);
    entries[spec.slice(0, at)] = spec.slice(at + 1);
  }
  return entries;
}

/**
 * PCR0, 1, 2 (and 8 when set) of a running service, from a document verified against the
 * root with a fresh nonce. Only meaningful for the simulated TEE, where the enclave measures
 * itself: for Nitro, take the measurements from the build, not from a running enclave.
 */
async function attestedPcrs(url: string, rootFile: string | undefined, operatorKey: Uint8Array): Promise<{ pcrs: Record<number, string>; teeName: string }> {
  const rootPem = rootFile === undefined ? undefined : await readFile(rootFile, 'utf8');
  // Pinning the operator key: a manifest signed by this key for a service that binds another would fail every client.
  const tee = await connect({ baseUrl: url, rootPem, operatorKey, insecureSkipPcrPinning: true });
  const attested = tee.attestation.document.pcrs;
  const pcrs: Record<number, string> = {};
  for (const index of [0, 1, 2, 8]) {
    const value = attested[index];
    // PCR8 (the image's signing certificate) only when the image is signed, i.e. not all zeros.
    if (index === 8 && (value === undefined || /^0+$/.test(value))) continue;
    if (value === undefined) throw new Error(`${url} attests no PCR${index}`);
    pcrs[index] = value;
  }
  return { pcrs, teeName: tee.attestation.teeName };
}

if (invokedDirectly(import.meta.url)) process.exitCode = await main(process.argv.slice(2));
